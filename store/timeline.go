package store

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/turnstile-gw/turnstile/metrics"
	"github.com/turnstile-gw/turnstile/transport"
)

// A session's timeline (package timeline) is a list on the session's hash
// tag, turnstile:{<id>}:timeline, of JSON entries, the newest TimelineMax
// kept, written with the turn's end; the event stream, when configured,
// gets each turn's entry in the same round trip. The live index,
// turnstile:live, is a sorted set of "<session> <node>" members scored by
// when they stop counting, renewed by the node that holds the session.

var (
	//go:embed timeline_push.lua
	timelinePushLua string
	//go:embed session_close.lua
	sessionCloseLua string

	timelinePushScript = ownedScript(timelinePushLua)
	sessionCloseScript = operatorScript(sessionCloseLua)
)

// liveKey is the live index of every node.
const liveKey = "turnstile:live"

// DefaultTimelineMax is how many entries a session's timeline keeps.
const DefaultTimelineMax = 200

// DefaultEventsMaxLen is the approximate length the event stream is
// trimmed to.
const DefaultEventsMaxLen = 100000

// fieldClosed of the meta hash: set when an operator closed the session.
const fieldClosed = "closed"

func timelineKey(id string) string { return "turnstile:{" + id + "}:timeline" }

// TurnEnd is what a finished turn writes besides the record's fields.
type TurnEnd struct {
	Entries []transport.Entry // history entries (a voice turn's transcripts)
	// Turn is the turn's timeline entry (JSON); nil: none. It also goes to
	// the event stream.
	Turn []byte
	// Events are timeline events (JSON) that waited for this write.
	Events [][]byte
}

// EndTurn writes a turn's end in one round trip: the history entries and
// the record's fields (fenced, as Append), the timeline entries (fenced),
// the turn's entry on the event stream, and a read of the user's block, so
// that a block set on another node stops this session at its turn's end.
func (s *RedisStore) EndTurn(ctx context.Context, rec Record, end TurnEnd) (Block, error) {
	var b Block
	err := s.call(ctx, metrics.RedisAppend, func(ctx context.Context) error {
		app, n, err := s.appendCall(rec, 0, end.Entries)
		if err != nil {
			return err
		}
		charge, counted := s.chargeCall(rec, chargeAdd, n, false)
		tl, hasTL := s.timelineCall(rec, end.Turn, end.Events)
		var (
			appCmd, tlCmd, chargeCmd *redis.Cmd
			blk                      *redis.StringCmd
		)
		_, _ = s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
			appCmd = app.queue(ctx, p)
			blk = p.Get(ctx, blockKey(rec.UserID))
			if hasTL {
				tlCmd = tl.queue(ctx, p)
			}
			if s.eventsStream != "" && end.Turn != nil {
				_ = p.Process(ctx, s.streamCmd(ctx, rec.ID, end.Turn))
			}
			if counted && n > 0 {
				chargeCmd = charge.queue(ctx, p)
			}
			return nil
		})
		if chargeCmd != nil {
			_ = charge.settle(ctx, s.c, chargeCmd) // a count that failed catches up at the next resume
		}
		if err := writeResult(rec.ID, "append", app.settle(ctx, s.c, appCmd)); err != nil {
			return err
		}
		if hasTL {
			if err := writeResult(rec.ID, "timeline", tl.settle(ctx, s.c, tlCmd)); err != nil {
				return err
			}
		}
		b = readBlock(blk)
		return nil
	})
	return b, err
}

// streamCmd is the XADD of a record on the event stream: approximate
// MAXLEN, so that trimming costs nothing per entry. Sent once: sent again
// after its reply was lost, it would add a second record.
func (s *RedisStore) streamCmd(ctx context.Context, id string, turn []byte) onceCmd {
	return once(ctx, "xadd", s.eventsStream, "maxlen", "~", s.eventsMaxLen, "*", "session", id, "record", turn)
}

// timelineCall is the timeline script for entries; false when there are
// none.
func (s *RedisStore) timelineCall(rec Record, turn []byte, events [][]byte) (scriptCall, bool) {
	args := make([]any, 0, 4+len(events))
	args = append(args, rec.Epoch, s.ttl.Milliseconds(), s.timelineMax)
	for _, e := range events {
		args = append(args, e)
	}
	if turn != nil {
		args = append(args, turn)
	}
	if len(args) == 3 {
		return scriptCall{}, false
	}
	return scriptCall{timelinePushScript, []string{metaKey(rec.ID), timelineKey(rec.ID)}, args}, true
}

