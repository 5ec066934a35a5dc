package builtin

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/turnstile-gw/turnstile/tools"
	"github.com/turnstile-gw/turnstile/tools/kb"
)

// kbGet answers kb_get{id} with {"id","title","body"}.
type kbGet struct {
	index *kb.Index
}

type kbGetArgs struct {
	ID string `json:"id"`
}

// maxEchoedID bounds how much of an unknown id the error repeats.
const maxEchoedID = 128

func newKBGet(d Deps) (tools.Handler, error) {
	return kbGet{index: d.KB}, nil
}

// noKB answers the knowledge-base tools when they were built without one
// (a check of the manifests only).
func noKB() tools.Envelope {
	return tools.Fail(tools.ErrInternal, "the knowledge base is not loaded", false, false)
}

func (h kbGet) Handle(ctx context.Context, call tools.Call) tools.Envelope {
	if env, done := cancelled(ctx); done {
		return env
	}
	if h.index == nil {
		return noKB()
	}
	var args kbGetArgs
	if err := json.Unmarshal(call.Args, &args); err != nil || args.ID == "" {
		return tools.Fail(tools.ErrValidation, "arguments must be an object with a string id", false, false)
	}
	doc, ok := h.index.Get(args.ID)
	if !ok {
		id := args.ID
		if len(id) > maxEchoedID {
			id = id[:maxEchoedID] + "…"
		}
		return tools.Fail(tools.ErrPermanent, fmt.Sprintf("no document with id %q; use kb_search to find ids", id), false, false)
	}
	return tools.OK(map[string]any{"id": doc.ID, "title": doc.Title, "body": doc.Body})
}
