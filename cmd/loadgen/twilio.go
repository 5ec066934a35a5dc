package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/coder/websocket"

	"github.com/turnstile-gw/turnstile/telephony/twilio/caller"
)

// A phone call (-client twilio) is a voiceSession whose connection is a
// Twilio Media Stream placed by telephony/twilio/caller: the voice webhook,
// the TwiML's signed stream, then 20 ms μ-law media frames. A call is in
// voice from its start: there is no session.start or voice.start.

// callerNumber is the caller's number of call i: each call its own, so
// that per-user limits (a caller's number is its user) do not refuse them.
func callerNumber(i int64) string { return fmt.Sprintf("+1555%07d", i%10_000_000) }

// dial places the call: webhook, stream, connected and start.
func (s *voiceSession) dial(ctx context.Context) error {
	dctx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	p := s.plan
	c, err := caller.Dial(dctx, caller.Config{
		WebhookURL: p.url, AuthToken: p.twilioAuthToken, HTTPClient: p.client,
		From: callerNumber(p.calls.Add(1)), To: "+15550000000",
	})
	if err != nil {
		var ae *caller.AnswerError
		if errors.As(err, &ae) {
			return fmt.Errorf("connect: http %d", ae.Status)
		}
		return errors.New("connect")
	}
	s.call = c
	s.mu.Lock()
	s.res.voice = true
	s.mu.Unlock()
	return nil
}

// sendChunk sends one relay chunk over the session's connection.
func (s *voiceSession) sendChunk(chunk []byte) error {
	if s.call == nil {
		return s.write(websocket.MessageBinary, chunk)
	}
	wctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	defer cancel()
	return s.call.SendMedia(wctx, chunk)
}

// readCall drains what the gateway sends a call until it ends: media is
// an answer, a mark is echoed at once (as Twilio does once the audio
// before it has played; nothing plays here), clear is a barge-in.
func (s *voiceSession) readCall() {
	defer close(s.readDone)
	for {
		m, err := s.call.Next(context.Background())
		if err != nil {
			if errors.Is(err, caller.ErrBadFrame) {
				s.count("bad event")
				continue
			}
			if !s.closing.Load() {
				if code := caller.CloseStatus(err); code != -1 {
					s.fail(fmt.Sprintf("close %d", code))
				} else {
					s.fail("read")
				}
			}
			return
		}
		switch m.Kind {
		case caller.Media:
			now := time.Now()
			if s.probe != nil {
				s.probe.onMulaw(m.Audio, now)
			}
			s.onAudio(now, len(m.Audio))
		case caller.Mark:
			wctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
			err := s.call.SendMark(wctx, m.Name)
			cancel()
			if err != nil && !s.closing.Load() {
				s.fail("write")
				return
			}
		case caller.Clear:
			s.mu.Lock()
			s.res.interrupted++
			s.mu.Unlock()
		}
	}
}

// hangUp ends the session's connection: a call with stop and a normal
// close, a browser session with a normal close; or at once when the
// session broke.
func (s *voiceSession) hangUp(ended bool) {
	switch {
	case s.call != nil && ended:
		ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
		defer cancel()
		_ = s.call.Hangup(ctx)
	case s.call != nil:
		_ = s.call.Close()
	case ended:
		_ = s.conn.Close(websocket.StatusNormalClosure, "load test done")
	default:
		_ = s.conn.CloseNow()
	}
}
