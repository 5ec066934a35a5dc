package metrics

import (
	"strings"
	"time"

	"github.com/turnstile-gw/turnstile/intents"
	"github.com/turnstile-gw/turnstile/loopdetect"
	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/tools"
	"github.com/turnstile-gw/turnstile/transport"
)

// The closed label sets of the collectors. New creates every series of
// these sets at zero, so that dashboards and alerts see a metric before its
// first event (a rate over a series that does not exist yet is no data, not
// 0). Each set is declared once, beside its type: in the package it
// belongs to (protocol, intents, loopdetect, tools, transport), or here when
// that package sits above this one (the gates, the store's ops).
var (
	// Channels label the per-session metrics (see Channel).
	Channels = []Channel{ChannelBrowser, ChannelTwilio}

	// SessionRefusalReasons label turnstile_sessions_refused_total: why a
	// browser did not get a session. Anything else is counted as "other".
	SessionRefusalReasons = []string{
		"unauthenticated",         // no or bad token: HTTP 401 before the upgrade
		"origin",                  // Origin not allowed: HTTP 403 before the upgrade
		"max_sessions",            // this node is full (TURNSTILE_MAX_SESSIONS): HTTP 503
		"max_sessions_per_user",   // the user has too many sessions (TURNSTILE_MAX_SESSIONS_PER_USER): HTTP 429
		"draining",                // the node is shutting down
		"store_unavailable",       // Redis unreachable: error store_unavailable, close 4103
		"restoring",               // a resume of a session Redis lost, not written back yet: close 4103, retry
		"resume_refused",          // unknown or expired session, wrong token, other user: close 4004
		"blocked",                 // the user is blocked (ignore_user): close 4003
		"new_sessions_per_minute", // the user started too many new sessions (TURNSTILE_NEW_SESSIONS_PER_MINUTE): close 4008
		"abuse_cooldown",          // the user was closed 4008 for rate abuse and is cooling down: HTTP 429
		"resumes_per_minute",      // the session or user resumed too often (TURNSTILE_RESUMES_PER_MINUTE, TURNSTILE_USER_RESUMES_PER_MINUTE): close 4008
		"other",
	}

	// ModelRequestKinds and ModelOutcomes label
	// turnstile_model_requests_total (see ModelOutcome).
	ModelRequestKinds = []string{"text"}
	ModelOutcomes     = []ModelOutcome{ModelOK, ModelRateLimited, ModelServerError, ModelClientError, ModelTruncated,
		ModelRefused, ModelTimeout, ModelUnavailable, ModelCancelled, ModelError}

	// ConfirmationOutcomes label turnstile_confirmations_total (see
	// ConfirmationOutcome).
	ConfirmationOutcomes = []ConfirmationOutcome{ConfirmRequested, ConfirmApproved, ConfirmDenied, ConfirmExpired,
		ConfirmConsumed, ConfirmInvalid}

	// UnknownTool is the tool label of calls to a tool the registry does
	// not have (orchestrator).
	UnknownTool = "unknown"

	// upstreamEvents are the (kind, event, code) series of
	// turnstile_upstream_events_total that exist before any event; close
	// codes beyond "none" appear when they happen.
	upstreamEvents = []struct {
		ev   LiveEvent
		code string
	}{
		{LiveConnect, UpstreamCodeNone}, {LiveResume, UpstreamCodeNone}, {LiveGoAway, UpstreamCodeNone},
		{LiveClose, UpstreamCodeNone}, {LiveError, UpstreamCodeNone}, {LiveError, UpstreamCodeLost},
	}
)

// ModelOutcome is how one model request ended, the outcome label of
// turnstile_model_requests_total (session/textturn.Outcome maps an error to
// it). A closed set: one of the constants.
type ModelOutcome string

