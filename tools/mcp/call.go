package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/tools"
	"github.com/turnstile-gw/turnstile/tracing"
)

// toolFrom turns a listed MCP tool into a gateway tool with the defaults
// for MCP tools: text mode only, category action, a 10 s timeout, nothing
// shown to the browser or logs, and confirmation unless the server marks
// the tool read-only (the MCP spec reads an unannotated tool as
// destructive). A policy file overrides any of these.
func (s *server) toolFrom(t *sdk.Tool) (*tools.Tool, error) {
	name := Namespace(s.cfg.Prefix, t.Name)
	params := []byte(`{"type":"object"}`)
	if t.InputSchema != nil {
		b, err := json.Marshal(t.InputSchema)
		if err != nil {
			return nil, fmt.Errorf("inputSchema: %w", err)
		}
		params = b
	}
	desc := strings.TrimSpace(t.Description)
	summary := tools.GuideSummary(desc)
	if summary == "" {
		title := t.Title
		if title == "" && t.Annotations != nil {
			title = t.Annotations.Title
		}
		if title == "" {
			title = t.Name
		}
		summary = fmt.Sprintf("%s (a tool of the MCP server %s).", title, s.cfg.Name)
	}
	guide := desc
	if guide == "" {
		guide = summary
	}
	readOnly := t.Annotations != nil && t.Annotations.ReadOnlyHint
	return tools.NewTool(tools.Spec{
		Manifest: tools.Manifest{
			Name:                 name,
			Category:             tools.CategoryAction,
			Modes:                []protocol.Mode{tools.ModeText},
			RequiresConfirmation: !readOnly,
			TimeoutMs:            DefaultTimeoutMs,
			Redact:               tools.Redact{Args: []string{}, Result: []string{}},
			Parameters:           params,
			Description:          summary,
			Guide:                guide,
		},
		Handler: &caller{server: s, tool: t.Name},
		Origin:  fmt.Sprintf("MCP server %s (tool %q)", s.cfg.Name, t.Name),
	})
}

// caller is the handler of one MCP tool: a tools/call on the server's
// current connection.
type caller struct {
	server *server
	tool   string // the server's name for it
}

// maxServerMessage bounds the part of an error message that comes from a
// server.
const maxServerMessage = 500

func (c *caller) Handle(ctx context.Context, call tools.Call) tools.Envelope {
	name := c.server.cfg.Name
	cs := c.server.session()
	if cs == nil {
		return tools.Fail(tools.ErrTransient, fmt.Sprintf("the MCP server %s is not available right now; try again later", name), true, false)
	}
	args := bytes.TrimSpace(call.Args)
	if len(args) == 0 || bytes.Equal(args, []byte("null")) {
		args = []byte("{}")
	}
	params := &sdk.CallToolParams{Name: c.tool, Arguments: json.RawMessage(args)}
	if tc := tracing.Carrier(ctx); tc != nil {
		params.Meta = tc // the call's execute_tool span, over any transport
	}
	if !c.server.cfg.NoIdentity {
		// Who the call is for, as HTTP tools get it in headers
		// (turnstile/user, turnstile/session, turnstile/call,
		// turnstile/idempotencyKey, turnstile/claims).
		if params.Meta == nil {
			params.Meta = map[string]any{}
		}
		maps.Copy(params.Meta, call.Identity().Meta())
	}
	res, err := cs.CallTool(ctx, params)
	if err != nil {
		return callError(ctx, name, err)
	}
	if res.IsError {
		return toolError(name, res)
	}
	return tools.OK(resultData(res))
}

