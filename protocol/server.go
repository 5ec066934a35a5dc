package protocol

// ModelInfo says which model serves the session.
type ModelInfo struct {
	Name    string `json:"name"`
	Offline bool   `json:"offline"`
}

// HistoryItem is one text entry of the conversation shown on resume.
type HistoryItem struct {
	Role string `json:"role"` // "user" or "model"
	Text string `json:"text"`
	Turn int    `json:"turn"`
	Kind string `json:"kind,omitempty"` // as turn.start's kind
	// Truncated is true when Text is only the start of an entry too large
	// to send whole.
	Truncated bool `json:"truncated,omitempty"`
}

// History answers a history request: entries oldest first, More when
// still older entries exist.
type History struct {
	Entries []HistoryItem `json:"entries"`
	More    bool          `json:"more"`
}

// AuthOK accepts a fresh token; the connection now lasts until ExpiresAt
// (RFC 3339; empty when the token does not expire, as in dev mode).
type AuthOK struct {
	ExpiresAt string `json:"expiresAt,omitempty"`
}

// SessionReady answers session.start.
type SessionReady struct {
	SessionID       string `json:"sessionId"`
	ResumeToken     string `json:"resumeToken"`
	Mode            Mode   `json:"mode"`
	Resumed         bool   `json:"resumed"`
	RegistryVersion string `json:"registryVersion"`
	// RegistryChanged is true on a resume served by another tool registry
	// version than the one the session started with.
	RegistryChanged bool          `json:"registryChanged,omitempty"`
	Turn            int           `json:"turn"`
	Model           ModelInfo     `json:"model"`
	Notice          string        `json:"notice,omitempty"`
	History         []HistoryItem `json:"history,omitempty"`
	// HistoryTruncated is true when older entries exist than History
	// holds; the client asks for them with history requests.
	HistoryTruncated bool `json:"historyTruncated,omitempty"`
	// PendingConfirmations are confirm.request events still unanswered.
	PendingConfirmations []ConfirmRequest `json:"pendingConfirmations,omitempty"`
	// Tools are the tools declared to the model in the session's current
	// mode, with their effective metadata (policy applied).
	Tools []ToolInfo `json:"tools"`
}

// ToolInfo is one declared tool as the browser sees it.
type ToolInfo struct {
	Name                 string `json:"name"`
	Modes                []Mode `json:"modes"`
	RequiresConfirmation bool   `json:"requiresConfirmation"`
	Terminal             bool   `json:"terminal"`
}

// ConfirmRequest asks the user to approve a call.
type ConfirmRequest struct {
	Turn      int            `json:"turn"`
	Token     string         `json:"token"`
	Tool      string         `json:"tool"`
	Args      map[string]any `json:"args"`
	ExpiresAt string         `json:"expiresAt"` // RFC 3339
}

// ConfirmDone closes a confirmation: approved, denied or expired.
type ConfirmDone struct {
	Token   string `json:"token"`
	Tool    string `json:"tool"`
	Outcome string `json:"outcome"`
}

// ModeChange reports a mode change, with the tools declared in the new mode.
type ModeChange struct {
	Mode   Mode       `json:"mode"`
	Reason string     `json:"reason"`
	Tools  []ToolInfo `json:"tools,omitempty"`
}

// Blocked tells the user that input is refused until Until (RFC 3339).
type Blocked struct {
	Until  string `json:"until"`
	Reason string `json:"reason,omitempty"`
}

// TurnStart opens a turn. Kind is "confirmation" for a turn started by a
// confirm answer.
type TurnStart struct {
	Turn int    `json:"turn"`
	Text string `json:"text"`
	Kind string `json:"kind,omitempty"`
}

// TurnText is the body of the events that carry a turn's text: TextDelta,
// TextDone, TranscriptInput and TranscriptOutput.
type TurnText struct {
	Turn int    `json:"turn"`
	Text string `json:"text"`
}

// TextDelta is streamed model text (text.delta).
type TextDelta TurnText

// TextDone is a turn's full final text (text.done).
type TextDone TurnText

// TranscriptInput is the transcription of the user's speech
// (transcript.input).
type TranscriptInput TurnText

// TranscriptOutput is the transcription of the model's speech
// (transcript.output).
type TranscriptOutput TurnText

// ToolCall announces a call entering the pipeline.
type ToolCall struct {
	Turn int            `json:"turn"`
	ID   string         `json:"id"`
	Name string         `json:"name"`
	Args map[string]any `json:"args"`
}

// ToolCallStarted announces a call whose name is known while its
// arguments are still streaming (tool.call without args); ToolArgs follows
// once they are complete.
type ToolCallStarted struct {
	Turn int    `json:"turn"`
	ID   string `json:"id"`
	Name string `json:"name"`
}

// ToolArgs carries the (redacted) arguments of a call announced early.
type ToolArgs struct {
	Turn int            `json:"turn"`
	ID   string         `json:"id"`
	Args map[string]any `json:"args"`
}

// ToolError is the browser's view of a failed call.
type ToolError struct {
	Type    string `json:"type"`
	Code    string `json:"code,omitempty"`
	Message string `json:"message"`
}

// ToolResult reports a call's outcome.
type ToolResult struct {
	Turn       int        `json:"turn"`
	ID         string     `json:"id"`
	Name       string     `json:"name"`
	OK         bool       `json:"ok"`
	Refused    bool       `json:"refused"`
	Error      *ToolError `json:"error,omitempty"`
	DurationMs int64      `json:"durationMs"`
	// Result is what the browser may see of a successful object output:
	// the fields on the tool's result allow-list (absent otherwise).
	Result map[string]any `json:"result,omitempty"`
}

// TurnDone ends a turn.
type TurnDone struct {
	Turn   int     `json:"turn"`
	Reason TurnEnd `json:"reason"`
	// IgnoredIntents are the intents the turn's tools returned that do
	// not apply in the session's mode (a text turn has no audio to
	// suppress), each with why; absent when there were none.
	IgnoredIntents []IgnoredIntent `json:"ignoredIntents,omitempty"`
}

// IgnoredIntent is an intent a tool returned that the session did not
// apply, and why.
type IgnoredIntent struct {
	Type   string `json:"type"`
	Reason string `json:"reason"`
}

// Error reports a problem; the session may go on.
type Error struct {
	Code      string `json:"code"`
	Message   string `json:"message"`
	Retryable bool   `json:"retryable"`
	Turn      int    `json:"turn,omitempty"`
}

// Pong answers ping.
type Pong struct{}

// NewError builds an error event.
func NewError(code, msg string, retryable bool, turn int) Error {
	return Error{Code: code, Message: msg, Retryable: retryable, Turn: turn}
}

// CloseReason trims a close reason to the 123 bytes a close frame allows,
// without splitting a UTF-8 sequence.
func CloseReason(s string) string {
	if len(s) <= MaxCloseReasonBytes {
		return s
	}
	cut := MaxCloseReasonBytes
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut]
}

// Interrupted is audio.interrupted: the browser drops queued playback.
type Interrupted struct {
	Turn int `json:"turn"`
}
