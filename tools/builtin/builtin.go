// Package builtin holds the gateway's built-in tools: their manifests
// (schema.json and guide.md per folder, embedded) and their handlers.
//
// Adding a tool takes a folder and a constructor: `gateway tools new NAME`
// writes both (see docs/tools.md). Every folder of this directory is
// embedded by the pattern below, and constructors (registry.go) maps each
// tool's name to the function that builds its handler.
package builtin

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"

	"github.com/turnstile-gw/turnstile/tools"
	"github.com/turnstile-gw/turnstile/tools/kb"
)

//go:embed */schema.json */guide.md
var manifests embed.FS

// FS holds one folder per built-in tool, ready for tools.Load.
var FS fs.FS = manifests

// Deps is what one built-in handler is built with: the dependencies every
// Go tool gets (settings, secrets, an HTTP client, a logger) and the
// gateway's knowledge base.
type Deps struct {
	tools.Deps
	// KB serves kb_search and kb_get; nil when only the manifests matter
	// (those two then answer every call INTERNAL).
	KB *kb.Index
}

// Build builds the handler of every built-in tool, keyed by tool name. x
// serves the knowledge-base tools; deps gives each tool its tools.Deps
// (nil: tools.NewDeps(name, nil, nil, nil), nothing set). A constructor's
// error, naming its tool, makes Build fail: a tool that lacks what it needs
// stops the gateway at startup rather than failing its calls.
func Build(x *kb.Index, deps func(name string) tools.Deps) (map[string]tools.Handler, error) {
	if deps == nil {
		deps = func(name string) tools.Deps { return tools.NewDeps(name, nil, nil, nil) }
	}
	out := make(map[string]tools.Handler, len(constructors))
	var errs []error
	for _, name := range constructorNames() {
		h, err := constructors[name](Deps{Deps: deps(name), KB: x})
		if err != nil {
			errs = append(errs, fmt.Errorf("tool %s: %w", name, err))
			continue
		}
		out[name] = h
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// Handlers returns the built-in handlers over x with nothing set in their
// Deps, for tests and manifest checks. A tool whose constructor fails
// without settings or secrets gets a handler that answers every call
// INTERNAL with the constructor's error; use Build to see such errors.
func Handlers(x *kb.Index) map[string]tools.Handler {
	out := make(map[string]tools.Handler, len(constructors))
	for _, name := range constructorNames() {
		h, err := constructors[name](Deps{Deps: tools.NewDeps(name, nil, nil, nil), KB: x})
		if err != nil {
			msg := fmt.Sprintf("%s is not configured: %v", name, err)
			h = tools.HandlerFunc(func(context.Context, tools.Call) tools.Envelope {
				return tools.Fail(tools.ErrInternal, msg, false, false)
			})
		}
		out[name] = h
	}
	return out
}

// cancelled answers a call whose context ended before it could finish.
func cancelled(ctx context.Context) (tools.Envelope, bool) {
	if ctx.Err() == nil {
		return tools.Envelope{}, false
	}
	return tools.Fail(tools.ErrTransient, "the call was cancelled before it finished", true, false), true
}