// callError answers a tools/call that got no result.
func callError(ctx context.Context, server string, err error) tools.Envelope {
	var rpc *jsonrpc.Error
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return tools.Fail(tools.ErrTimeout, fmt.Sprintf("the MCP server %s did not answer in time", server), true, true)
	case ctx.Err() != nil:
		return tools.Fail(tools.ErrTransient, "the call was cancelled", true, true)
	case errors.Is(err, sdk.ErrConnectionClosed):
		return tools.Fail(tools.ErrTransient, fmt.Sprintf("the MCP server %s stopped while handling the call; it is being restarted, "+
			"so the call may be tried again shortly, but it may have had effects", server), true, true)
	case errors.As(err, &rpc) && transportCodes[rpc.Code]:
		// The SDK's own codes: the request did not get through (an HTTP
		// error status, a closing connection).
		return tools.Fail(tools.ErrTransient, fmt.Sprintf("the MCP server %s could not take the call", server), true, true)
	case errors.As(err, &rpc) && rpc.Code == jsonrpc.CodeInvalidParams:
		return tools.Fail(tools.ErrValidation, fmt.Sprintf("the MCP server %s refused the arguments: %s", server,
			tools.Clip(rpc.Message, maxServerMessage)), false, false)
	case errors.As(err, &rpc):
		// A protocol-level error from the server: unexpected, so whether the
		// tool did anything is unknown, unless the method itself is unknown.
		return tools.Fail(tools.ErrInternal, fmt.Sprintf("the MCP server %s answered with an error: %s", server,
			tools.Clip(rpc.Message, maxServerMessage)), false, rpc.Code != jsonrpc.CodeMethodNotFound)
	}
	return tools.Fail(tools.ErrTransient, fmt.Sprintf("the MCP server %s could not be reached", server), true, true)
}

// transportCodes are the JSON-RPC codes the SDK uses for requests that
// did not reach the server or got no answer from it (jsonrpc2's "unknown
// error", "client is closing", "server is closing", "rejected by
// transport").
var transportCodes = map[int64]bool{-32001: true, -32003: true, -32004: true, -32005: true}

// resultData is a successful result as the model sees it: the structured
// content when there is some; else a single text block, as JSON when it is
// JSON; else {"content": [...]} with text blocks as they are and images,
// audio and resources summarised (type, MIME type, size), never their
// bytes.
func resultData(res *sdk.CallToolResult) any {
	if res.StructuredContent != nil {
		return res.StructuredContent
	}
	if len(res.Content) == 0 {
		return nil
	}
	if len(res.Content) == 1 {
		if t, ok := res.Content[0].(*sdk.TextContent); ok {
			var v any
			dec := json.NewDecoder(strings.NewReader(t.Text))
			dec.UseNumber()
			if err := dec.Decode(&v); err == nil && !dec.More() {
				if _, isObj := v.(map[string]any); isObj {
					return v
				}
				if _, isArr := v.([]any); isArr {
					return v
				}
			}
			return t.Text
		}
	}
	items := make([]any, 0, len(res.Content))
	for _, c := range res.Content {
		items = append(items, summarise(c))
	}
	return map[string]any{"content": items}
}

// summarise describes one content block without its bytes.
func summarise(c sdk.Content) map[string]any {
	switch c := c.(type) {
	case *sdk.TextContent:
		return map[string]any{"type": "text", "text": c.Text}
	case *sdk.ImageContent:
		return map[string]any{"type": "image", "mimeType": c.MIMEType, "bytes": len(c.Data)}
	case *sdk.AudioContent:
		return map[string]any{"type": "audio", "mimeType": c.MIMEType, "bytes": len(c.Data)}
	case *sdk.ResourceLink:
		out := map[string]any{"type": "resource_link", "uri": c.URI, "name": c.Name}
		if c.MIMEType != "" {
			out["mimeType"] = c.MIMEType
		}
		if c.Size != nil {
			out["bytes"] = *c.Size
		}
		return out
	case *sdk.EmbeddedResource:
		out := map[string]any{"type": "resource"}
		if r := c.Resource; r != nil {
			out["uri"] = r.URI
			if r.MIMEType != "" {
				out["mimeType"] = r.MIMEType
			}
			out["bytes"] = len(r.Blob) + len(r.Text)
		}
		return out
	default:
		return map[string]any{"type": "unsupported"}
	}
}

// contentText joins the text blocks of a result.
func contentText(content []sdk.Content) string {
	var parts []string
	for _, c := range content {
		if t, ok := c.(*sdk.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	return strings.Join(parts, " ")
}
