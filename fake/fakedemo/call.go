package fakedemo

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// A message "/call NAME {json args}" calls any declared tool by hand, so
// that the offline demo can try every tool the gateway offers; the
// arguments are optional and default to {}. Several calls separated by ";"
// ("/call kb_search {"query":"refunds"}; kb_get {"id":"shipping"}") are
// made in one model message, as a model making parallel calls does, so
// that per-turn budgets and loop rules can be tried by hand. Once the tools
// have answered, the demo reports what each said, whatever the tool.

const (
	// callPrefix starts a message that calls a tool by hand.
	callPrefix = "/call"
	// outputLimit bounds a quoted tool output, in runes.
	outputLimit = 300
)

// typedCall is a parsed "/call NAME {args}".
type typedCall struct {
	name     string
	args     map[string]any // {} when argsJSON is not a JSON object
	argsJSON string         // as typed; "{}" when absent
	problem  string         // why argsJSON cannot be sent as arguments, for the user
}

// callSeparator separates the calls of a "/call" that makes several.
const callSeparator = ';'

// IsCall reports whether text is a "/call" command.
func IsCall(text string) bool {
	_, ok := commandRest(text)
	return ok
}

// commandRest is what follows "/call" in text; ok is false when text is
// not a "/call" command.
func commandRest(text string) (string, bool) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(text), callPrefix)
	if !ok || rest != "" && rest[0] != ' ' && rest[0] != '\t' && rest[0] != '\n' {
		return "", false
	}
	return strings.TrimSpace(rest), true
}

// parseCalls reads text as a "/call" command making one call or several
// (NAME {args} separated by ";"); ok is false when text is something
// else. Text that does not split into well-formed calls is one call, read
// as parseCall reads it (with its problem, if any).
func parseCalls(text string) ([]typedCall, bool) {
	rest, ok := commandRest(text)
	if !ok {
		return nil, false
	}
	if calls := splitCalls(rest); len(calls) > 1 {
		return calls, true
	}
	c, _ := parseCall(text)
	return []typedCall{c}, true
}

// splitCalls splits "NAME {args}; NAME; NAME {args}" into its calls; nil
// when any part is not a name optionally followed by one JSON object.
func splitCalls(rest string) []typedCall {
	var calls []typedCall
	for {
		rest = strings.TrimSpace(rest)
		end := strings.IndexFunc(rest, func(r rune) bool {
			return r == '{' || r == callSeparator || r == ' ' || r == '\t' || r == '\n'
		})
		if end < 0 {
			end = len(rest)
		}
		c := typedCall{name: rest[:end], args: map[string]any{}, argsJSON: "{}"}
		if c.name == "" {
			return nil
		}
		rest = strings.TrimSpace(rest[end:])
		if strings.HasPrefix(rest, "{") {
			dec := json.NewDecoder(strings.NewReader(rest))
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil || json.Unmarshal(raw, &c.args) != nil {
				return nil
			}
			c.argsJSON = string(raw) // as typed
			rest = strings.TrimSpace(rest[dec.InputOffset():])
		}
		calls = append(calls, c)
		if rest == "" {
			return calls
		}
		if rest[0] != callSeparator {
			return nil
		}
		rest = rest[1:]
	}
}

// parseCall reads text as a "/call" command making one call; ok is false
// when text is something else. The name is empty when the command names no
// tool.
func parseCall(text string) (c typedCall, ok bool) {
	rest, ok := commandRest(text)
	if !ok {
		return typedCall{}, false
	}
	name, raw, _ := strings.Cut(rest, " ")
	if i := strings.IndexAny(name, "{\t\n"); i >= 0 { // "/call name{...}" or a tab
		name, raw = name[:i], rest[i:]
	}
	c = typedCall{name: name, argsJSON: strings.TrimSpace(raw)}
	if c.argsJSON == "" {
		c.argsJSON = "{}"
	}
	if err := json.Unmarshal([]byte(c.argsJSON), &c.args); err != nil || c.args == nil {
		c.args = map[string]any{}
		c.problem = fmt.Sprintf(`I couldn't read the arguments for %s: they must be a JSON object, e.g. /call %s {"key": "value"}.`, name, name)
	}
	return c, true
}

// manualCalls answers a "/call": its calls in one message, or why one of
// them cannot be made.
func manualCalls(cs []typedCall, in Input) Action {
	var out Action
	for _, c := range cs {
		a := manualCall(c, in)
		if len(a.Calls) == 0 {
			return a
		}
		out.Calls = append(out.Calls, a.Calls...)
	}
	return out
}

// manualCall answers one call of a "/call": the call, or why it cannot be
// made. Where arguments travel as text (Input.RawArgs), arguments that are
// not a JSON object are sent as typed.
func manualCall(c typedCall, in Input) Action {
	switch {
	case c.name == "":
		return say(`Tell me which tool to call: /call NAME {"arg": "value"}, e.g. /call kb_search {"query": "refunds"}. ` +
			"Declared tools: " + toolList(in.Tools) + ".")
	case c.problem != "" && !in.RawArgs:
		return say(c.problem)
	case len(in.Tools) == 0:
		return say(fmt.Sprintf("I can't call %s: no tools are declared in this session.", c.name))
	case !slices.Contains(in.Tools, c.name):
		return say(fmt.Sprintf("I can't call %s: it is not declared in this session. Declared tools: %s.",
			c.name, toolList(in.Tools)))
	case c.problem != "":
		return Action{Calls: []Call{{Name: c.name, ArgsJSON: c.argsJSON}}}
	}
	return Action{Calls: []Call{{Name: c.name, Args: c.args, ArgsJSON: c.argsJSON}}}
}

func toolList(tools []string) string {
	if len(tools) == 0 {
		return "none"
	}
	return strings.Join(tools, ", ")
}

// reportResults says what each tool answered to a "/call", a line each.
func reportResults(rs []Result) Action {
	lines := make([]string, 0, len(rs))
	for _, r := range rs {
		lines = append(lines, Report(r))
	}
	return say(strings.Join(lines, "\n"))
}

// Report says in one sentence how a tool call went: {"error": ...} is a
// failure, anything else (usually {"output": ...}) a success, quoted as
// compact JSON (a string output as it is) and cut at a word after about
// 300 characters.
func Report(r Result) string {
	if msg, failed := Failure(r.Response); failed {
		return fmt.Sprintf("The %s tool failed: %s", r.Name, msg)
	}
	out, ok := r.Response["output"]
	if !ok {
		out = r.Response
	}
	var quoted string
	switch v := out.(type) {
	case string:
		quoted = v
	default:
		data, err := json.Marshal(v)
		if err != nil {
			quoted = fmt.Sprint(v)
		} else {
			quoted = string(data)
		}
	}
	if quoted == "" || quoted == "{}" || quoted == "null" {
		return fmt.Sprintf("The %s tool succeeded, with nothing to report.", r.Name)
	}
	return fmt.Sprintf("The %s tool succeeded: %s", r.Name, TruncateWords(quoted, outputLimit))
}
