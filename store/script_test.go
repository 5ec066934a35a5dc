package store

import (
	"context"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/turnstile-gw/turnstile/internal/redistest"
	"github.com/turnstile-gw/turnstile/transport"
)

// lossyProxy forwards connections to a Redis, and once armed withholds
// the next reply Redis sends (the command ran; its answer is lost, as on a
// network that stalls), then forwards again.
type lossyProxy struct {
	ln    net.Listener
	to    string
	armed atomic.Bool
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns []net.Conn
}

// newLossyStore is a store on a real redis-server behind a lossy proxy,
// and its client: the client gives up reading a reply after a second
// (long enough for a busy machine's warm-up commands, short enough for
// the test that waits for a lost reply), the store's own bound is far
// longer, leaving go-redis room to resend if it would.
func newLossyStore(t *testing.T) (*RedisStore, redis.UniversalClient, *lossyProxy) {
	t.Helper()
	proxy := startLossyProxy(t, redistest.Start(t))
	c, err := NewRedisClient("redis://"+proxy.ln.Addr().String(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return NewRedisStore(c, RedisStoreOptions{Redis: Redis{RedisTimeout: 10 * time.Second}}), c, proxy
}

func startLossyProxy(t *testing.T, to string) *lossyProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &lossyProxy{ln: ln, to: to}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() {
		_ = ln.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			_ = c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

func (p *lossyProxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.to)
		if err != nil {
			_ = client.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, client, server)
		p.mu.Unlock()
		p.wg.Add(2)
		go func() {
			defer p.wg.Done()
			_, _ = io.Copy(server, client)
			_ = server.Close()
		}()
		go func() {
			defer p.wg.Done()
			defer client.Close()
			buf := make([]byte, 64<<10)
			for {
				n, err := server.Read(buf)
				if err != nil {
					return
				}
				if p.armed.CompareAndSwap(true, false) {
					continue // this reply is lost
				}
				if _, err := client.Write(buf[:n]); err != nil {
					return
				}
			}
		}()
	}
}

// A script whose reply is lost (a read timeout) has run in Redis: go-redis
// must not send it again, or its effect happens twice — here the history
// would hold the entry twice. The write fails instead, which the session
// handles (it goes on from memory and catches the store up).
func TestAScriptWhoseReplyIsLostRunsOnce(t *testing.T) {
	s, c, proxy := newLossyStore(t)
	ctx := context.Background()
	rec, _, err := s.Create(ctx, sampleRecord("s-lossy"))
	if err != nil {
		t.Fatal(err)
	}
	// The first append loads the script in Redis (EVALSHA, then EVAL).
	if err := s.Append(ctx, rec, transport.Entry{Role: transport.RoleUser, Text: "one"}); err != nil {
		t.Fatal(err)
	}
	proxy.armed.Store(true)
	err = s.Append(ctx, rec, transport.Entry{Role: transport.RoleUser, Text: "two"})
	n, lerr := c.LLen(ctx, historyKey(rec.ID)).Result()
	if lerr != nil {
		t.Fatal(lerr)
	}
	if n != 2 {
		t.Fatalf("the history holds %d entries after appending one, then one whose reply was lost (%v); want 2", n, err)
	}
	if err == nil {
		t.Fatal("an append whose reply was lost reported success")
	}
}

// The store watch's marker write whose reply is lost has set the marker:
// sent again, the SET ... GET would find its own marker and report it had
// been there, hiding a Redis that lost its data. The write fails instead.
func TestAMarkerWriteWhoseReplyIsLostDoesNotFindItself(t *testing.T) {
	s, c, proxy := newLossyStore(t)
	ctx := context.Background()
	if err := c.Ping(ctx).Err(); err != nil { // the connection's own hand-shake, before any reply is lost
		t.Fatal(err)
	}
	proxy.armed.Store(true)
	present, err := s.touchMarker(ctx, "n_lossy")
	if err == nil && present {
		t.Fatal("a marker written for the first time, its reply lost, was reported as there before")
	}
}
