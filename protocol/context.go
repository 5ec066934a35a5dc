package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// What session.start may say about the session beyond its mode: the page
// context (an untrusted JSON object the model is shown as such), the
// assistant profile, and the voice and language of the conversation.

// The bounds of session.start's context: its compact JSON at most
// MaxContextBytes, objects and arrays nested at most MaxContextDepth deep
// (the top object is depth 1), strings free of control characters.
const (
	MaxContextBytes = 2048
	MaxContextDepth = 4
)

var (
	profileName  = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)
	voiceName    = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]{0,63}$`)
	languageCode = regexp.MustCompile(`^[A-Za-z]{2,3}(-[A-Za-z0-9]{2,8}){0,3}$`)
)

// ValidProfileName reports whether s can name a profile: lower-case
// letters, digits, - and _, at most 64, starting with a letter or digit.
func ValidProfileName(s string) bool { return profileName.MatchString(s) }

// ValidVoiceName reports whether s can name a prebuilt voice ("Kore").
func ValidVoiceName(s string) bool { return voiceName.MatchString(s) }

// ValidLanguageCode reports whether s looks like a BCP-47 language tag
// ("de-DE", "en", "pt-BR").
func ValidLanguageCode(s string) bool { return languageCode.MatchString(s) }

// decodeStartExtras checks session.start's context, profile, voice and
// languageCode into m.
func decodeStartExtras(m *ClientMessage, w wireClient) error {
	if len(w.Context) > 0 && !bytes.Equal(bytes.TrimSpace(w.Context), []byte("null")) {
		ctx, err := CleanContext(w.Context)
		if err != nil {
			return err
		}
		m.Context = ctx
	}
	if w.Profile != "" && !ValidProfileName(w.Profile) {
		return &DecodeError{CodeBadMessage, "profile must be a profile name: lower-case letters, digits, - and _ (at most 64)"}
	}
	if w.Voice != "" && !ValidVoiceName(w.Voice) {
		return &DecodeError{CodeBadMessage, "voice must be a voice name such as \"Kore\": letters, digits, - and _ (at most 64)"}
	}
	if w.LanguageCode != "" && !ValidLanguageCode(w.LanguageCode) {
		return &DecodeError{CodeBadMessage, "languageCode must be a BCP-47 language tag such as \"de-DE\""}
	}
	m.Profile, m.Voice, m.LanguageCode = w.Profile, w.Voice, w.LanguageCode
	return nil
}

// CleanContext checks a session.start context and returns it as compact
// JSON with sorted keys and <, > and & escaped (so that it cannot close the
// block the instruction puts it in): a JSON object within MaxContextBytes
// and MaxContextDepth whose strings (keys too) hold no control characters.
// The error never echoes the context.
func CleanContext(raw json.RawMessage) (json.RawMessage, error) {
	if len(raw) > 4*MaxContextBytes {
		return nil, contextTooBig()
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, &DecodeError{CodeBadMessage, "context must be a JSON object"}
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, &DecodeError{CodeBadMessage, "context must be a JSON object, e.g. {\"page\":\"/orders/1234\"}"}
	}
	if err := checkContextValue(v, 1); err != nil {
		return nil, err
	}
	out, err := json.Marshal(v)
	if err != nil {
		return nil, &DecodeError{CodeBadMessage, "context must be a JSON object"}
	}
	if len(out) > MaxContextBytes {
		return nil, contextTooBig()
	}
	return out, nil
}

func contextTooBig() error {
	return &DecodeError{CodeBadMessage, fmt.Sprintf("context is larger than %d bytes of JSON", MaxContextBytes)}
}

func checkContextValue(v any, depth int) error {
	switch v := v.(type) {
	case map[string]any:
		if depth > MaxContextDepth {
			return contextTooDeep()
		}
		for k, e := range v {
			if err := checkContextString(k); err != nil {
				return err
			}
			if err := checkContextValue(e, depth+1); err != nil {
				return err
			}
		}
	case []any:
		if depth > MaxContextDepth {
			return contextTooDeep()
		}
		for _, e := range v {
			if err := checkContextValue(e, depth+1); err != nil {
				return err
			}
		}
	case string:
		return checkContextString(v)
	}
	return nil
}

func contextTooDeep() error {
	return &DecodeError{CodeBadMessage, fmt.Sprintf("context is nested deeper than %d levels", MaxContextDepth)}
}

func checkContextString(s string) error {
	if !utf8.ValidString(s) || strings.ContainsFunc(s, isControl) {
		return &DecodeError{CodeBadMessage, "context strings must be valid UTF-8 without control characters"}
	}
	return nil
}
