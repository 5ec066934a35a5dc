package store

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/turnstile-gw/turnstile/metrics"
)

// A session handed to a person (the model's request_human) keeps the
// hand-off in its record, field "handoff" of the meta hash, until an
// operator or the help desk hands it back: every node that resumes the
// session reads it there. It is written only by HandOff, EndHandoff and a
// whole-session write (Create, Restore), never by a turn's write, so that a
// hand-back cannot be undone by the owner's next write.

var (
	//go:embed handoff_set.lua
	handoffSetLua string
	//go:embed handoff_end.lua
	handoffEndLua string

	handoffSetScript = ownedScript(handoffSetLua)
	handoffEndScript = operatorScript(handoffEndLua)
)

// fieldHandoff of the meta hash: the session's hand-off (JSON), absent
// when the model has the conversation.
const fieldHandoff = "handoff"

// Handoff is a session handed to a person: why, the model's summary, and
// when. The zero Handoff is none.
type Handoff struct {
	Reason  string    `json:"reason"`
	Summary string    `json:"summary,omitempty"`
	At      time.Time `json:"at"`
}

// Active reports whether the session is handed off.
func (h Handoff) Active() bool { return !h.At.IsZero() }

// encodeHandoff is the meta field's value: "" for none.
func encodeHandoff(h Handoff) string {
	if !h.Active() {
		return ""
	}
	b, _ := MarshalJSON(h)
	return string(b)
}

// parseHandoff reads the meta field; a value that does not parse is none.
func parseHandoff(v string) Handoff {
	var h Handoff
	if v == "" || json.Unmarshal([]byte(v), &h) != nil {
		return Handoff{}
	}
	return h
}

// ErrNotHandedOff is returned by EndHandoff for a session the model has.
var ErrNotHandedOff = errors.New("the session is not handed off")

// HandOff records rec's hand-off h as its owner (fenced, as Append), with
// event (JSON) on its timeline and, when the event stream is configured,
// record (JSON) on it, in one round trip.
func (s *RedisStore) HandOff(ctx context.Context, rec Record, h Handoff, event, record []byte) error {
	return s.call(ctx, metrics.RedisHandoff, func(ctx context.Context) error {
		sc := scriptCall{handoffSetScript, []string{metaKey(rec.ID), timelineKey(rec.ID)},
			[]any{rec.Epoch, s.ttl.Milliseconds(), s.timelineMax, encodeHandoff(h), event}}
		var cmd *redis.Cmd
		_, _ = s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
			cmd = sc.queue(ctx, p)
			if s.eventsStream != "" && record != nil {
				_ = p.Process(ctx, s.streamCmd(ctx, rec.ID, record))
			}
			return nil
		})
		cmd = sc.settle(ctx, s.c, cmd)
		return writeResult(rec.ID, "handoff", cmd)
	})
}

// EndHandoff hands session id back to the model: the hand-off leaves its
// record, event (JSON) goes on its timeline and on the event stream, and
// the node that holds the session hears it (Watcher's HandedBack). It
// reports false when there is no such session, and ErrNotHandedOff when the
// model has it.
func (s *RedisStore) EndHandoff(ctx context.Context, id string, event []byte) (bool, error) {
	var found bool
	err := s.call(ctx, metrics.RedisOperator, func(ctx context.Context) error {
		if !validID(id) {
			return nil
		}
		n, err := handoffEndScript.Run(ctx, s.c, []string{metaKey(id), timelineKey(id)},
			ownersChannel, id, event, s.timelineMax).Int()
		switch {
		case err != nil:
			return fmt.Errorf("session %s: hand back: %w", id, err)
		case n == 2:
			found = true
			return ErrNotHandedOff
		case n == 1 && s.eventsStream != "":
			// After the hand-back itself: a stream that refuses the record
			// does not undo it.
			_ = s.c.Process(ctx, s.streamCmd(ctx, id, event))
		}
		found = n == 1
		return nil
	})
	return found, err
}
