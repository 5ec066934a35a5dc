package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/turnstile-gw/turnstile/protocol"
)

// The idle load (-idle): sessions that start in text mode and then send
// nothing, as a chat widget left open does. Their reader answers the
// gateway's WebSocket pings (the library does, inside Read) and nothing
// else. The report is the gateway's memory and goroutines per session.

// maxIdleSessions bounds an idle run: an idle session costs the load
// generator one socket and one goroutine.
const maxIdleSessions = 60000

// idleScrapeTimeout bounds a reading of the gateway's figures (and its
// garbage collection) at thousands of sessions.
const idleScrapeTimeout = 30 * time.Second

// idleDialers is how many sessions connect at once.
const idleDialers = 64

// Gateway figures read for the idle report, beside metricRSS and
// metricGoroutines.
const (
	metricHeapInuse  = "go_memstats_heap_inuse_bytes"
	metricHeapAlloc  = "go_memstats_heap_alloc_bytes"
	metricStackInuse = "go_memstats_stack_inuse_bytes"
)

// idleReport is what an idle run measured.
type idleReport struct {
	Sessions int `json:"sessions"` // asked for
	Ready    int `json:"ready"`    // reached session.ready
	Failed   int `json:"failed"`   // failed to connect or start
	Lost     int `json:"lost"`     // ready, then closed by the gateway before the end
	// Hold is how long the sessions were held idle after the last one was
	// ready, before the figures were read.
	Hold time.Duration `json:"holdNs"`
	// Gateway figures before the first session and with all of them idle.
	Before idleFigures `json:"before"`
	After  idleFigures `json:"after"`
	// Per ready session: (After − Before) / Ready.
	PerSession idleFigures    `json:"perSession"`
	Errors     map[string]int `json:"errors,omitempty"`
}

// idleFigures are the gateway's process figures: bytes and a count.
type idleFigures struct {
	RSS       float64 `json:"rssBytes"`
	HeapInuse float64 `json:"heapInuseBytes"`
	// HeapLive is the heap's objects, read right after the collection
	// (what is live, without the free room in the spans that hold them).
	HeapLive   float64 `json:"heapLiveBytes"`
	StackInuse float64 `json:"stackInuseBytes"`
	Goroutines float64 `json:"goroutines"`
}

func idleFiguresOf(m series) idleFigures {
	return idleFigures{RSS: m[metricRSS], HeapInuse: m[metricHeapInuse], HeapLive: m[metricHeapAlloc],
		StackInuse: m[metricStackInuse], Goroutines: m[metricGoroutines]}
}

func (f idleFigures) minus(g idleFigures) idleFigures {
	return idleFigures{RSS: f.RSS - g.RSS, HeapInuse: f.HeapInuse - g.HeapInuse, HeapLive: f.HeapLive - g.HeapLive,
		StackInuse: f.StackInuse - g.StackInuse, Goroutines: f.Goroutines - g.Goroutines}
}

func (f idleFigures) div(n float64) idleFigures {
	return idleFigures{RSS: f.RSS / n, HeapInuse: f.HeapInuse / n, HeapLive: f.HeapLive / n, StackInuse: f.StackInuse / n,
		Goroutines: f.Goroutines / n}
}

// runIdle opens cfg.Sessions idle sessions (over cfg.Ramp), holds them
// until cfg.Duration has passed since the start, reads the gateway's
// figures, and closes them.
func runIdle(ctx context.Context, cfg Config) (*idleReport, error) {
	if err := checkFileLimit(uint64(cfg.Sessions)); err != nil {
		return nil, err
	}
	client := loopbackClient()
	defer client.CloseIdleConnections()
	var header http.Header
	if cfg.Token != "" {
		header = http.Header{"Authorization": {"Bearer " + cfg.Token}}
	}
	// A node at thousands of sessions answers /metrics slowly.
	sc := &scraper{url: cfg.MetricsURL, client: client, timeout: idleScrapeTimeout}
	if err := collectGarbage(ctx, client, cfg.PprofURL, ""); err != nil {
		return nil, err
	}
	before, err := sc.scrape(ctx)
	if err != nil {
		return nil, fmt.Errorf("baseline: %w", err)
	}
	rep := &idleReport{Sessions: cfg.Sessions, Before: idleFiguresOf(before), Errors: map[string]int{}}
	start := time.Now()
	runCtx, cancel := context.WithDeadline(ctx, start.Add(cfg.Duration))
	defer cancel()

	var (
		mu    sync.Mutex
		conns []*websocket.Conn
		lost  atomic.Int64
		wg    sync.WaitGroup // the readers
	)
	next := atomic.Int64{}
	var dialers sync.WaitGroup
	for range idleDialers {
		dialers.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= cfg.Sessions || runCtx.Err() != nil {
					return
				}
				if d := time.Until(start.Add(startOffset(i, cfg.Sessions, cfg.Ramp))); d > 0 {
					t := time.NewTimer(d)
					select {
					case <-t.C:
					case <-runCtx.Done():
						t.Stop()
						return
					}
				}
				conn, err := startIdle(runCtx, cfg.URL, client, header)
				mu.Lock()
				if err != nil {
					rep.Failed++
					rep.Errors[err.Error()]++
					mu.Unlock()
					continue
				}
				conns = append(conns, conn)
				rep.Ready++
				mu.Unlock()
				wg.Go(func() {
					// Read until the connection ends: the library answers
					// pings inside Read; anything ending it before we
					// close is a lost session.
					for {
						if _, _, err := conn.Read(context.Background()); err != nil {
							if runCtx.Err() == nil {
								lost.Add(1)
							}
							return
						}
					}
				})
			}
		})
	}
	dialers.Wait()
	<-runCtx.Done()
	rep.Hold = time.Since(start) - cfg.Ramp
	if ctx.Err() == nil {
		if err := collectGarbage(ctx, client, cfg.PprofURL, cfg.HeapOut); err != nil {
			rep.Errors[err.Error()]++
		}
		after, err := sc.scrape(ctx)
		if err != nil {
			rep.Errors["scrape: "+err.Error()]++
		} else {
			rep.After = idleFiguresOf(after)
			if rep.Ready > 0 {
				rep.PerSession = rep.After.minus(rep.Before).div(float64(rep.Ready))
			}
		}
	}
	rep.Lost = int(lost.Load())
	for _, c := range conns {
		_ = c.CloseNow()
	}
	wg.Wait()
	return rep, nil
}

