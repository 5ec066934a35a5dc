// Package profiles loads assistant profiles: one JSON file per assistant in
// a folder (TURNSTILE_PROFILES_DIR), each a system prompt, a subset of the
// tools, a voice, a language, per-turn budgets and a greeting. A session
// runs one profile, or the gateway's default (no profile: today's
// behaviour).
package profiles

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/tools"
)

// Profile is one assistant. Every zero value means the gateway's default.
type Profile struct {
	Name string `json:"-"` // the file's name without .json
	// SystemPrompt replaces the gateway's system prompt for the profile's
	// sessions.
	SystemPrompt string `json:"systemPrompt"`
	// Tools, when set, are the only tools the profile's model is offered.
	Tools []string `json:"tools"`
	// Voice is the Live voice, one of TURNSTILE_LIVE_VOICES; LanguageCode
	// the conversation's language (BCP-47). A session's own ask wins.
	Voice        string `json:"voice"`
	LanguageCode string `json:"languageCode"`
	// Greeting is what the assistant says first in a new session of the
	// profile (not in a resumed one): shown to the user as its first
	// message and kept in the history as its entry (docs/profiles.md).
	Greeting string `json:"greeting"`
	// Budgets are the per-turn budgets of the profile's sessions by mode
	// ("text", "voice"); a mode left out keeps the gateway's (its policy
	// file, TURNSTILE_*_MAX_*, the defaults). Read from the file's
	// "budgets" (budgets.go).
	Budgets map[protocol.Mode]tools.Budget `json:"-"`
}

// Set is the loaded profiles by name.
type Set map[string]*Profile

// Names lists the profiles, sorted.
func (s Set) Names() []string { return slices.Sorted(maps.Keys(s)) }

// maxFileBytes bounds a profile file.
const maxFileBytes = 256 << 10

// Check says whether a tool exists, for the tool lists of profiles.
type Check struct {
	Tool   func(name string) bool
	Voices []string // the voices a profile may name
}

// Load reads every *.json file of dir as a profile named after the file.
// Errors name the file and what is wrong: an unknown field, a name that
// cannot be a profile's, an unknown tool, a voice not allowed, a malformed
// language.
func Load(dir string, check Check) (Set, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("profiles: %w", err)
	}
	set := Set{}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		path := filepath.Join(dir, e.Name())
		p, err := loadFile(path, check)
		if err != nil {
			return nil, fmt.Errorf("profile %s: %w", path, err)
		}
		set[p.Name] = p
	}
	if len(set) == 0 {
		return nil, fmt.Errorf("profiles: %s holds no *.json profile", dir)
	}
	return set, nil
}

func loadFile(path string, check Check) (*Profile, error) {
	name := strings.TrimSuffix(filepath.Base(path), ".json")
	if !protocol.ValidProfileName(name) {
		return nil, errors.New("the file name must be a profile name: lower-case letters, digits, - and _ (at most 64) then .json")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(b) > maxFileBytes {
		return nil, fmt.Errorf("larger than %d bytes", maxFileBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	f := file{Profile: &Profile{Name: name}}
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("not a profile (fields: %s): %w", fields, err)
	}
	p := f.Profile
	if p.Budgets, err = f.budgets(); err != nil {
		return nil, err
	}
	if err := checkGreeting(p.Greeting); err != nil {
		return nil, err
	}
	for _, t := range p.Tools {
		if check.Tool != nil && !check.Tool(t) {
			return nil, fmt.Errorf("tools: no tool %q here", t)
		}
	}
	if p.Voice != "" && !slices.Contains(check.Voices, p.Voice) {
		return nil, fmt.Errorf("voice %q is not one of TURNSTILE_LIVE_VOICES", p.Voice)
	}
	if p.LanguageCode != "" && !protocol.ValidLanguageCode(p.LanguageCode) {
		return nil, fmt.Errorf("languageCode %q is not a BCP-47 language tag such as de-DE", p.LanguageCode)
	}
	return p, nil
}