// Leave writes what a connection of the session leaves behind (its close
// among events) and takes it out of the live index, in one round trip.
// The timeline write is fenced: a connection that lost the session writes
// nothing there.
func (s *RedisStore) Leave(ctx context.Context, rec Record, node string, events [][]byte) error {
	return s.call(ctx, metrics.RedisLeave, func(ctx context.Context) error {
		tl, hasTL := s.timelineCall(rec, nil, events)
		var tlCmd *redis.Cmd
		_, err := s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
			if hasTL {
				tlCmd = tl.queue(ctx, p)
			}
			p.ZRem(ctx, liveKey, liveMember(rec.ID, node))
			return nil
		})
		if hasTL {
			err = writeResult(rec.ID, "leave", tl.settle(ctx, s.c, tlCmd))
		}
		if err != nil && !errors.Is(err, ErrFenced) && !errors.Is(err, ErrSessionGone) {
			return fmt.Errorf("session %s: leave: %w", rec.ID, err)
		}
		return nil
	})
}

func liveMember(id, node string) string { return id + " " + node }

// holderKey names the node that last said it holds the session (kept as
// long as a live index member); the index says whether it still does.
func holderKey(id string) string { return "turnstile:{" + id + "}:node" }

// MarkLive says that node holds sessions ids until ttl from now (renewed
// well before), in one round trip per markLiveBatch of them; members past
// their time are dropped.
func (s *RedisStore) MarkLive(ctx context.Context, node string, ids []string, ttl time.Duration) error {
	return s.call(ctx, metrics.RedisLive, func(ctx context.Context) error {
		now := s.now()
		until := float64(now.Add(ttl).UnixMilli())
		for first := true; first || len(ids) > 0; first = false {
			batch := ids[:min(len(ids), markLiveBatch)]
			ids = ids[len(batch):]
			_, err := s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
				if first {
					p.ZRemRangeByScore(ctx, liveKey, "-inf", strconv.FormatInt(now.UnixMilli(), 10))
				}
				if len(batch) > 0 {
					zs := make([]redis.Z, len(batch))
					for i, id := range batch {
						zs[i] = redis.Z{Score: until, Member: liveMember(id, node)}
					}
					p.ZAdd(ctx, liveKey, zs...)
					// Every key has a TTL: the index lives while some node renews it.
					p.PExpire(ctx, liveKey, ttl)
					for _, id := range batch {
						p.Set(ctx, holderKey(id), node, ttl)
					}
				}
				return nil
			})
			if err != nil {
				return fmt.Errorf("live index: %w", err)
			}
		}
		return nil
	})
}

// markLiveBatch bounds the sessions one pipeline of MarkLive renews: the
// commands of a pipeline are all built before it is sent, about 0.4 KiB a
// session, so a node of 20 000 sessions renewing them at once would hold
// 8 MB of them every renewal (a third of the live TTL), which the
// collector's headroom must make room for. In batches it holds 0.2 MB, at
// the cost of a round trip per 512 sessions.
const markLiveBatch = 512

// LiveSession is a session a node holds now.
type LiveSession struct {
	Record
	Node string
}

// LiveSessions lists up to max sessions held by a node now, newest
// renewal first, with their records, in two round trips. A session held
// twice for a moment (a resume on another node) is listed once.
func (s *RedisStore) LiveSessions(ctx context.Context, max int) ([]LiveSession, error) {
	var out []LiveSession
	err := s.call(ctx, metrics.RedisLive, func(ctx context.Context) error {
		members, err := s.c.ZRevRangeByScore(ctx, liveKey, &redis.ZRangeBy{
			Min: "(" + strconv.FormatInt(s.now().UnixMilli(), 10), Max: "+inf", Count: int64(max)}).Result()
		if err != nil {
			return fmt.Errorf("live sessions: %w", err)
		}
		seen := map[string]bool{}
		var ids, nodes []string
		for _, m := range members {
			id, node, ok := strings.Cut(m, " ")
			if !ok || seen[id] || !validID(id) {
				continue
			}
			seen[id] = true
			ids, nodes = append(ids, id), append(nodes, node)
		}
		metas := make([]*redis.MapStringStringCmd, len(ids))
		_, _ = s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, id := range ids {
				metas[i] = p.HGetAll(ctx, metaKey(id))
			}
			return nil
		})
		for i, m := range metas {
			rec, err := parseRecord(ids[i], m.Val())
			if err != nil {
				continue // expired or lost meanwhile
			}
			out = append(out, LiveSession{Record: rec, Node: nodes[i]})
		}
		return nil
	})
	return out, err
}

