package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/turnstile-gw/turnstile/internal/clock"
	"github.com/turnstile-gw/turnstile/metrics"
)

// ownersChannel is the pub/sub channel on which every resume announces the
// session's new owner as "<epoch> <session id>". Each node holds one
// subscription to it (Watch), so that the connection that lost a session,
// on whatever node, closes within moments even when it is idle. Resumes
// are rare next to everything else, so one channel for all sessions costs
// less than a channel (and a subscription change) per live session.
const ownersChannel = "turnstile:owners"

// nodeKey is a node's marker: Watch keeps it alive, and finding it gone
// means that Redis lost its data (restarted empty, flushed).
func nodeKey(node string) string { return "turnstile:node:{" + node + "}" }

// Watch runs until ctx ends: it hears ownership announcements (Owner) and,
// every WatchInterval, refreshes this node's marker; when Redis answers
// again after failing, or the marker is gone, or Redis confirmed the
// subscription (the first time or again), it asks w to Check the live
// sessions. A marker that was set once and is gone says that Redis lost
// its data: w hears Lost first. It uses one
// goroutine, the caller's, and one Redis connection for the subscription.
func (s *RedisStore) Watch(ctx context.Context, node string, w Watcher) error {
	if node == "" || strings.ContainsAny(node, "{}") {
		return fmt.Errorf("store watch: invalid node name %q", node)
	}
	ps := s.c.Subscribe(ctx, ownersChannel)
	defer func() { _ = ps.Close() }()
	healthy := true // Redis is assumed up until a probe fails
	next := clock.Wall.Now()
	for ctx.Err() == nil {
		msg, err := ps.ReceiveTimeout(ctx, s.watchInterval)
		switch m := msg.(type) {
		case *redis.Message:
			announce(w, m.Payload)
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				// Announcements made before Redis confirmed the subscription
				// were missed, whether it is the first one (a marker check
				// may have run before it, when the confirmation is slow) or
				// a new connection's: check the live sessions now.
				w.Check()
			}
		}
		if err != nil && !isTimeout(err) {
			// Redis is away: do not spin on a connection that fails at once.
			select {
			case <-ctx.Done():
			case <-clock.Wall.After(s.watchInterval):
			}
		}
		if now := clock.Wall.Now(); !now.Before(next) {
			next = now.Add(s.watchInterval)
			present, lost, err := s.probeMarker(ctx, node)
			switch {
			case err != nil:
				healthy = false
			case !present || !healthy:
				if lost {
					w.Lost()
					s.lossPending.Delete(node)
				}
				healthy = true
				w.Check()
			}
		}
	}
	return nil
}

// probeMarker sets this node's marker and reports whether it was there,
// and whether its absence is a loss (it had been set before): the node is
// then in lossPending until its Watcher has heard Lost.
func (s *RedisStore) probeMarker(ctx context.Context, node string) (present, lost bool, err error) {
	s.markerMu.Lock()
	defer s.markerMu.Unlock()
	_, marked := s.marked.Load(node)
	present, err = s.touchMarker(ctx, node)
	if err == nil && !present && marked {
		lost = true
		s.lossPending.Store(node, struct{}{})
	}
	return present, lost, err
}

// touchMarker sets this node's marker and reports whether it was there.
func (s *RedisStore) touchMarker(ctx context.Context, node string) (bool, error) {
	var present bool
	err := s.call(ctx, metrics.RedisWatch, func(ctx context.Context) error {
		// Kept for a few intervals: a node that stalls briefly does not
		// mistake its own expired marker for lost data (and if it does,
		// a Check finds everything in place). Sent once: sent again after
		// its reply was lost, it would find its own marker.
		err := s.c.Process(ctx, once(ctx, "set", nodeKey(node), "1", "px", (10*s.watchInterval).Milliseconds(), "get"))
		switch {
		case errors.Is(err, redis.Nil):
		case err != nil:
			return fmt.Errorf("store watch: %w", err)
		default:
			present = true
		}
		s.marked.Store(node, struct{}{})
		return nil
	})
	return present, err
}

// MarkerGone reports whether node's marker, which its Watch set, is gone
// from Redis: Redis lost its data, and Watch may not have noticed yet (it
// looks every WatchInterval) or is telling its Watcher (Lost has not
// returned). False before Watch set it the first time. One round trip,
// after any marker probe of Watch's under way.
func (s *RedisStore) MarkerGone(ctx context.Context, node string) (bool, error) {
	s.markerMu.Lock()
	defer s.markerMu.Unlock()
	if _, marked := s.marked.Load(node); !marked {
		return false, nil
	}
	if _, pending := s.lossPending.Load(node); pending {
		return true, nil
	}
	var gone bool
	err := s.call(ctx, metrics.RedisWatch, func(ctx context.Context) error {
		n, err := s.c.Exists(ctx, nodeKey(node)).Result()
		if err != nil {
			return fmt.Errorf("store watch: %w", err)
		}
		gone = n == 0
		return nil
	})
	return gone, err
}

// Epochs returns the stored epoch of each session (0: the record is gone)
// in one round trip.
func (s *RedisStore) Epochs(ctx context.Context, ids []string) ([]int64, error) {
	out := make([]int64, len(ids))
	err := s.call(ctx, metrics.RedisEpochs, func(ctx context.Context) error {
		cmds := make([]*redis.StringCmd, len(ids))
		_, err := s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, id := range ids {
				cmds[i] = p.HGet(ctx, metaKey(id), fieldEpoch)
			}
			return nil
		})
		if err != nil && !errors.Is(err, redis.Nil) {
			return fmt.Errorf("session epochs: %w", err)
		}
		for i, c := range cmds {
			v, err := c.Result()
			switch {
			case errors.Is(err, redis.Nil):
				continue
			case err != nil:
				return fmt.Errorf("session %s: epoch: %w", ids[i], err)
			}
			out[i], _ = strconv.ParseInt(v, 10, 64)
		}
		return nil
	})
	return out, err
}

// announce passes one message of the owners channel on to w: a new
// owner ("<epoch> <id>"), an operator's close ("close <id>") or a block
// set (by an operator or the model: "blocked <JSON>", blockAnnouncement;
// "block <user>" from a node of an earlier version) or lifted by an
// operator ("unblock <user>").
func announce(w Watcher, payload string) {
	verb, rest, _ := strings.Cut(payload, " ")
	switch verb {
	case "close":
		if validID(rest) {
			w.Closed(rest)
		}
	case "handback":
		if validID(rest) {
			w.HandedBack(rest)
		}
	case "blocked":
		var a announcedBlock
		if json.Unmarshal([]byte(rest), &a) == nil && a.User != "" {
			w.BlockChanged(a.User, &a.Block)
		}
	case "block", "unblock":
		if rest != "" {
			w.BlockChanged(rest, nil)
		}
	default:
		if id, epoch, ok := parseOwner(payload); ok {
			w.Owner(id, epoch)
		}
	}
}

func parseOwner(payload string) (string, int64, bool) {
	e, id, ok := strings.Cut(payload, " ")
	if !ok || !validID(id) {
		return "", 0, false
	}
	epoch, err := strconv.ParseInt(e, 10, 64)
	return id, epoch, err == nil && epoch > 0
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
