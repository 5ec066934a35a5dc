package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/turnstile-gw/turnstile/internal/settings"
	"github.com/turnstile-gw/turnstile/store"
)

// eventsPoll is how long one XREAD waits for new records before asking
// again (and noticing an interrupt).
const eventsPoll = 2 * time.Second

// Events runs `gateway events tail`: it prints the event stream's
// records (one finished turn's timeline entry a line, as JSON), from the
// newest on (-from $, the default) or from an ID (-from 0: the start),
// until interrupted or -count records were printed.
func Events(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "tail" {
		fmt.Fprintln(stderr, "usage: gateway events tail [-stream KEY] [-from ID] [-count N]")
		return 2
	}
	// The gateway's own settings of its Redis and its stream, read and
	// checked as the gateway reads them (store/settings.go).
	var r store.Redis
	if err := settings.Read(&r, append(store.ConnectionSettings(), store.EventsStreamSetting()), getenv); err != nil {
		eventsError(stderr, err)
		return 2
	}
	fs := flag.NewFlagSet("gateway events tail", flag.ContinueOnError)
	fs.SetOutput(stderr)
	stream := fs.String("stream", r.EventsStream, "the stream key (default: $TURNSTILE_EVENTS_STREAM)")
	from := fs.String("from", "$", "print records after this ID: $ only new ones, 0 from the start")
	count := fs.Int("count", 0, "stop after this many records (0: follow until interrupted)")
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *stream == "" {
		fmt.Fprintln(stderr, "gateway events tail: TURNSTILE_EVENTS_STREAM (or -stream) is required")
		return 2
	}
	if r.RedisURL == "" {
		fmt.Fprintln(stderr, "gateway events tail: REDIS_URL is required (the gateway's Redis)")
		return 2
	}
	rdb, err := store.NewRedisModeClient(r.RedisMode, string(r.RedisURL), time.Second)
	if err != nil {
		eventsError(stderr, fmt.Errorf("REDIS_URL: %w", err))
		return 2
	}
	defer func() { _ = rdb.Close() }()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := tailEvents(ctx, rdb, *stream, *from, *count, stdout); err != nil && ctx.Err() == nil {
		eventsError(stderr, err)
		return 1
	}
	return 0
}

// eventsError writes err with the command's prefix on each of its lines:
// a bad configuration is one problem a line (errors.Join), and each says
// whose it is.
func eventsError(w io.Writer, err error) {
	for _, line := range strings.Split(err.Error(), "\n") {
		fmt.Fprintf(w, "gateway events tail: %s\n", line)
	}
}

// tailEvents prints the records of stream after id, count of them (0:
// until ctx ends).
func tailEvents(ctx context.Context, rdb redis.UniversalClient, stream, id string, count int, out io.Writer) error {
	printed := 0
	for ctx.Err() == nil {
		res, err := rdb.XRead(ctx, &redis.XReadArgs{Streams: []string{stream, id}, Count: 100, Block: eventsPoll}).Result()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", stream, err)
		}
		for _, m := range res[0].Messages {
			id = m.ID
			rec, _ := m.Values["record"].(string)
			if _, err := fmt.Fprintln(out, rec); err != nil {
				return err
			}
			if printed++; count > 0 && printed >= count {
				return nil
			}
		}
	}
	return nil
}