const (
	ModelOK          ModelOutcome = "ok"
	ModelRateLimited ModelOutcome = "rate_limited" // HTTP 429
	ModelServerError ModelOutcome = "server_error" // HTTP 5xx
	ModelClientError ModelOutcome = "client_error" // another HTTP error
	ModelTruncated   ModelOutcome = "truncated"    // the stream ended without a finish reason
	ModelRefused     ModelOutcome = "refused"      // the model refused, or the prompt was blocked
	ModelTimeout     ModelOutcome = "timeout"
	ModelUnavailable ModelOutcome = "unavailable" // no HTTP answer at all
	ModelCancelled   ModelOutcome = "cancelled"
	ModelError       ModelOutcome = "error" // anything else
)

// TextModelRequest counts one text model request and how it ended.
func (m *Metrics) TextModelRequest(o ModelOutcome) {
	m.ModelRequests.WithLabelValues("text", string(o)).Inc()
}

// TextModelFirstChunk observes how long a text model request took to its
// first streamed chunk.
func (m *Metrics) TextModelFirstChunk(d time.Duration) {
	m.ModelFirstToken.WithLabelValues("text").Observe(d.Seconds())
}

// ConfirmationOutcome is what became of a confirmation, the label of
// turnstile_confirmations_total and the outcome the browser and the
// timeline are told. A closed set: one of the constants.
type ConfirmationOutcome string

const (
	ConfirmRequested ConfirmationOutcome = "requested" // the user was asked (confirm.request)
	ConfirmApproved  ConfirmationOutcome = "approved"  // the user approved
	ConfirmDenied    ConfirmationOutcome = "denied"    // the user declined
	ConfirmExpired   ConfirmationOutcome = "expired"   // the answer came after the confirmation's expiry
	ConfirmConsumed  ConfirmationOutcome = "consumed"  // an approval let the model's repeated call run
	ConfirmInvalid   ConfirmationOutcome = "invalid"   // an answer to no confirmation of the session
)

// Confirmation counts one confirmation outcome.
func (m *Metrics) Confirmation(o ConfirmationOutcome) {
	m.Confirmations.WithLabelValues(string(o)).Inc()
}

// Channel is what a session came by: a browser, or a phone carrier's media
// stream. It labels the per-session metrics (channel="browser" |
// "twilio"), so that an operator splits sessions, turns, tool calls,
// tokens, dropped audio and refusals by channel. A closed set: a value is
// one of the constants, never a string from the wire.
type Channel string

const (
	// ChannelBrowser is a browser's WebSocket (/v1/ws).
	ChannelBrowser Channel = "browser"
	// ChannelTwilio is a phone call over Twilio Media Streams.
	ChannelTwilio Channel = "twilio"
	// ChannelNone labels a refusal before anything says what the
	// connection is (max_connections, at accept); no session has it.
	ChannelNone Channel = "none"
)

// String is the channel's label value; the zero Channel is a browser's (the
// default channel of a session).
func (c Channel) String() string {
	if c == "" {
		return string(ChannelBrowser)
	}
	return string(c)
}

// ToolOutcomes are the outcome label values of a tool call: "ok" and the
// lower-case error types.
func ToolOutcomes() []string {
	out := []string{"ok"}
	for _, t := range tools.ErrorTypes {
		out = append(out, strings.ToLower(string(t)))
	}
	return out
}

// BrowserMessageTypes label turnstile_browser_messages_total: the client
// message types, "audio" (binary frames) and "invalid" (refused frames).
func BrowserMessageTypes() []string {
	return []string{protocol.TypeSessionStart, protocol.TypeText, protocol.TypeTurnCancel, protocol.TypePing,
		protocol.TypeAudioEnd, protocol.TypeVoiceStart, protocol.TypeVoiceStop, protocol.TypeConfirm, browserAudio,
		browserInvalid}
}

// DisconnectReasons label turnstile_browser_disconnects_total.
func DisconnectReasons() []string {
	out := make([]string, 0, len(protocol.Disconnects))
	for _, d := range protocol.Disconnects {
		out = append(out, d.Label)
	}
	return out
}

