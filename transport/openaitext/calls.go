package openaitext

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/turnstile-gw/turnstile/transport"
)

// assembler puts streamed tool-call fragments back together, for one
// request. Fragments are keyed by their index; a call's id and name come
// from the first fragment that has them, its arguments are the
// concatenation of every fragment's, and calls of several indexes may
// interleave.
type assembler struct {
	calls []*pendingCall // in order of first appearance
}

type pendingCall struct {
	index     int64
	id, name  string
	args      strings.Builder
	announced bool
	// afterName counts the fragments seen since the name arrived without
	// an id: a call is announced once its id is known or, for servers that
	// send none, at the next fragment.
	afterName int
}

// add applies one fragment and returns the calls it lets the adapter
// announce (ID and Name set, no Args).
func (a *assembler) add(index int64, id, name, args string) []transport.FunctionCall {
	var p *pendingCall
	for _, c := range a.calls {
		if c.index == index {
			p = c
			break
		}
	}
	if p == nil {
		p = &pendingCall{index: index}
		a.calls = append(a.calls, p)
	} else if p.name != "" && p.id == "" {
		p.afterName++
	}
	if p.id == "" && id != "" {
		p.id = id
	}
	if p.name == "" && name != "" {
		p.name = name
	}
	p.args.WriteString(args)
	if p.announced || p.name == "" || (p.id == "" && p.afterName == 0) {
		return nil
	}
	return []transport.FunctionCall{p.announce()}
}

// announce fixes the call's ID (a new one when the model sent none: the
// provider needs one to pair the result with the call) and marks it
// announced.
func (p *pendingCall) announce() transport.FunctionCall {
	if p.id == "" {
		p.id = transport.NewCallID()
	}
	p.announced = true
	return transport.FunctionCall{ID: p.id, Name: p.name}
}

// finish returns the calls not announced yet and every call complete, in
// index order. A call without a name breaks the stream format.
func (a *assembler) finish() (started, done []transport.FunctionCall, err error) {
	calls := slices.Clone(a.calls)
	slices.SortStableFunc(calls, func(x, y *pendingCall) int { return cmp.Compare(x.index, y.index) })
	for _, p := range calls {
		if p.name == "" {
			return nil, nil, errMalformed(fmt.Sprintf("the model streamed tool call %d without a function name", p.index))
		}
		if !p.announced {
			started = append(started, p.announce())
		}
		c := transport.FunctionCall{ID: p.id, Name: p.name}
		c.Args, c.ArgsError = parseArgs(p.args.String())
		done = append(done, c)
	}
	return started, done, nil
}

// parseArgs reads a call's arguments text as a JSON object; empty text is
// an empty object (some servers send nothing for a call without
// arguments). The error names the fault without quoting the text.
func parseArgs(text string) (map[string]any, string) {
	if strings.TrimSpace(text) == "" {
		return map[string]any{}, ""
	}
	var v any
	if err := json.Unmarshal([]byte(text), &v); err != nil {
		return nil, "arguments are not valid JSON"
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, "arguments are not a JSON object"
	}
	return m, ""
}
