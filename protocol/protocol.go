// Package protocol is the browser protocol v1 codec: the message types the
// browser and the gateway exchange over /v1/ws, the validation of what the
// browser sends, and the close codes. Both the edge (server) and the session
// use it, so it sits below both.
package protocol

// Subprotocol is the WebSocket subprotocol the gateway selects.
const Subprotocol = "turnstile.v1"

// Client → server message types.
const (
	TypeSessionStart = "session.start"
	TypeText         = "text"
	TypeTurnCancel   = "turn.cancel"
	TypePing         = "ping"
	TypeAudioEnd     = "audio.end"
	TypeVoiceStart   = "voice.start"
	TypeVoiceStop    = "voice.stop"
	TypeConfirm      = "confirm"
	TypeAuth         = "auth"
	TypeHistory      = "history" // also the server's answer
)

// Server → client message types.
const (
	TypeSessionReady     = "session.ready"
	TypeTurnStart        = "turn.start"
	TypeTextDelta        = "text.delta"
	TypeTextDone         = "text.done"
	TypeToolCall         = "tool.call"
	TypeToolArgs         = "tool.args"
	TypeToolResult       = "tool.result"
	TypeTurnDone         = "turn.done"
	TypeError            = "error"
	TypePong             = "pong"
	TypeConfirmReq       = "confirm.request"
	TypeConfirmDone      = "confirm.done"
	TypeMode             = "mode"
	TypeBlocked          = "blocked"
	TypeTranscriptIn     = "transcript.input"
	TypeTranscriptOut    = "transcript.output"
	TypeAudioInterrupted = "audio.interrupted"
	TypeAuthOK           = "auth.ok"
	TypeHistoryPage      = "history"         // the answer to the client's history, named as it
	TypeHandoff          = "handoff"         // a person takes over (request_human)
	TypeHandoffPending   = "handoff.pending" // a message kept for the person, not sent to the model
	TypeHandoffEnded     = "handoff.ended"   // an operator handed the conversation back to the model
)

// Mode is a session's mode: a closed set, Modes. It labels the per-mode
// metrics as it is.
type Mode string

// The modes.
const (
	ModeText  Mode = "text"
	ModeVoice Mode = "voice"
)

// Modes lists the session modes.
var Modes = []Mode{ModeText, ModeVoice}

// Valid reports whether m is one of Modes.
func (m Mode) Valid() bool { return m == ModeText || m == ModeVoice }

// TurnEnd is why a turn ended, turn.done's reason: a closed set,
// TurnEndReasons. It labels turnstile_turns_total as it is.
type TurnEnd string

// turn.done reasons.
const (
	ReasonEndTurn       TurnEnd = "end_turn"
	ReasonMaxIterations TurnEnd = "max_iterations"
	ReasonInterrupted   TurnEnd = "interrupted"
	ReasonError         TurnEnd = "error"
	ReasonTerminalTool  TurnEnd = "terminal_tool"
	ReasonFinish        TurnEnd = "finish"
)

// TurnEndReasons lists every turn.done reason.
var TurnEndReasons = []TurnEnd{ReasonEndTurn, ReasonTerminalTool, ReasonFinish, ReasonMaxIterations,
	ReasonInterrupted, ReasonError}

// Error codes of the error event.
const (
	CodeBadJSON             = "bad_json"
	CodeUnknownType         = "unknown_type"
	CodeBadMessage          = "bad_message"
	CodeUnsupported         = "unsupported"
	CodeTurnInProgress      = "turn_in_progress"
	CodeModelError          = "model_error"
	CodeModelTruncated      = "model_truncated"
	CodeModelUnavailable    = "model_unavailable"
	CodeModelRefused        = "model_refused"
	CodeMaxIterations       = "max_iterations"
	CodeTurnCancelled       = "turn_cancelled"
	CodeResumeRefused       = "resume_refused"
	CodeStoreUnavailable    = "store_unavailable"
	CodeInternal            = "internal"
	CodeDraining            = "draining"
	CodeBlocked             = "blocked"
	CodeConfirmUnknown      = "confirmation_unknown"
	CodeConfirmExpired      = "confirmation_expired"
	CodeUpstreamUnavailable = "upstream_unavailable"
	CodeUpstreamClosed      = "upstream_closed"
	CodeUpstreamLost        = "upstream_lost"
	CodeRateLimited         = "rate_limited"
	CodeUnauthenticated     = "unauthenticated"
	CodeQuotaExceeded       = "quota_exceeded"
	CodeProfileRefused      = "profile_refused"
)

// Close codes: 4000–4099 terminal, 4100–4199 reconnect and resume; 1007
// is the WebSocket code for a text frame that is not UTF-8.
const (
	CloseInvalidData       = 1007
	CloseUnauthenticated   = 4001
	CloseProtocolViolation = 4002
	CloseBlocked           = 4003
	CloseResumeRefused     = 4004
	CloseTakenOver         = 4005
	CloseRateAbuse         = 4008
	CloseOperatorClosed    = 4009
	CloseDraining          = 4100
	CloseTooSlow           = 4101
	CloseUpstreamLost      = 4102
	CloseStoreUnavailable  = 4103
	CloseIdle              = 4104
	MaxCloseReasonBytes    = 123
	maxSessionIDLen        = 64
	maxResumeTokenLen      = 128
	maxAuthTokenLen        = 4 << 10
	// HistoryLimitMax is the most entries one history request may ask for.
	HistoryLimitMax         = 100
	defaultHistoryLimit     = 50
	defaultMaxTextCharacter = 8000
)
