package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
)

// Report is the outcome of one run.
type Report struct {
	Client    string  `json:"client"` // browser or twilio
	URL       string  `json:"url"`
	Sessions  int     `json:"sessions"`
	DurationS float64 `json:"durationS"`
	RampS     float64 `json:"rampS"`
	SpeechMs  float64 `json:"speechMs"`  // per cycle, in whole frames
	SilenceMs float64 `json:"silenceMs"` // per cycle, in whole frames

	SessionsOK     int `json:"sessionsOk"`
	SessionsFailed int `json:"sessionsFailed"`

	Turns         int            `json:"turns"`         // turn.done end_turn
	TurnsByReason map[string]int `json:"turnsByReason"` // every turn.done
	Exchanges     int            `json:"exchanges"`     // speech ends sent
	Unanswered    int            `json:"unanswered"`    // no model audio before the next speech
	CutOff        int            `json:"cutOff"`        // still waiting when the run ended
	Latency       Latency        `json:"latency"`       // speech end → first model audio
	Interrupted   int            `json:"interrupted"`   // audio.interrupted events

	AudioBytesSent     int64   `json:"audioBytesSent"`
	AudioBytesReceived int64   `json:"audioBytesReceived"`
	FramesSent         int     `json:"framesSent"`
	FramesLate         int     `json:"framesLate"` // sent more than half a frame behind schedule
	MaxSendLagMs       float64 `json:"maxSendLagMs"`

	Errors map[string]int `json:"errors"` // by kind

	Relay *RelayFigures `json:"relay,omitempty"` // -relay: a round trip per chunk

	Gateway         *GatewayFigures `json:"gateway,omitempty"`
	LoadgenCPUCores float64         `json:"loadgenCpuCores"`
	LoadAvgStart    string          `json:"loadAvgStart,omitempty"`
	LoadAvgEnd      string          `json:"loadAvgEnd,omitempty"`
}

// ErrorCount is the number of errors of every kind.
func (r *Report) ErrorCount() int {
	n := 0
	for _, v := range r.Errors {
		n += v
	}
	return n
}

func newReport(cfg Config, sched schedule) *Report {
	return &Report{
		Client: cfg.Client, URL: cfg.URL, Sessions: cfg.Sessions, DurationS: cfg.Duration.Seconds(), RampS: cfg.Ramp.Seconds(),
		SpeechMs: ms(time.Duration(sched.speech) * frameDur), SilenceMs: ms(time.Duration(sched.silence) * frameDur),
		TurnsByReason: map[string]int{}, Errors: map[string]int{},
	}
}

// add folds one session's result into the report.
func (r *Report) add(res sessionResult) {
	if res.ok {
		r.SessionsOK++
	} else {
		r.SessionsFailed++
	}
	for k, v := range res.turns {
		r.TurnsByReason[k] += v
	}
	r.Turns = r.TurnsByReason["end_turn"]
	r.Exchanges += res.exchanges
	r.Unanswered += res.unanswered
	r.CutOff += res.cutOff
	r.Interrupted += res.interrupted
	r.AudioBytesSent += res.bytesOut
	r.AudioBytesReceived += res.bytesIn
	r.FramesSent += res.framesSent
	r.FramesLate += res.framesLate
	r.MaxSendLagMs = max(r.MaxSendLagMs, ms(res.maxLag))
	for k, v := range res.errors {
		r.Errors[k] += v
	}
}

func (r *Report) writeJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

