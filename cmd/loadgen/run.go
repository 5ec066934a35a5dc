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
	// afterWait bounds how long the run waits, after the last session
	// closed, for the gateway to let go of the sessions.
	afterWait = 5 * time.Second
	afterPoll = 500 * time.Millisecond
)

// run opens cfg.Sessions voice sessions, spread over cfg.Ramp, streams
// until cfg.Duration has passed since the start, closes them and reports.
// It returns within cfg.Duration plus the closing handshakes (10 s at
// most) and the after-scrape (about 7 s at most); an error means the run
// could not start (the gateway's /metrics did not answer).
func run(ctx context.Context, cfg Config) (*Report, error) {
	client := loopbackClient()
	defer client.CloseIdleConnections()
	sched := newSchedule(cfg.Speech, cfg.Silence)
	var header http.Header
	if cfg.Token != "" {
		header = http.Header{"Authorization": {"Bearer " + cfg.Token}}
	}
	live := &atomic.Int64{}
	plan := &streamPlan{url: cfg.URL, header: header, client: client, sched: sched,
		speech: speechPCM(sched.speech), silence: make([]byte, frameBytes), live: live,
		twilio: cfg.Client == clientTwilio, twilioAuthToken: cfg.TwilioAuthToken}
	rep := newReport(cfg, sched)
	rep.LoadAvgStart = loadAverage()

	var sc *scraper
	var idle series
	if cfg.MetricsURL != "" {
		sc = &scraper{url: cfg.MetricsURL, client: client}
		var err error
		if idle, err = sc.scrape(ctx); err != nil {
			return nil, fmt.Errorf("idle baseline: %w", err)
		}
	}

	cpu0, cpuOK := ownCPU()
	start := time.Now()
	if cfg.Relay {
		plan.relay = newRelayPlan(start, cfg)
	}
	runCtx, cancel := context.WithDeadline(ctx, start.Add(cfg.Duration))
	defer cancel()
	smp := &sampler{sc: sc, live: live}
	var wg sync.WaitGroup
	if sc != nil {
		wg.Go(func() { smp.run(runCtx) })
	}
	results := make([]sessionResult, cfg.Sessions)
	for i := range cfg.Sessions {
		wg.Go(func() {
			t := time.NewTimer(startOffset(i, cfg.Sessions, cfg.Ramp))
			defer t.Stop()
			select {
			case <-runCtx.Done():
				results[i] = sessionResult{failed: true, errors: map[string]int{"not started": 1}}
				return
			case <-t.C:
			}
			results[i] = runSession(runCtx, plan)
		})
	}
	<-runCtx.Done()
	streamed := time.Since(start)
	cpu1, _ := ownCPU()
	wg.Wait()
	if cpuOK {
		rep.LoadgenCPUCores = (cpu1 - cpu0).Seconds() / streamed.Seconds()
	}
	for _, res := range results {
		rep.add(res)
	}
	var lat []time.Duration
	for _, res := range results {
		lat = append(lat, res.latencies...)
	}
	rep.Latency = summarize(lat)
	if plan.relay != nil {
		rep.Relay = relayFigures(plan.relay, results)
	}
	if sc != nil {
		samples, failed := smp.taken()
		after := settleAfter(sc)
		rep.Gateway = gatewayFigures(idle, samples, after, start.Add(cfg.Ramp+settle))
		rep.Gateway.ScrapesFailed = failed
	}
	rep.LoadAvgEnd = loadAverage()
	return rep, nil
}

// settleAfter reads the gateway once it has let go of the sessions: no
// session active and the goroutine count the same in two reads in a row
// (or after afterWait). Nil if it cannot be read.
func settleAfter(sc *scraper) series {
	ctx, cancel := context.WithTimeout(context.Background(), afterWait)
	defer cancel()
	var last series
	for {
		if m, err := sc.scrape(ctx); err == nil {
			if last != nil && m.sum(metricSessions) == 0 && m[metricGoroutines] == last[metricGoroutines] {
				return m
			}
			last = m
		}
		select {
		case <-ctx.Done():
			return last
		case <-time.After(afterPoll):
		}
	}
}
