package session

import (
	"errors"
	"time"

	"github.com/turnstile-gw/turnstile/protocol"
)

// What the browser sends, read by the connection's reader: its text
// messages (handle: pings answered at once, auth once the session has
// started, the conversation's inputs handed to its goroutine, inbox.go)
// and its microphone audio (micAudio, sent up by the reader itself).

// handle acts on one text frame; false ends the connection.
func (c *conn) handle(s *session, data []byte) bool {
	msg, derr := protocol.Decode(data, protocol.Limits{MaxTextChars: c.m.cfg.MaxTextChars})
	if derr != nil {
		c.m.Metrics.BrowserInvalid()
		var de *protocol.DecodeError
		errors.As(derr, &de)
		c.send(protocol.NewError(de.Code, de.Message, false, 0))
		return true
	}
	c.m.Metrics.BrowserMessage(msg.Type)
	switch msg.Type {
	case protocol.TypePing:
		// At once while session.start waits for the store; once
		// session.ready is out, after the rest of the start (a voice
		// resume, the greeting), as it came before.
		if s.started.Load() {
			s.afterStart()
		}
		c.send(protocol.Pong{})
		return true
	case protocol.TypeSessionStart, protocol.TypeAuth, protocol.TypeAudioEnd:
	default:
		s.enqueue(msg) // the conversation's goroutine acts on it (inbox.go)
		return true
	}
	if !s.afterStart() {
		return true // the session did not start: the connection is closing
	}
	switch msg.Type {
	case protocol.TypeSessionStart:
		c.send(protocol.NewError(protocol.CodeBadMessage, "the session has already started", false, 0))
		c.close(protocol.DisconnectProtocolViolation)
		return false
	case protocol.TypeAuth:
		return c.reauth(msg.Token)
	default: // audio.end
		// With the audio it ends, which the reader sends up itself.
		if v := s.voiceSide(); v != nil {
			v.AudioEnd()
		}
	}
	return true
}

// micAudio takes one binary frame of microphone audio (PCM16LE 16 kHz); pcm
// is the reader's buffer and is not kept. Audio is paced (MicPace) before
// anything else, in text mode too.
func (c *conn) micAudio(s *session, now time.Time, pcm []byte) {
	if c.rates.pacesAudio() && len(pcm) > micBytesPerSecond {
		c.send(protocol.NewError(protocol.CodeBadMessage, "audio frames must be at most 1 s (32000 bytes)", false, 0))
		return
	}
	if !c.allowMic(now, len(pcm)) {
		return
	}
	v := s.voiceSide()
	switch {
	case v == nil:
		c.send(protocol.NewError(protocol.CodeBadMessage, "audio is only accepted in voice mode", false, 0))
	case len(pcm)%2 != 0:
		c.send(protocol.NewError(protocol.CodeBadMessage, "audio frames must hold whole 16-bit samples", false, 0))
	default:
		if !s.inputBlocked() && v.Mic(now, pcm) {
			// now is when the frame was read: the in-relay sample runs
			// from there to the end of its upstream write.
			c.micSent(now)
			c.micReads(s)
		}
	}
}
