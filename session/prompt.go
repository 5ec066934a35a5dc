package session

import (
	"encoding/json"
	"strings"

	"github.com/turnstile-gw/turnstile/orchestrator"
	"github.com/turnstile-gw/turnstile/tools"
	"github.com/turnstile-gw/turnstile/transport"
)

// systemAndTools builds the system instruction (the base prompt followed by
// each declared tool's guide) and the declarations for one mode. The base
// prompt itself is never altered.
func systemAndTools(base string, ts []*tools.Tool) (string, []transport.ToolDecl) {
	var b strings.Builder
	b.WriteString(base)
	decls := make([]transport.ToolDecl, 0, len(ts))
	if len(ts) > 0 {
		b.WriteString("\n\n# Tools\n")
	}
	var terminal []string
	for _, t := range ts {
		if t.Terminal || t.Name == orchestrator.FinishTool {
			terminal = append(terminal, t.Name)
		}
	}
	if len(terminal) > 0 {
		b.WriteString("\nTerminal tools: " + strings.Join(terminal, ", ") + ". When one of them succeeds, its " +
			"output is shown to the user as your final answer and the turn ends; add nothing after it.\n")
	}
	for _, t := range ts {
		decls = append(decls, transport.ToolDecl{Name: t.Name, Description: t.Description, Parameters: t.ParametersSchema()})
		b.WriteString("\n## ")
		b.WriteString(t.Name)
		b.WriteString("\n")
		b.WriteString(strings.TrimSpace(t.Guide))
		b.WriteString("\n")
	}
	return b.String(), decls
}

// estimateTokens is the session-init estimate, in tokens: characters of
// the system instruction and of the JSON of the declarations, divided by
// four.
func estimateTokens(system string, decls []transport.ToolDecl) (systemTokens, toolTokens int) {
	n := 0
	if b, err := json.Marshal(decls); err == nil {
		n = len(b)
	}
	return len(system) / 4, n / 4
}

// historyTokens estimates the tokens of a history the same way.
func historyTokens(h []transport.Entry) int {
	n := 0
	for _, e := range h {
		n += len(e.Text)
		for _, c := range e.Calls {
			n += len(c.Name) + 16*len(c.Args)
		}
		for _, r := range e.Results {
			if b, err := json.Marshal(r.Response); err == nil {
				n += len(b)
			}
		}
	}
	return n / 4
}
