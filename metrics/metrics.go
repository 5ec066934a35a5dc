// Package metrics holds Turnstile's Prometheus collectors, registered on an
// injected registry (no globals), with bounded label values only.
package metrics

import (
	"regexp"
	"runtime"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/turnstile-gw/turnstile/transport"
)

// Build identifies the running binary for turnstile_build_info.
type Build struct {
	Version string
	Commit  string
}

// Metrics is the set of collectors the gateway updates. All methods are safe
// for concurrent use. A nil *Metrics is not allowed; use New with a fresh
// registry in tests.
type Metrics struct {
	SessionsActive    *prometheus.GaugeVec     // mode, channel
	SessionsStarted   *prometheus.CounterVec   // kind: new|resumed, channel
	ResumeRefused     prometheus.Counter       //
	SessionDuration   prometheus.Histogram     //
	Turns             *prometheus.CounterVec   // mode, reason, channel
	TurnDuration      *prometheus.HistogramVec // mode
	TurnsPerSession   prometheus.Histogram     //
	ToolCalls         *prometheus.CounterVec   // tool, outcome, channel
	ToolDuration      *prometheus.HistogramVec // tool
	ToolResultChars   *prometheus.HistogramVec // tool
	ModelRequests     *prometheus.CounterVec   // kind, outcome
	ModelFirstToken   *prometheus.HistogramVec // kind
	ModelTokens       *prometheus.CounterVec   // provider: gemini|openai|other, mode, kind: input|output, modality, channel
	BrowserMessages   *prometheus.CounterVec   // type
	BrowserDisconnect *prometheus.CounterVec   // reason
	RedisDuration     *prometheus.HistogramVec // op
	RedisErrors       *prometheus.CounterVec   // op
	InitTokens        *prometheus.GaugeVec     // mode

	GateRefusals   *prometheus.CounterVec // gate: retrieval|total, mode
	LoopDetections *prometheus.CounterVec // rule: repeated_call|empty_results
	IntentsApplied *prometheus.CounterVec // type
	Confirmations  *prometheus.CounterVec // outcome: requested|approved|denied|expired|consumed|invalid
	// UntrustedContext counts sensitive calls made after untrusted tool
	// output in their turn (tool, action: UntrustedActions).
	UntrustedContext    *prometheus.CounterVec
	SoftLatencyExceeded *prometheus.CounterVec   // tool, mode
	ToolResultTokens    *prometheus.HistogramVec // tool
	ToolCallsPerTurn    *prometheus.HistogramVec // mode
	UpstreamEvents      *prometheus.CounterVec   // kind: live|text, event: connect|resume|close|error, code

	// IdempotentRepeats counts action calls answered from the ledger
	// because the action had succeeded with the same idempotency key.
	IdempotentRepeats *prometheus.CounterVec // tool

	// StoreRestorations counts live sessions a node wrote back to a Redis
	// that had lost them.
	StoreRestorations prometheus.Counter
	// VoiceAudioDropped counts the seconds of model audio the Live model
	// generated (and bills) that the gateway did not play, by reason
	// (VoiceDropReasons) and channel.
	VoiceAudioDropped *prometheus.CounterVec

	MCPServerUp *prometheus.GaugeVec   // server (names from the MCP config file)
	MCPRestarts *prometheus.CounterVec // server

	Ready            prometheus.Gauge       // 1 while /readyz answers 200 (SetReady)
	SessionsRefused  *prometheus.CounterVec // reason: SessionRefusalReasons, channel (RefuseSession)
	InitSystemTokens *prometheus.GaugeVec   // mode: the system-prompt part of InitTokens
	InitToolTokens   *prometheus.GaugeVec   // mode: the tool-declaration part of InitTokens
	ContextBudget    prometheus.Gauge       // the configured context budget in tokens (SetContextBudget)
	PeakContext      prometheus.Histogram   // the largest context estimate of each ended session
	CallsPerSession  prometheus.Histogram   // tool calls of each ended session
	sessions         *liveSessions          // the live sessions' context estimates (OpenSession)
	Refusals         *prometheus.CounterVec // reason: see RefusalReasons, channel; count through Refusal
	// TraceSpansDropped counts spans never exported (reason: queue_full,
	// export_failed; tracing.DropReasons).
	TraceSpansDropped *prometheus.CounterVec
	// JWKSRefreshFailures counts failed key-set fetches (reason: JWKSRefreshFailureReasons).
	JWKSRefreshFailures *prometheus.CounterVec
	// ToolsReloads counts reloads of TURNSTILE_TOOLS_DIR (outcome: ToolsReloadOutcomes).
	ToolsReloads *prometheus.CounterVec
	// DrainWaiting is the sessions a drain is waiting on: a running turn
	// (a voice turn playing out) to end before their connection is closed.
	DrainWaiting prometheus.Gauge
	// UpstreamConnects counts Live upstream opens (reason: ConnectReasons,
	// outcome: ConnectOutcomes); count through UpstreamConnect.
	UpstreamConnects *prometheus.CounterVec

	// The channel a session came by: a browser or a phone carrier.
	ChannelSessions      *prometheus.GaugeVec   // channel: Channels; deprecated: SessionsActive summed over mode
	ChannelSessionsEnded *prometheus.CounterVec // channel, reason: DisconnectReasons
	TelephonyEvents      *prometheus.CounterVec // carrier: Carriers, event: TelephonyEventNames

	// VoiceResponse is voice-to-voice latency: the end of the user's speech
	// to the first answer audio handed to the connection (channel).
	VoiceResponse *prometheus.HistogramVec
	// RelayAdded is the gateway's own share of it, sampled: a microphone
	// frame read → written upstream (direction in), model audio read →
	// written to the connection (out) (channel, direction: RelayDirections).
	RelayAdded *prometheus.HistogramVec
	// AudioOut counts model-audio frames sent to connections by how they
	// went out (channel, path: AudioPaths); resolve through AudioOutCounter.
	AudioOut *prometheus.CounterVec
	// Handoffs counts hand-offs to a person (outcome: HandoffOutcomes).
	Handoffs *prometheus.CounterVec

	// Summary is the JSON human view served at /metrics/summary; it is not
	// registered with Prometheus.
	Summary *Summary
}

