package voice

import "time"

// speechEnd tracks the end of the user's speech for the voice-to-voice
// latency (turnstile_voice_response_seconds): the time of the last
// microphone frame the energy check heard speech in, or of the client's
// audio.end after it (a client with its own voice detection says there
// that the user is done), since the model last answered.
//
// An answer is the first model audio of a turn handed to the browser: it
// is measured from the mark, which it consumes. Speech heard while the
// model answers (a barge-in) marks again, for the turn that answers it. A
// turn that completes without audio answered the speech heard before its
// first output: that mark is dropped, so a later answer is never timed
// from speech it did not follow. Typed input drops the mark too: its
// answer follows the text, not the speech. The client's audio.end only
// moves a mark that speech set.
//
// It holds no lock of its own: the Session's mutex guards it.
type speechEnd struct{ at time.Time }

// mark records the end of speech so far: a frame with speech, or the
// client's audio.end.
func (s *speechEnd) mark(now time.Time) { s.at = now }

// clientEnd records the client's audio.end: it moves the end of the
// speech heard before it there. With no speech heard since the last answer
// it marks nothing: a microphone muted after the answer is no question.
func (s *speechEnd) clientEnd(now time.Time) {
	if !s.at.IsZero() {
		s.at = now
	}
}

// answered is the first audio of a turn's answer, at now: it returns the
// latency from the mark and consumes it; false when no speech was marked.
func (s *speechEnd) answered(now time.Time) (time.Duration, bool) {
	if s.at.IsZero() {
		return 0, false
	}
	d := max(now.Sub(s.at), 0)
	s.at = time.Time{}
	return d, true
}

// silent is a turn that completed without audio whose model output began
// at began: the speech marked before then is answered.
func (s *speechEnd) silent(began time.Time) {
	if !s.at.IsZero() && !began.IsZero() && !s.at.After(began) {
		s.at = time.Time{}
	}
}

// clear drops the mark: input that is not speech (typed text, a
// confirmation, the gateway's note) came after it.
func (s *speechEnd) clear() { s.at = time.Time{} }
