package main

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// scrapeEvery is the sampling period during the run.
	scrapeEvery = time.Second
	// scrapeTimeout bounds one scrape.
	scrapeTimeout = 2 * time.Second
)

// sample is one reading of the gateway's metrics.
type sample struct {
	at        time.Time
	m         series
	streaming int // sessions streaming when it was taken
}

// scraper reads the gateway's /metrics.
type scraper struct {
	url     string
	client  *http.Client
	timeout time.Duration // 0: scrapeTimeout
}

func (s *scraper) scrape(ctx context.Context) (series, error) {
	timeout := s.timeout
	if timeout == 0 {
		timeout = scrapeTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", s.url, err)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", s.url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape %s: http %d", s.url, resp.StatusCode)
	}
	m, err := parsePromText(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", s.url, err)
	}
	return m, nil
}

// sampler scrapes every scrapeEvery until its context ends.
type sampler struct {
	sc   *scraper
	live *atomic.Int64

	mu      sync.Mutex
	samples []sample
	failed  int
}

func (p *sampler) run(ctx context.Context) {
	t := time.NewTicker(scrapeEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		m, err := p.sc.scrape(ctx)
		at, live := time.Now(), int(p.live.Load())
		p.mu.Lock()
		if err != nil {
			if ctx.Err() == nil {
				p.failed++
			}
		} else {
			p.samples = append(p.samples, sample{at: at, m: m, streaming: live})
		}
		p.mu.Unlock()
	}
}

func (p *sampler) taken() ([]sample, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]sample(nil), p.samples...), p.failed
}