// New registers Turnstile's collectors, the Go and process collectors, and
// turnstile_build_info on reg.
func New(reg prometheus.Registerer, b Build) *Metrics {
	f := factory{reg}
	m := &Metrics{
		SessionsActive: f.gaugeVec("turnstile_sessions_active",
			"Sessions with a live connection, by mode and channel (browser, twilio).", "mode", "channel"),
		SessionsStarted: f.counterVec("turnstile_sessions_started_total",
			"Sessions started on this node, new or resumed, by channel (browser, twilio).", "kind", "channel"),
		ResumeRefused: f.counter("turnstile_resume_refused_total",
			"Resume attempts refused (unknown, expired, wrong token or other user)."),
		SessionDuration: f.histogram("turnstile_session_duration_seconds",
			"Lifetime of one browser connection's session.",
			prometheus.ExponentialBuckets(1, 4, 10)),
		Turns: f.counterVec("turnstile_turns_total",
			"Turns ended, by mode, turn.done reason and channel (browser, twilio).", "mode", "reason", "channel"),
		TurnDuration: f.histogramVec("turnstile_turn_duration_seconds",
			"Time from a user input to the end of its turn.",
			prometheus.ExponentialBuckets(0.05, 2, 12), "mode"),
		TurnsPerSession: f.histogram("turnstile_turns_per_session",
			"Turns taken by one browser connection.",
			prometheus.ExponentialBuckets(1, 2, 10)),
		ToolCalls: f.counterVec("turnstile_tool_calls_total",
			"Tool calls by tool, outcome (ok or the lower-case error type) and channel (browser, twilio).",
			"tool", "outcome", "channel"),
		ToolDuration: f.histogramVec("turnstile_tool_duration_seconds",
			"Tool handler latency.",
			prometheus.ExponentialBuckets(0.001, 2.5, 12), "tool"),
		ToolResultChars: f.histogramVec("turnstile_tool_result_chars",
			"Size in characters (Unicode code points) of tool results sent to the model, after shaping (a bucket bound at the 1500 warning size).",
			resultCharsBuckets, "tool"),
		ModelRequests: f.counterVec("turnstile_model_requests_total",
			"Calls to the upstream model, by kind and outcome.", "kind", "outcome"),
		ModelFirstToken: f.histogramVec("turnstile_model_first_chunk_seconds",
			"Time from a model request to its first streamed chunk.",
			prometheus.ExponentialBuckets(0.01, 2, 12), "kind"),
		ModelTokens: f.counterVec("turnstile_model_tokens_total",
			"Tokens of model requests (text) and Live turns (voice) as the provider reported them, by provider (gemini, openai), mode, kind (input, output; output includes reasoning tokens), modality (text, audio, image, video, document; unspecified where the provider gave no split) and channel (browser, twilio).",
			"provider", "mode", "kind", "modality", "channel"),
		BrowserMessages: f.counterVec("turnstile_browser_messages_total",
			"Messages received from browsers, by protocol type (invalid ones as \"invalid\").", "type"),
		BrowserDisconnect: f.counterVec("turnstile_browser_disconnects_total",
			"Browser connections ended, by reason.", "reason"),
		RedisDuration: f.histogramVec("turnstile_redis_duration_seconds",
			"Latency of session-store operations.",
			prometheus.ExponentialBuckets(0.0002, 2.5, 10), "op"),
		RedisErrors: f.counterVec("turnstile_redis_errors_total",
			"Session-store operations that failed.", "op"),
		InitTokens: f.gaugeVec("turnstile_session_init_tokens_estimate",
			"Estimated tokens of the system instruction plus tool declarations (ceil(chars/4)), by mode.", "mode"),

		GateRefusals: f.counterVec("turnstile_gate_refusals_total",
			"Tool calls refused by a per-turn budget gate (retrieval or total), by mode.", "gate", "mode"),
		LoopDetections: f.counterVec("turnstile_loop_detections_total",
			"Tool-call loops detected, by rule (repeated_call, empty_results).", "rule"),
		IntentsApplied: f.counterVec("turnstile_intents_applied_total",
			"UI intents applied and sent to the browser, by intent type.", "type"),
		Confirmations: f.counterVec("turnstile_confirmations_total",
			"Confirmation lifecycle events (requested, approved, denied, expired, consumed, invalid).", "outcome"),
		UntrustedContext: f.counterVec("turnstile_untrusted_context_total",
			"Sensitive tool calls made after untrusted tool output in their turn, by tool and action (refused, confirm).",
			"tool", "action"),
		IdempotentRepeats: f.counterVec("turnstile_tool_idempotent_repeats_total",
			"Action tool calls answered from the call ledger, not run, because the same action (idempotency key) had succeeded, by tool.",
			"tool"),
		SoftLatencyExceeded: f.counterVec("turnstile_tool_soft_latency_exceeded_total",
			"Tool calls that answered after their soft latency budget, by tool and mode.", "tool", "mode"),
		ToolResultTokens: f.histogramVec("turnstile_tool_result_tokens",
			"Estimated tokens (ceil(chars/4)) of tool results sent to the model, after shaping.",
			resultTokensBuckets, "tool"),
		ToolCallsPerTurn: f.histogramVec("turnstile_tool_calls_per_turn",
			"Tool calls made during one turn, by mode.",
			[]float64{0, 1, 2, 3, 4, 6, 8, 12, 16, 24}, "mode"),
		UpstreamEvents: f.counterVec("turnstile_upstream_events_total",
			"Upstream model connection events by kind (live, text), event (connect, resume, close, error) and close code (or \"none\").",
			"kind", "event", "code"),

		StoreRestorations: f.counter("turnstile_store_restorations_total",
			"Sessions this node wrote back to Redis whole after Redis lost them (restarted empty, flushed, expired): live ones and those served in the last idle timeout."),
		VoiceAudioDropped: f.counterVec("turnstile_voice_audio_dropped_seconds_total",
			"Seconds of model audio the Live model generated that the gateway did not play, by reason (suppress_audio, terminal, interrupted) and channel (browser, twilio).",
			"reason", "channel"),

		MCPServerUp: f.gaugeVec("turnstile_mcp_server_up",
			"1 while the gateway is connected to the MCP tool server, 0 while it is down or unreachable.", "server"),
		MCPRestarts: f.counterVec("turnstile_mcp_restarts_total",
			"Times the gateway started an MCP tool server again (stdio) or reconnected to it (HTTP) after it went down or could not be reached.",
			"server"),

		Ready: f.gauge("turnstile_ready",
			"1 while this node is ready for new sessions (its last /readyz check passed), 0 while it is not (Redis unreachable, draining, or not checked yet)."),
		SessionsRefused: f.counterVec("turnstile_sessions_refused_total",
			"Browsers and calls that did not get a session, by reason (unauthenticated, origin, max_sessions, max_sessions_per_user, draining, store_unavailable, resume_refused, blocked, new_sessions_per_minute, other) and channel (browser, twilio).",
			"reason", "channel"),
		InitSystemTokens: f.gaugeVec("turnstile_session_init_system_tokens_estimate",
			"Estimated tokens (ceil(chars/4)) of the system instruction every session of a mode starts with.", "mode"),
		InitToolTokens: f.gaugeVec("turnstile_session_init_tool_tokens_estimate",
			"Estimated tokens (ceil(chars/4)) of the tool declarations every session of a mode starts with.", "mode"),
		ContextBudget: f.gauge("turnstile_session_context_budget_tokens",
			"The configured bound on a model request's context, in estimated tokens; 0 when none is configured."),
		PeakContext: f.histogram("turnstile_session_peak_context_tokens",
			"The largest context estimate (ceil(chars/4)) a session sent the model, observed when the session ends.",
			contextBuckets),
		CallsPerSession: f.histogram("turnstile_tool_calls_per_session",
			"Tool calls made during one browser connection's session, observed when it ends.",
			[]float64{0, 1, 2, 4, 8, 16, 32, 64, 128, 256}),
		Refusals: newRefusals(f),
		TraceSpansDropped: f.counterVec("turnstile_trace_spans_dropped_total",
			"Trace spans never exported, by reason: queue_full (the export queue, OTEL_BSP_MAX_QUEUE_SIZE, was full) or "+
				"export_failed (the collector refused them or did not answer in time).", "reason"),
		JWKSRefreshFailures: newJWKSRefreshFailures(f),
		ToolsReloads:        newToolsReloads(f),
		Handoffs:            newHandoffs(f),
		UpstreamConnects:    newUpstreamConnects(f),
		DrainWaiting: f.gauge("turnstile_drain_waiting_sessions",
			"Sessions a drain is waiting on: their running turn (a voice turn playing out) ends before their connection is closed 4100."),

		ChannelSessions: f.gaugeVec("turnstile_channel_sessions_active",
			"Deprecated: the same as sum without (mode) (turnstile_sessions_active); kept for existing dashboards, to be removed in a later release. Sessions with a live connection, by channel (browser, or a phone carrier such as twilio).", "channel"),
		ChannelSessionsEnded: f.counterVec("turnstile_channel_sessions_ended_total",
			"Sessions whose connection ended, by channel and disconnect reason.", "channel", "reason"),
		TelephonyEvents: f.counterVec("turnstile_telephony_events_total",
			"Phone call events by carrier: webhooks answered and refused, streams refused, keypad digits, clears, hang-ups.",
			"carrier", "event"),
		VoiceResponse: f.histogramVec("turnstile_voice_response_seconds",
			"Voice-to-voice latency by channel: from the end of the user's speech (the last microphone frame with speech, "+
				"or the client's audio.end after it) to the first audio of the answer handed to the connection.",
			prometheus.ExponentialBuckets(0.1, 1.5, 12), "channel"),
		RelayAdded: f.histogramVec("turnstile_relay_added_seconds",
			"Time the gateway adds to audio, sampled (one frame per 100 ms or 1 in 8 per session): a microphone frame read → "+
				"written upstream (direction in), model audio received → written to the connection (out).",
			prometheus.ExponentialBuckets(0.00002, 2.5, 12), "channel", "direction"),
		AudioOut: f.counterVec("turnstile_audio_out_frames_total",
			"Model-audio frames sent to connections, by channel and path: direct (written by the voice pump itself, nothing "+
				"queued before it) or queued (behind other frames, written by the connection's writer: a rising queued share "+
				"is connections falling behind), or loop (nothing queued before it, written to a socket an event loop serves, "+
				"TURNSTILE_VOICE_LOOP: the write never waits).", "channel", "path"),

		Summary: NewSummary(DefaultSummaryWindow),
	}
	m.sessions = newLiveSessions()
	m.Summary.live = m.sessions
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "turnstile_session_context_tokens",
		Help: "The largest current context estimate (ceil(chars/4)) among this node's live sessions; compare with turnstile_session_context_budget_tokens."},
		func() float64 { return float64(m.sessions.max()) }))
	m.initZero()
	info := f.gaugeVec("turnstile_build_info", "Build of the running gateway (always 1).",
		"version", "commit", "goversion")
	info.WithLabelValues(b.Version, b.Commit, runtime.Version()).Set(1)
	// Besides the memory statistics, the Go scheduler's latency histogram
	// (go_sched_latencies_seconds: how long goroutines wait, runnable, for a
	// thread): its tail growing says the node is short of CPU; and the
	// stack new goroutines start with (go_gc_stack_starting_size_bytes, the
	// average in use at the last collection, in powers of two): 2 KiB on a
	// node of idle sessions, whose readers wait on a shallow stack; and the
	// collections the process forced (go_gc_cycles_forced_gc_cycles_total):
	// the embedded store's release of a burst's pages, one each.
	reg.MustRegister(collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(
		collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(`^/sched/latencies:seconds$|^/gc/stack/starting-size:bytes$|^/gc/cycles/forced:gc-cycles$`)})),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// MCPServer creates the series of an MCP tool server (named in the MCP
