package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// ClientMessage is one decoded and validated browser message. Only the
// fields of its Type are set.
type ClientMessage struct {
	Type   string
	Mode   Mode    // session.start
	Resume *Resume // session.start
	// Traceparent is the W3C traceparent of the browser's span
	// (session.start): the session's turn traces link to it.
	Traceparent string
	// Context is session.start's page context, checked and re-encoded by
	// CleanContext; nil when none was sent.
	Context json.RawMessage
	// Profile, Voice and LanguageCode are session.start's asks for an
	// assistant profile, a Live voice and a language ("" when not sent);
	// whether they are allowed is the gateway's decision.
	Profile, Voice, LanguageCode string
	Text                         string // text
	Token                        string // confirm, auth
	Approve                      bool   // confirm
	Before                       int    // history: a turn number (exclusive)
	Limit                        int    // history: 1 to HistoryLimitMax
}

// Resume asks for an existing session back.
type Resume struct {
	SessionID   string `json:"sessionId"`
	ResumeToken string `json:"resumeToken"`
}

// DecodeError is a message the gateway refuses; Code is an error-event code.
type DecodeError struct {
	Code    string
	Message string
}

func (e *DecodeError) Error() string { return e.Code + ": " + e.Message }

// Limits bound what a client may send.
type Limits struct {
	MaxTextChars int // 0 means the default (8000)
}

type wireClient struct {
	Type         *string         `json:"type"`
	Mode         Mode            `json:"mode"`
	Resume       *Resume         `json:"resume"`
	Trace        string          `json:"traceparent"`
	Context      json.RawMessage `json:"context"`
	Profile      string          `json:"profile"`
	Voice        string          `json:"voice"`
	LanguageCode string          `json:"languageCode"`
	Text         *string         `json:"text"`
	Token        string          `json:"token"`
	Approve      *bool           `json:"approve"`
	Before       *int            `json:"before"`
	Limit        *int            `json:"limit"`
}

// Decode parses one text frame. It never panics; a refused frame yields a
// *DecodeError whose Message never echoes what the client sent.
func Decode(data []byte, lim Limits) (ClientMessage, error) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return ClientMessage{}, &DecodeError{CodeBadJSON, "a message must be a JSON object"}
	}
	var w wireClient
	if err := json.Unmarshal(trimmed, &w); err != nil {
		return ClientMessage{}, &DecodeError{CodeBadJSON, "the message is not valid JSON or a field has the wrong type"}
	}
	if w.Type == nil || *w.Type == "" {
		return ClientMessage{}, &DecodeError{CodeBadMessage, "the message has no \"type\""}
	}
	m := ClientMessage{Type: *w.Type}
	switch m.Type {
	case TypeSessionStart:
		switch w.Mode {
		case "", ModeText, ModeVoice:
			m.Mode = w.Mode
		default:
			return m, &DecodeError{CodeBadMessage, "mode must be \"text\" or \"voice\""}
		}
		if m.Mode == "" {
			m.Mode = ModeText
		}
		if w.Resume != nil {
			if !validID(w.Resume.SessionID, maxSessionIDLen) || !validID(w.Resume.ResumeToken, maxResumeTokenLen) {
				return m, &DecodeError{CodeBadMessage, "resume needs a well-formed sessionId and resumeToken"}
			}
			r := *w.Resume
			m.Resume = &r
		}
		if w.Trace != "" {
			if !validTraceparent(w.Trace) {
				return m, &DecodeError{CodeBadMessage, "traceparent must be a W3C traceparent: 00-<32 hex>-<16 hex>-<2 hex>, lower case, IDs not all zero"}
			}
			m.Traceparent = w.Trace
		}
		if err := decodeStartExtras(&m, w); err != nil {
			return m, err
		}
	case TypeText:
		if w.Text == nil {
			return m, &DecodeError{CodeBadMessage, "text needs a \"text\" field"}
		}
		text, err := cleanText(*w.Text, lim.maxText())
		if err != nil {
			return m, err
		}
		m.Text = text
	case TypeConfirm:
		if w.Approve == nil || !validID(w.Token, maxResumeTokenLen) {
			return m, &DecodeError{CodeBadMessage, "confirm needs a token and approve"}
		}
		m.Token, m.Approve = w.Token, *w.Approve
	case TypeAuth:
		if !validToken(w.Token) {
			return m, &DecodeError{CodeBadMessage, "auth needs a token"}
		}
		m.Token = w.Token
	case TypeHistory:
		if w.Before == nil || *w.Before < 1 {
			return m, &DecodeError{CodeBadMessage, "history needs before, a turn number of at least 1"}
		}
		m.Before, m.Limit = *w.Before, defaultHistoryLimit
		if w.Limit != nil {
			if *w.Limit < 1 || *w.Limit > HistoryLimitMax {
				return m, &DecodeError{CodeBadMessage, fmt.Sprintf("history limit must be 1 to %d", HistoryLimitMax)}
			}
			m.Limit = *w.Limit
		}
	case TypeTurnCancel, TypePing, TypeAudioEnd, TypeVoiceStart, TypeVoiceStop:
	default:
		return ClientMessage{}, &DecodeError{CodeUnknownType, "unknown message type"}
	}
	return m, nil
}

func (l Limits) maxText() int {
	if l.MaxTextChars <= 0 {
		return defaultMaxTextCharacter
	}
	return l.MaxTextChars
}

// validID accepts the URL-safe base64 alphabet plus '_' and '-' only.
func validID(s string, max int) bool {
	if s == "" || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// validToken accepts a bounded run of printable ASCII (a JWT is base64url
// parts joined by dots); what it means is the verifier's business.
func validToken(s string) bool {
	if s == "" || len(s) > maxAuthTokenLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// cleanText strips control characters from a user message (see
// StripControl) and checks what is left: valid UTF-8, not blank, at most
// max characters.
func cleanText(s string, max int) (string, error) {
	if !utf8.ValidString(s) {
		return "", &DecodeError{CodeBadMessage, "text is not valid UTF-8"}
	}
	s = StripControl(s)
	if strings.TrimSpace(s) == "" {
		return "", &DecodeError{CodeBadMessage, "text is empty"}
	}
	if utf8.RuneCountInString(s) > max {
		return "", &DecodeError{CodeBadMessage, fmt.Sprintf("text is longer than %d characters", max)}
	}
	return s, nil
}

// validTraceparent accepts a W3C Trace Context traceparent of version 00:
// "00-" 32 lower-case hex digits (trace ID, not all zero) "-" 16 (parent
// span ID, not all zero) "-" 2 (flags).
func validTraceparent(s string) bool {
	if len(s) != 55 || s[0:3] != "00-" || s[35] != '-' || s[52] != '-' {
		return false
	}
	hexOnly := func(h string) (zero bool, ok bool) {
		zero = true
		for i := 0; i < len(h); i++ {
			c := h[i]
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
				return false, false
			}
			zero = zero && c == '0'
		}
		return zero, true
	}
	traceZero, ok1 := hexOnly(s[3:35])
	spanZero, ok2 := hexOnly(s[36:52])
	_, ok3 := hexOnly(s[53:55])
	return ok1 && ok2 && ok3 && !traceZero && !spanZero
}
