package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/turnstile-gw/turnstile/protocol"
)

// A session's life on this node as the metrics see it: started (new or
// resumed), live in a mode, ended by a protocol.Disconnect; the messages
// its browser sends; the time the relay adds to its audio.

// SessionStart is how a session began, the kind label of
// turnstile_sessions_started_total. A closed set: SessionStartKinds.
type SessionStart string

const (
	SessionNew     SessionStart = "new"
	SessionResumed SessionStart = "resumed"
)

// SessionStartKinds lists the kinds.
var SessionStartKinds = []SessionStart{SessionNew, SessionResumed}

// SessionStarted counts a session started (kind) by a connection of
// channel ch.
func (m *Metrics) SessionStarted(kind SessionStart, ch Channel) {
	m.SessionsStarted.WithLabelValues(string(kind), ch.String()).Inc()
}

// SessionLive counts a session of channel ch live on this node, in text
// (the mode every session starts in).
func (m *Metrics) SessionLive(ch Channel) {
	m.SessionsActive.WithLabelValues(string(protocol.ModeText), ch.String()).Inc()
	m.ChannelSessions.WithLabelValues(ch.String()).Inc()
}

// SessionMode moves a live session of channel ch from one mode to another.
func (m *Metrics) SessionMode(from, to protocol.Mode, ch Channel) {
	m.SessionsActive.WithLabelValues(string(from), ch.String()).Dec()
	m.SessionsActive.WithLabelValues(string(to), ch.String()).Inc()
}

// Disconnected counts a browser connection ended as d, whether or not a
// session was live on it.
func (m *Metrics) Disconnected(d protocol.Disconnect) {
	m.BrowserDisconnect.WithLabelValues(d.Label).Inc()
}

// SessionEnded records a live session of channel ch whose connection
// ended as d in mode: the gauges down, the end counted, how long it
// lasted and how many turns it took observed.
func (m *Metrics) SessionEnded(d protocol.Disconnect, ch Channel, mode protocol.Mode, lasted time.Duration, turns int) {
	m.ChannelSessions.WithLabelValues(ch.String()).Dec()
	m.ChannelSessionsEnded.WithLabelValues(ch.String(), d.Label).Inc()
	m.SessionsActive.WithLabelValues(string(mode), ch.String()).Dec()
	m.SessionDuration.Observe(lasted.Seconds())
	m.TurnsPerSession.Observe(float64(turns))
}

// The browser message labels beyond the protocol's client types.
const (
	browserAudio   = "audio"   // a binary frame: microphone audio
	browserInvalid = "invalid" // a frame the codec refused
)

// BrowserMessage counts a message of a protocol client type (one Decode
// accepted, so the label stays bounded).
func (m *Metrics) BrowserMessage(typ string) {
	m.BrowserMessages.WithLabelValues(typ).Inc()
}

// BrowserInvalid counts a frame the gateway refused.
func (m *Metrics) BrowserInvalid() {
	m.BrowserMessages.WithLabelValues(browserInvalid).Inc()
}

// BrowserAudio is the counter of microphone frames; a connection resolves
// it once, as frames come 50 a second.
func (m *Metrics) BrowserAudio() prometheus.Counter {
	return m.BrowserMessages.WithLabelValues(browserAudio)
}

// RelayDirection is which way audio crosses the relay, the direction
// label of turnstile_relay_added_seconds. A closed set: RelayDirections.
type RelayDirection string

const (
	RelayIn  RelayDirection = "in"  // a microphone frame read → written upstream
	RelayOut RelayDirection = "out" // model audio received → written to the connection
)

// RelayDirections lists the directions.
var RelayDirections = []RelayDirection{RelayIn, RelayOut}

// RelayObserver is the turnstile_relay_added_seconds series of a
// connection of channel ch in direction dir; a connection resolves it
// once, off the audio path.
func (m *Metrics) RelayObserver(ch Channel, dir RelayDirection) prometheus.Observer {
	return m.RelayAdded.WithLabelValues(ch.String(), string(dir))
}

// AudioPath is how a model-audio frame went out to its connection, the
// path label of turnstile_audio_out_frames_total. A closed set:
// AudioPaths.
type AudioPath string

const (
	AudioDirect AudioPath = "direct" // written by the voice pump itself
	AudioQueued AudioPath = "queued" // queued for the connection's writer
	AudioLoop   AudioPath = "loop"   // written to a socket an event loop serves (TURNSTILE_VOICE_LOOP)
)

// AudioPaths lists the paths.
var AudioPaths = []AudioPath{AudioDirect, AudioQueued, AudioLoop}

// AudioOutCounter is the turnstile_audio_out_frames_total series of a
// channel and path; a connection resolves it once, off the audio path.
func (m *Metrics) AudioOutCounter(ch Channel, p AudioPath) prometheus.Counter {
	return m.AudioOut.WithLabelValues(ch.String(), string(p))
}

// VoiceResponseObserver is the turnstile_voice_response_seconds series of
// channel ch; a voice session resolves it once.
func (m *Metrics) VoiceResponseObserver(ch Channel) prometheus.Observer {
	return m.VoiceResponse.WithLabelValues(ch.String())
}