func (r *Report) writeText(w io.Writer) error {
	var b strings.Builder
	line := func(label, format string, args ...any) {
		fmt.Fprintf(&b, "%-14s %s\n", label, fmt.Sprintf(format, args...))
	}
	if rl := r.Relay; rl != nil {
		what := "voice sessions"
		if r.Client == clientTwilio {
			what = "phone calls (Twilio Media Streams, μ-law)"
		}
		fmt.Fprintf(&b, "loadgen: %d %s against %s for %gs (ramp %gs; relay load: %d-byte chunks every %g ms)\n",
			r.Sessions, what, r.URL, r.DurationS, r.RampS, rl.ChunkBytes, rl.IntervalMs)
		line("sessions", "%d ok, %d failed", r.SessionsOK, r.SessionsFailed)
		line("chunks", "%d sent in the %.1f s window: %d answered, %d lost, %d late (> %g ms), %d unmatched, %d dup",
			rl.Sent, rl.WindowS, rl.Answered, rl.Lost, rl.Late, rl.LateMs, rl.Unmatched, rl.Dup)
		line("round trip", "p50 %.2f ms, p95 %.2f ms, p99 %.2f ms, max %.2f ms (mean %.2f ms)",
			rl.RTT.P50, rl.RTT.P95, rl.RTT.P99, rl.RTT.Max, rl.RTT.Mean)
	} else {
		fmt.Fprintf(&b, "loadgen: %d voice sessions against %s for %gs (ramp %gs; %g ms speech / %g ms silence in %v frames)\n",
			r.Sessions, r.URL, r.DurationS, r.RampS, r.SpeechMs, r.SilenceMs, frameDur)
		line("sessions", "%d ok, %d failed", r.SessionsOK, r.SessionsFailed)
		line("turns", "%d completed; turn.done by reason: %s", r.Turns, counts(r.TurnsByReason))
		line("exchanges", "%d speech ends: %d answered, %d unanswered, %d cut off by the end of the run",
			r.Exchanges, r.Latency.Count, r.Unanswered, r.CutOff)
		line("latency", "p50 %.0f ms, p90 %.0f ms, p99 %.0f ms, max %.0f ms (speech end → first model audio)",
			r.Latency.P50, r.Latency.P90, r.Latency.P99, r.Latency.Max)
		line("interrupted", "%d", r.Interrupted)
	}
	line("audio", "sent %.1f MiB, received %.1f MiB", float64(r.AudioBytesSent)/(1<<20), float64(r.AudioBytesReceived)/(1<<20))
	late := lateFrame
	if r.Relay != nil {
		late = relayLateChunk
	}
	line("pacing", "%d of %d frames sent more than %v late, max lag %.0f ms", r.FramesLate, r.FramesSent, late, r.MaxSendLagMs)
	line("errors", "%s", counts(r.Errors))
	if g := r.Gateway; g != nil {
		line("gateway cpu", "%.3f cores over a %.0f s window with %.0f sessions streaming (gateway reports %.0f active)",
			g.CPUCores, g.WindowSeconds, g.SessionsInWindow, g.ActiveSessions)
		line("gateway rss", "idle %.1f MiB, steady %.1f MiB (trend %+.1f MiB/min), peak %.1f MiB, after %.1f MiB",
			g.RSSIdleMiB, g.RSSSteadyMiB, g.RSSGrowthMiBPerMin, g.RSSPeakMiB, g.RSSAfterMiB)
		line("goroutines", "idle %.0f, steady %.0f, peak %.0f, after %.0f",
			g.GoroutinesIdle, g.GoroutinesSteady, g.GoroutinesPeak, g.GoroutinesAfter)
		line("per session", "%.1f millicores, %.2f MiB RSS, %.1f goroutines → %.0f sessions per core",
			g.MillicoresPerSession, g.RSSMiBPerSession, g.GoroutinesPerSession, g.SessionsPerCore)
		if g.ScrapesFailed > 0 {
			line("scrapes", "%d ok, %d failed", g.Scrapes, g.ScrapesFailed)
		}
	}
	line("loadgen cpu", "%.3f cores", r.LoadgenCPUCores)
	if r.LoadAvgStart != "" {
		line("load average", "start %s, end %s", r.LoadAvgStart, r.LoadAvgEnd)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// counts renders a count map as "a 2, b 1" in key order, or "none".
func counts(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	parts := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}
