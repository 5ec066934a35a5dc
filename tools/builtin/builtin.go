// Package builtin holds the gateway's built-in tools: their manifests
// (schema.json and guide.md per folder, embedded) and their handlers.
package builtin

import (
	"context"
	"embed"
	"io/fs"

	"github.com/turnstile-gw/turnstile/tools"
	"github.com/turnstile-gw/turnstile/tools/kb"
)

//go:embed kb_search kb_get ignore_user start_voice_session end_voice_session finish
var manifests embed.FS

// FS holds one folder per built-in tool, ready for tools.Load.
var FS fs.FS = manifests

// Handlers returns the handlers of the built-in tools, keyed by tool name,
// serving the knowledge-base tools from x.
func Handlers(x *kb.Index) map[string]tools.Handler {
	return map[string]tools.Handler{
		"kb_search":           kbSearch{index: x},
		"kb_get":              kbGet{index: x},
		"ignore_user":         ignoreUser{},
		"start_voice_session": startVoice{},
		"end_voice_session":   endVoice{},
		"finish":              finish{},
	}
}

// cancelled answers a call whose context ended before it could finish.
func cancelled(ctx context.Context) (tools.Envelope, bool) {
	if ctx.Err() == nil {
		return tools.Envelope{}, false
	}
	return tools.Fail(tools.ErrTransient, "the call was cancelled before it finished", true, false), true
}