// config file), down until it connects.
func (m *Metrics) MCPServer(server string) {
	m.MCPServerUp.WithLabelValues(server).Set(0)
	m.MCPRestarts.WithLabelValues(server).Add(0)
}

// MCPServerState records whether the gateway is connected to an MCP tool
// server.
func (m *Metrics) MCPServerState(server string, up bool) {
	v := 0.0
	if up {
		v = 1
	}
	m.MCPServerUp.WithLabelValues(server).Set(v)
}

// MCPRestart counts an MCP tool server started again or reconnected.
func (m *Metrics) MCPRestart(server string) {
	m.MCPRestarts.WithLabelValues(server).Inc()
}

// InitSpansDropped creates the series of the reasons a span is dropped
// (tracing.DropReasons) at zero.
func (m *Metrics) InitSpansDropped(reasons []string) {
	for _, r := range reasons {
		m.TraceSpansDropped.WithLabelValues(r)
	}
}

// SpansDropped counts n spans never exported, for reason (one of
// tracing.DropReasons).
func (m *Metrics) SpansDropped(reason string, n int) {
	m.TraceSpansDropped.WithLabelValues(reason).Add(float64(n))
}

// AddModelTokens counts the tokens one text model request of a session of
// channel ch used, as its provider reported them (one of
// transport.Providers; anything else is counted as "other", so the label
// stays bounded). Text turns send text only: modality "text". Negative
// counts are ignored.
func (m *Metrics) AddModelTokens(provider transport.Provider, ch Channel, input, output int) {
	label := string(provider)
	if !slices.Contains(transport.Providers, provider) {
		label = "other"
	}
	if input > 0 {
		m.ModelTokens.WithLabelValues(label, "text", "input", "text", ch.String()).Add(float64(input))
	}
	if output > 0 {
		m.ModelTokens.WithLabelValues(label, "text", "output", "text", ch.String()).Add(float64(output))
	}
}