// initZero creates every series of the closed label sets at zero.
func (m *Metrics) initZero() {
	for _, pm := range protocol.Modes {
		mode := string(pm)
		m.TurnDuration.WithLabelValues(mode)
		m.InitTokens.WithLabelValues(mode)
		m.InitSystemTokens.WithLabelValues(mode)
		m.InitToolTokens.WithLabelValues(mode)
		m.ToolCallsPerTurn.WithLabelValues(mode)
		for _, g := range Gates {
			m.GateRefusals.WithLabelValues(string(g), mode)
		}
	}
	for _, ch := range Channels {
		c := ch.String()
		m.ChannelSessions.WithLabelValues(c)
		m.VoiceResponse.WithLabelValues(c)
		for _, d := range RelayDirections {
			m.RelayAdded.WithLabelValues(c, string(d))
		}
		for _, p := range AudioPaths {
			m.AudioOut.WithLabelValues(c, string(p))
		}
		for _, mode := range protocol.Modes {
			m.SessionsActive.WithLabelValues(string(mode), c)
			for _, r := range protocol.TurnEndReasons {
				m.Turns.WithLabelValues(string(mode), string(r), c)
			}
		}
		for _, k := range SessionStartKinds {
			m.SessionsStarted.WithLabelValues(string(k), c)
		}
		for _, r := range SessionRefusalReasons {
			m.SessionsRefused.WithLabelValues(r, c)
		}
		for _, kind := range []string{"input", "output"} {
			for _, p := range transport.Providers {
				m.ModelTokens.WithLabelValues(string(p), "text", kind, "text", c)
			}
			// What Live reports a split for: text and audio.
			for _, modality := range []string{"text", "audio"} {
				m.ModelTokens.WithLabelValues("gemini", "voice", kind, modality, c)
			}
		}
		for _, r := range VoiceDropReasons {
			m.VoiceAudioDropped.WithLabelValues(string(r), c)
		}
	}
	for _, c := range Carriers {
		for _, e := range TelephonyEventNames {
			m.TelephonyEvents.WithLabelValues(c.String(), string(e))
		}
	}
	for _, k := range ModelRequestKinds {
		m.ModelFirstToken.WithLabelValues(k)
		for _, o := range ModelOutcomes {
			m.ModelRequests.WithLabelValues(k, string(o))
		}
	}
	for _, typ := range BrowserMessageTypes() {
		m.BrowserMessages.WithLabelValues(typ)
	}
	for _, r := range DisconnectReasons() {
		m.BrowserDisconnect.WithLabelValues(r)
	}
	for _, op := range RedisOps {
		m.RedisDuration.WithLabelValues(string(op))
		m.RedisErrors.WithLabelValues(string(op))
	}
	for _, r := range loopdetect.Rules {
		m.LoopDetections.WithLabelValues(string(r))
	}
	for _, typ := range intents.Types {
		m.IntentsApplied.WithLabelValues(string(typ))
	}
	for _, o := range ConfirmationOutcomes {
		m.Confirmations.WithLabelValues(string(o))
	}
	for _, e := range upstreamEvents {
		m.UpstreamEvents.WithLabelValues("live", string(e.ev), e.code)
	}
	m.InitTools([]string{UnknownTool})
}

// InitTools creates, at zero, the per-tool series of the given tools (the
// registry's, at startup): calls by every outcome and channel, latency, result size and
// tokens, and soft-latency overruns by mode. Tools added later (MCP) get
// their series at their first call.
func (m *Metrics) InitTools(tools []string) {
	outcomes := ToolOutcomes()
	for _, tool := range tools {
		for _, o := range outcomes {
			for _, ch := range Channels {
				m.ToolCalls.WithLabelValues(tool, o, ch.String())
			}
		}
		m.ToolDuration.WithLabelValues(tool)
		m.ToolResultChars.WithLabelValues(tool)
		m.ToolResultTokens.WithLabelValues(tool)
		for _, mode := range protocol.Modes {
			m.SoftLatencyExceeded.WithLabelValues(tool, string(mode))
		}
	}
}
