package fakegemini

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/genai"
)

// The demo models call any declared tool on request, so that the offline
// demo can try every tool the gateway offers: the user types
//
//	/call NAME {json args}
//
// (the arguments are optional and default to {}). The model calls NAME if
// the session declared it, says so if not, and after the function response
// arrives answers with a short summary of the result.

// callCommand is the prefix of a typed tool call.
const callCommand = "/call"

// slashCall is a parsed "/call NAME {args}".
type slashCall struct {
	name    string
	args    map[string]any
	problem string // why the command cannot be run, in words for the user
}

// parseSlashCall reads text as a /call command; ok is false when text is
// something else.
func parseSlashCall(text string) (slashCall, bool) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(text), callCommand)
	if !ok || rest != "" && rest[0] != ' ' && rest[0] != '\t' && rest[0] != '\n' {
		return slashCall{}, false
	}
	rest = strings.TrimSpace(rest)
	name, rawArgs, _ := strings.Cut(rest, " ")
	if i := strings.IndexAny(name, "{\t\n"); i >= 0 { // "/call name{...}" or a tab
		name, rawArgs = name[:i], rest[i:]
	}
	c := slashCall{name: name, args: map[string]any{}}
	if name == "" {
		c.problem = `Tell me which tool to call, e.g. /call create_ticket {"title":"x"}.`
		return c, true
	}
	if rawArgs = strings.TrimSpace(rawArgs); rawArgs != "" {
		if err := json.Unmarshal([]byte(rawArgs), &c.args); err != nil || c.args == nil {
			c.args = map[string]any{}
			c.problem = fmt.Sprintf(`I couldn't read the arguments for %s: they must be one JSON object, e.g. {"title":"x"}.`, name)
		}
	}
	return c, true
}

// checkDeclared sets c.problem when the session declared no tool c.name.
func (c *slashCall) checkDeclared(declared []string) {
	if c.problem != "" || slices.Contains(declared, c.name) {
		return
	}
	if len(declared) == 0 {
		c.problem = fmt.Sprintf("I can't call %s: no tools are declared in this session.", c.name)
		return
	}
	c.problem = fmt.Sprintf("I can't call %s: it is not declared in this session. Declared tools: %s.",
		c.name, strings.Join(declared, ", "))
}

// declaredNames lists the function names of tools, in order.
func declaredNames(tools []*genai.Tool) []string {
	var out []string
	for _, t := range tools {
		if t == nil {
			continue
		}
		for _, d := range t.FunctionDeclarations {
			if d != nil {
				out = append(out, d.Name)
			}
		}
	}
	return out
}

// summaryLimit bounds the quoted part of a tool result, in runes.
const summaryLimit = 300

// summarizeResult says in one or two sentences how a tool call went:
// {"error": ...} is a failure, anything else (usually {"output": ...}) a
// success, quoted as compact JSON.
func summarizeResult(name string, response map[string]any) string {
	if msg, failed := toolFailure(response); failed {
		return fmt.Sprintf("The %s tool failed: %s", name, msg)
	}
	out, ok := response["output"]
	if !ok {
		out = response
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
		return fmt.Sprintf("The %s tool succeeded, with nothing to report.", name)
	}
	return fmt.Sprintf("The %s tool succeeded: %s", name, truncateWords(quoted, summaryLimit))
}

// lastUserText is the text of the last user content that is not only
// function responses: what the user last typed.
func lastUserText(contents []*genai.Content) string {
	for i := len(contents) - 1; i >= 0; i-- {
		if t := userText(contents[i]); t != "" {
			return t
		}
	}
	return ""
}
