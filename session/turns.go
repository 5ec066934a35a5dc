package session

import (
	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/session/turnrec"
	"github.com/turnstile-gw/turnstile/store"
)

// turnDeps are what every turn of the session begins with, text or voice
// (turnrec.Begin): its policy, its trace and, at its end, turnSink.
func (s *session) turnDeps() turnrec.Deps {
	return turnrec.Deps{Conversation: s.conversation(), Tracing: s.m.Tracing, Link: s.link(), Sink: turnSink{s}}
}

// turnSink is the session's record of a finished turn, text or voice.
type turnSink struct{ s *session }

// TurnEnded adds the turn's entries not stored yet (a voice turn's
// transcripts) to the history, with a voice turn's newest resumption
// handle, closes its timeline entry, and queues the store write, which
// reads the user's block in the same round trip: a block set on another
// node meanwhile applies here (in voice, it ends voice).
func (k turnSink) TurnEnded(e turnrec.End) {
	s := k.s
	mark := s.st.append(e.Entries)
	if e.Mode == protocol.ModeVoice {
		s.st.update(func(rec *store.Record) { rec.ResumeHandle = e.Handle })
	}
	t, ok := s.timeline().Finish(e.N, string(e.Reason), e.Input, e.Answer, e.VoiceResponse)
	s.storeTurnEnd(e.Entries, mark, t, ok)
}
