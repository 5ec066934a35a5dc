package tools

import (
	"slices"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/turnstile-gw/turnstile/protocol"
)

// DefaultTimeout is the hard limit of a tool whose manifest sets none.
const DefaultTimeout = 10 * time.Second

// Tool is one registered tool: its manifest, its handler, and the compiled
// argument schema. A Tool is immutable and safe for concurrent use.
type Tool struct {
	Manifest
	Handler Handler

	args       *jsonschema.Schema
	properties []string // top-level argument names, sorted
	rawSchema  []byte   // schema.json as read (or the spec's JSON), for the version hash
	rawGuide   []byte   // guide.md as read, for the version hash
	origin     string   // where the tool comes from, for messages
}

// Origin says where the tool comes from, for messages: the Origin given to
// LoadWith or NewTool (e.g. "built-in tools", "MCP server notes (tool
// create-note)"), or "" when none was given.
func (t *Tool) Origin() string {
	return t.origin
}

// Timeout is the hard limit for one call: timeoutMs, or DefaultTimeout.
func (t *Tool) Timeout() time.Duration {
	if t.TimeoutMs > 0 {
		return time.Duration(t.TimeoutMs) * time.Millisecond
	}
	return DefaultTimeout
}

// AllowedIn reports whether the tool is declared in the given session mode.
func (t *Tool) AllowedIn(mode protocol.Mode) bool {
	return slices.Contains(t.Modes, mode)
}

// ArgNames returns the tool's top-level argument names, sorted.
func (t *Tool) ArgNames() []string {
	return slices.Clone(t.properties)
}

// IsSensitive reports whether the tool is sensitive: the manifest's (or
// policy's) sensitive when set, otherwise true for a tool that blocks the
// user, ends the conversation or its mode (endsSession), or needs the
// user's confirmation.
func (t *Tool) IsSensitive() bool {
	if t.Sensitive != nil {
		return *t.Sensitive
	}
	return t.BlocksUser || t.EndsSession || t.RequiresConfirmation
}