// TokenModalities are the modality label values of
// turnstile_model_tokens_total (Gemini's MediaModality, lower case);
// "unspecified" is what a total holds beyond its split.
var TokenModalities = []string{"text", "audio", "image", "video", "document", "unspecified"}

// AddVoiceTokens counts what one Live turn of a session of channel ch cost
// (provider gemini, mode voice): kind is "input" or "output", total the count, byModality its split
// where the upstream gave one. A modality outside TokenModalities, and
// whatever the split leaves of the total, count as "unspecified"; a split
// larger than the total is believed over it.
func (m *Metrics) AddVoiceTokens(ch Channel, kind string, total int, byModality map[string]int) {
	if kind != "input" && kind != "output" {
		return
	}
	rest := total
	for modality, n := range byModality {
		if n <= 0 {
			continue
		}
		rest -= n
		if !slices.Contains(TokenModalities, modality) {
			modality = "unspecified"
		}
		m.ModelTokens.WithLabelValues("gemini", "voice", kind, modality, ch.String()).Add(float64(n))
	}
	if rest > 0 {
		m.ModelTokens.WithLabelValues("gemini", "voice", kind, "unspecified", ch.String()).Add(float64(rest))
	}
}

// Histogram buckets. The result-size ones have a bound at the size the
// gateway warns about (ResultSizeWarnChars, and a quarter of it in tokens),
// so that an alert on p95 above it is exact at the threshold.
var (
	resultCharsBuckets  = []float64{64, 256, 512, 1024, ResultSizeWarnChars, 2048, 4096, 16384, 65536, 262144}
	resultTokensBuckets = []float64{16, 64, 128, 256, ResultSizeWarnChars / 4, 512, 1024, 4096, 16384, 65536}
	contextBuckets      = prometheus.ExponentialBuckets(500, 2, 12) // 500 … ~1M tokens
)

type factory struct{ reg prometheus.Registerer }

func (f factory) gauge(name, help string) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
	f.reg.MustRegister(g)
	return g
}

func (f factory) counter(name, help string) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	f.reg.MustRegister(c)
	return c
}

func (f factory) counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	f.reg.MustRegister(c)
	return c
}

func (f factory) gaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
	f.reg.MustRegister(g)
	return g
}

func (f factory) histogram(name, help string, buckets []float64) prometheus.Histogram {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets})
	f.reg.MustRegister(h)
	return h
}

func (f factory) histogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
	f.reg.MustRegister(h)
	return h
}
