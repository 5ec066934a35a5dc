package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"google.golang.org/genai"

	"github.com/turnstile-gw/turnstile/protocol"
)

// registryDoc is tool_registry.json: what a registry declares, for
// operators, CI diffs and clients that want the tool list without running
// the gateway.
type registryDoc struct {
	Version string    `json:"version"`
	Commit  string    `json:"commit"`
	BuiltAt string    `json:"builtAt"`
	Tools   []toolDoc `json:"tools"`
}

type toolDoc struct {
	Name                 string           `json:"name"`
	Description          string           `json:"description"`
	Category             Category         `json:"category"`
	Modes                []protocol.Mode  `json:"modes"`
	RequiresConfirmation bool             `json:"requiresConfirmation"`
	Terminal             bool             `json:"terminal"`
	EndsSession          bool             `json:"endsSession"`
	Sensitive            bool             `json:"sensitive"`
	TrustedOutput        bool             `json:"trustedOutput"`
	SoftLatencyMs        map[string]int64 `json:"softLatencyMs"`
	TimeoutMs            int64            `json:"timeoutMs"`
	Redact               Redact           `json:"redact"`
	Parameters           json.RawMessage  `json:"parameters"`
	Providers            providersDoc     `json:"providers"`
	Guide                string           `json:"guide"`
}

type providersDoc struct {
	OpenAI map[string]any `json:"openai"`
	Gemini geminiDoc      `json:"gemini"`
}

type geminiDoc struct {
	Parameters           *genai.Schema  `json:"parameters"`
	ParametersJSONSchema map[string]any `json:"parametersJsonSchema"`
}

// BuildManifest renders the registry as the tool_registry.json document:
// version, commit, build time (RFC 3339, UTC) and every tool in name order
// with its effective metadata (softLatencyMs and timeoutMs with defaults
// applied; softLatencyMs 0 means no soft budget), redaction allow-lists,
// canonical parameters, provider renderings (OpenAI function; Gemini Schema
// and parametersJsonSchema) and guide. The output is indented, ends in a
// newline, and is byte-for-byte the same for the same registry, commit and
// time. It fails, naming each tool, when a tool's parameters cannot be
// expressed as a Gemini Schema.
func (r *Registry) BuildManifest(commit string, built time.Time) ([]byte, error) {
	doc := registryDoc{
		Version: r.version,
		Commit:  commit,
		BuiltAt: built.UTC().Format(time.RFC3339),
		Tools:   make([]toolDoc, 0, len(r.tools)),
	}
	var errs []error
	for _, t := range r.tools {
		gs, err := GeminiSchema(t.ParametersSchema())
		if err != nil {
			errs = append(errs, fmt.Errorf("tool %s: %w", t.Name, err))
			continue
		}
		var params bytes.Buffer
		if err := json.Compact(&params, t.Parameters); err != nil {
			errs = append(errs, fmt.Errorf("tool %s: parameters: %w", t.Name, err))
			continue
		}
		doc.Tools = append(doc.Tools, toolDoc{
			Name:                 t.Name,
			Description:          t.Description,
			Category:             t.Category,
			Modes:                t.Modes,
			RequiresConfirmation: t.RequiresConfirmation,
			Terminal:             t.Terminal,
			EndsSession:          t.EndsSession,
			Sensitive:            t.IsSensitive(),
			TrustedOutput:        t.TrustedOutput,
			SoftLatencyMs:        t.softLatencyDoc(),
			TimeoutMs:            t.Timeout().Milliseconds(),
			Redact:               Redact{Args: nonNil(t.Redact.Args), Result: nonNil(t.Redact.Result)},
			Parameters:           params.Bytes(),
			Providers: providersDoc{
				OpenAI: t.OpenAIFunction(),
				Gemini: geminiDoc{Parameters: gs, ParametersJSONSchema: t.ParametersSchema()},
			},
			Guide: t.Guide,
		})
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("build tool registry: %w", errors.Join(errs...))
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false) // guides are Markdown; keep <, > and & readable
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("build tool registry: encode: %w", err)
	}
	return out.Bytes(), nil
}

// nonNil makes an empty allow-list render as [] rather than null.
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