// SessionTimeline is what the store holds of a session for its timeline.
type SessionTimeline struct {
	Record
	// Closed is who closed the session and why, when an operator did.
	Closed string
	// Node holds it now ("" when no connection of it is live).
	Node string
	// Entries are the timeline's entries (JSON), oldest first; Full is true
	// when the timeline holds its maximum (older ones may be gone).
	Entries []string
	Full    bool
}

// Timeline reads a session's record, timeline and holder in one round
// trip (two when a node holds it); ErrSessionGone when there is no such session.
func (s *RedisStore) Timeline(ctx context.Context, id string) (SessionTimeline, error) {
	var out SessionTimeline
	err := s.call(ctx, metrics.RedisTimeline, func(ctx context.Context) error {
		if !validID(id) {
			return fmt.Errorf("session %q: timeline: %w", id, ErrSessionGone)
		}
		var (
			meta *redis.MapStringStringCmd
			list *redis.StringSliceCmd
			node *redis.StringCmd
		)
		_, _ = s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
			meta = p.HGetAll(ctx, metaKey(id))
			list = p.LRange(ctx, timelineKey(id), 0, -1)
			node = p.Get(ctx, holderKey(id))
			return nil
		})
		if err := meta.Err(); err != nil {
			return fmt.Errorf("session %s: timeline: %w", id, err)
		}
		if len(meta.Val()) == 0 {
			return fmt.Errorf("session %s: timeline: %w", id, ErrSessionGone)
		}
		rec, err := parseRecord(id, meta.Val())
		if err != nil {
			return fmt.Errorf("session %s: timeline: %w", id, err)
		}
		out = SessionTimeline{Record: rec, Closed: meta.Val()[fieldClosed], Entries: list.Val()}
		out.Full = len(out.Entries) >= s.timelineMax
		if n := node.Val(); n != "" {
			// Still held: its member in the live index has not expired nor
			// been taken out by the connection's end.
			score, err := s.c.ZScore(ctx, liveKey, liveMember(id, n)).Result()
			if err == nil && int64(score) > s.now().UnixMilli() {
				out.Node = n
			}
		}
		return nil
	})
	return out, err
}

// CloseSession ends a session for an operator: a resume is refused from
// now on, and the node that holds it closes its connection (Watcher's
// Closed); event (JSON) goes on its timeline. by says who and why. It
// reports false when there is no such session. One round trip.
func (s *RedisStore) CloseSession(ctx context.Context, id, by string, event []byte) (bool, error) {
	var found bool
	err := s.call(ctx, metrics.RedisOperator, func(ctx context.Context) error {
		if !validID(id) {
			return nil
		}
		n, err := sessionCloseScript.Run(ctx, s.c, []string{metaKey(id), timelineKey(id)},
			by, ownersChannel, id, event, s.timelineMax).Int()
		if err != nil {
			return fmt.Errorf("session %s: close: %w", id, err)
		}
		found = n == 1
		return nil
	})
	return found, err
}

// SetBlock sets a user's block as an operator says (replacing a longer
// one, unlike BlockUser) and tells every node at once, with the block
// (Watcher's BlockChanged), in one round trip.
func (s *RedisStore) SetBlock(ctx context.Context, user string, b Block) error {
	return s.call(ctx, metrics.RedisOperator, func(ctx context.Context) error {
		_, err := s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, blockKey(user), encodeBlock(b), b.Until.Sub(s.now()))
			p.Publish(ctx, ownersChannel, blockAnnouncement(user, b))
			return nil
		})
		if err != nil {
			return fmt.Errorf("user block: %w", err)
		}
		return nil
	})
}

// LiftBlock ends a user's block and tells every node at once; it reports
// whether there was one. The user's strikes (Strike) are forgiven too: an
// operator lifts a block that should not have been, and the next one
// starts short again.
func (s *RedisStore) LiftBlock(ctx context.Context, user string) (bool, error) {
	var had bool
	err := s.call(ctx, metrics.RedisOperator, func(ctx context.Context) error {
		// Sent once: sent again after its reply was lost, the DEL would
		// find nothing and the operator be told there was no block.
		del := once(ctx, "del", blockKey(user))
		_, err := s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
			_ = p.Process(ctx, del)
			p.Del(ctx, strikesKey(user))
			p.Publish(ctx, ownersChannel, "unblock "+user)
			return nil
		})
		if err != nil {
			return fmt.Errorf("user block: %w", err)
		}
		n, _ := del.Int()
		had = n > 0
		return nil
	})
	return had, err
}