// startIdle connects, sends session.start (text) and waits for
// session.ready.
func startIdle(ctx context.Context, url string, client *http.Client, header http.Header) (*websocket.Conn, error) {
	sctx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	conn, err := dial(sctx, url, client, header)
	if err != nil {
		return nil, err
	}
	if err := conn.Write(sctx, websocket.MessageText, []byte(`{"type":"session.start","mode":"text"}`)); err != nil {
		_ = conn.CloseNow()
		return nil, errors.New("send session.start")
	}
	for {
		_, data, err := conn.Read(sctx)
		if err != nil {
			_ = conn.CloseNow()
			return nil, errors.New("wait for session.ready")
		}
		var ev struct{ Type string }
		if json.Unmarshal(data, &ev) == nil && ev.Type == protocol.TypeSessionReady {
			return conn, nil
		}
	}
}

func (r *idleReport) writeText(w io.Writer) error {
	const kib = 1024.0
	_, err := fmt.Fprintf(w, `idle sessions: %d asked, %d ready, %d failed, %d lost; held %v after the ramp
gateway              before        after   per session
RSS              %9.1f MiB %9.1f MiB %8.2f KiB
heap in use      %9.1f MiB %9.1f MiB %8.2f KiB
heap live        %9.1f MiB %9.1f MiB %8.2f KiB
stacks in use    %9.1f MiB %9.1f MiB %8.2f KiB
goroutines       %13.0f %13.0f %11.2f
per 100 000 idle sessions: %.2f GiB RSS, %.0f goroutines
`, r.Sessions, r.Ready, r.Failed, r.Lost, r.Hold.Round(time.Second),
		r.Before.RSS/(1<<20), r.After.RSS/(1<<20), r.PerSession.RSS/kib,
		r.Before.HeapInuse/(1<<20), r.After.HeapInuse/(1<<20), r.PerSession.HeapInuse/kib,
		r.Before.HeapLive/(1<<20), r.After.HeapLive/(1<<20), r.PerSession.HeapLive/kib,
		r.Before.StackInuse/(1<<20), r.After.StackInuse/(1<<20), r.PerSession.StackInuse/kib,
		r.Before.Goroutines, r.After.Goroutines, r.PerSession.Goroutines,
		r.PerSession.RSS*100000/(1<<30), r.PerSession.Goroutines*100000)
	if err != nil {
		return err
	}
	for e, n := range r.Errors {
		if _, err := fmt.Fprintf(w, "error %q: %d\n", e, n); err != nil {
			return err
		}
	}
	return nil
}

func (r *idleReport) writeJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// collectGarbage has the gateway collect garbage (its heap profile with
// gc=1), and writes that profile to out when out is not "". A pprof URL
// of "" does nothing.
func collectGarbage(ctx context.Context, client *http.Client, pprofURL, out string) error {
	if pprofURL == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, idleScrapeTimeout)
	defer cancel()
	url := strings.TrimSuffix(pprofURL, "/") + "/heap?gc=1"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("heap profile: %w", err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("heap profile: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("heap profile %s: http %d", url, resp.StatusCode)
	}
	if out == "" {
		_, err = io.Copy(io.Discard, resp.Body)
		return err
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("heap profile: %w", err)
	}
	return os.WriteFile(out, body, 0o644)
}
