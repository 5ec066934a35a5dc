package metrics

// The Live upstream's events and the model audio a voice session did not
// play.

// LiveEvent is an event of a Live upstream connection, the event label of
// turnstile_upstream_events_total (kind live). A closed set: LiveEvents.
type LiveEvent string

const (
	LiveConnect LiveEvent = "connect" // a new upstream session opened
	LiveResume  LiveEvent = "resume"  // an upstream session resumed with its handle
	LiveGoAway  LiveEvent = "goaway"  // the upstream announced it will close
	LiveClose   LiveEvent = "close"   // the upstream closed
	LiveError   LiveEvent = "error"   // an open failed, or the upstream was lost for good
)

// LiveEvents lists the events.
var LiveEvents = []LiveEvent{LiveConnect, LiveResume, LiveGoAway, LiveClose, LiveError}

// The code label of turnstile_upstream_events_total beyond the close codes
// themselves (which appear as numbers when they happen).
const (
	UpstreamCodeNone = "none" // no close code
	UpstreamCodeLost = "lost" // the upstream could not be restored: the session closes 4102
)

// Upstream counts an event of a Live upstream, with its close code (a
// number as text) or UpstreamCodeNone / UpstreamCodeLost.
func (m *Metrics) Upstream(ev LiveEvent, code string) {
	m.UpstreamEvents.WithLabelValues("live", string(ev), code).Inc()
}

// VoiceDrop is why model audio was not played, the reason label of
// turnstile_voice_audio_dropped_seconds_total. A closed set:
// VoiceDropReasons.
type VoiceDrop string

const (
	DropSuppressAudio VoiceDrop = "suppress_audio" // a SUPPRESS_AUDIO intent
	DropTerminal      VoiceDrop = "terminal"       // a terminal tool's answer ended the turn
	DropInterrupted   VoiceDrop = "interrupted"    // a barge-in
)

// VoiceDropReasons lists the reasons.
var VoiceDropReasons = []VoiceDrop{DropSuppressAudio, DropTerminal, DropInterrupted}

// VoiceAudioDrop counts seconds of model audio of a session of channel ch
// generated (and billed) but not played, for reason r.
func (m *Metrics) VoiceAudioDrop(r VoiceDrop, ch Channel, seconds float64) {
	m.VoiceAudioDropped.WithLabelValues(string(r), ch.String()).Add(seconds)
}
