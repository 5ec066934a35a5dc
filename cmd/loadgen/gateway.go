package main

import "time"

// GatewayFigures are the gateway's own costs, read from its /metrics:
// idle before the first session, steady while all sessions stream, and
// after the last one closed.
type GatewayFigures struct {
	WindowSeconds    float64 `json:"windowSeconds"`    // the steady window the figures cover
	SessionsInWindow float64 `json:"sessionsInWindow"` // streaming sessions, mean over the window
	ActiveSessions   float64 `json:"activeSessions"`   // turnstile_sessions_active at the window's end

	CPUCores     float64 `json:"cpuCores"` // Δprocess_cpu_seconds_total / Δwall over the window
	RSSIdleMiB   float64 `json:"rssIdleMiB"`
	RSSSteadyMiB float64 `json:"rssSteadyMiB"` // mean over the window
	RSSPeakMiB   float64 `json:"rssPeakMiB"`
	RSSAfterMiB  float64 `json:"rssAfterMiB"`
	// RSSGrowthMiBPerMin is the RSS trend over the window (last − first
	// reading): near zero when memory per session is steady.
	RSSGrowthMiBPerMin float64 `json:"rssGrowthMiBPerMin"`

	GoroutinesIdle   float64 `json:"goroutinesIdle"`
	GoroutinesSteady float64 `json:"goroutinesSteady"` // mean over the window
	GoroutinesPeak   float64 `json:"goroutinesPeak"`
	GoroutinesAfter  float64 `json:"goroutinesAfter"`

	MillicoresPerSession float64 `json:"millicoresPerSession"`
	RSSMiBPerSession     float64 `json:"rssMiBPerSession"` // above the idle baseline
	GoroutinesPerSession float64 `json:"goroutinesPerSession"`
	SessionsPerCore      float64 `json:"sessionsPerCore"` // 1000 / millicores per session

	Scrapes       int `json:"scrapes"`
	ScrapesFailed int `json:"scrapesFailed"`
}

// settle is left out of the steady window after the last session started,
// so that every session has had an exchange in flight.
const settle = 2 * time.Second

// steadyWindow picks the samples taken once every session had started
// (plus settle) while sessions streamed. With fewer than two such samples
// (a short run) it falls back to every sample taken while sessions
// streamed, then to all samples.
func steadyWindow(samples []sample, from time.Time) []sample {
	var steady, streaming []sample
	for _, s := range samples {
		if s.streaming == 0 {
			continue
		}
		streaming = append(streaming, s)
		if !s.at.Before(from) {
			steady = append(steady, s)
		}
	}
	switch {
	case len(steady) >= 2:
		return steady
	case len(streaming) >= 2:
		return streaming
	}
	return samples
}

// gatewayFigures computes the figures from the idle reading, the samples
// taken during the run, and the reading after it; steadyFrom is when the
// steady window may begin.
func gatewayFigures(idle series, samples []sample, after series, steadyFrom time.Time) *GatewayFigures {
	const mib = 1 << 20
	g := &GatewayFigures{Scrapes: len(samples)}
	g.RSSIdleMiB = idle[metricRSS] / mib
	g.GoroutinesIdle = idle[metricGoroutines]
	g.RSSPeakMiB, g.GoroutinesPeak = g.RSSIdleMiB, g.GoroutinesIdle
	for _, s := range samples {
		g.RSSPeakMiB = max(g.RSSPeakMiB, s.m[metricRSS]/mib)
		g.GoroutinesPeak = max(g.GoroutinesPeak, s.m[metricGoroutines])
	}
	if after != nil {
		g.RSSAfterMiB, g.GoroutinesAfter = after[metricRSS]/mib, after[metricGoroutines]
	}
	win := steadyWindow(samples, steadyFrom)
	if len(win) < 2 {
		return g
	}
	first, last := win[0], win[len(win)-1]
	g.WindowSeconds = last.at.Sub(first.at).Seconds()
	g.ActiveSessions = last.m.sum(metricSessions)
	if g.WindowSeconds > 0 {
		g.CPUCores = (last.m[metricCPU] - first.m[metricCPU]) / g.WindowSeconds
		g.RSSGrowthMiBPerMin = (last.m[metricRSS] - first.m[metricRSS]) / mib / (g.WindowSeconds / 60)
	}
	var rss, gor, live float64
	for _, s := range win {
		rss += s.m[metricRSS] / mib
		gor += s.m[metricGoroutines]
		live += float64(s.streaming)
	}
	n := float64(len(win))
	g.RSSSteadyMiB, g.GoroutinesSteady, g.SessionsInWindow = rss/n, gor/n, live/n
	if g.SessionsInWindow > 0 {
		g.MillicoresPerSession = 1000 * g.CPUCores / g.SessionsInWindow
		g.RSSMiBPerSession = (g.RSSSteadyMiB - g.RSSIdleMiB) / g.SessionsInWindow
		g.GoroutinesPerSession = (g.GoroutinesSteady - g.GoroutinesIdle) / g.SessionsInWindow
	}
	if g.MillicoresPerSession > 0 {
		g.SessionsPerCore = 1000 / g.MillicoresPerSession
	}
	return g
}
