// Package mcptest is a real MCP tool server for tests, written with the
// official Go SDK: the same server runs over stdio (as a child process: a
// test binary started again, see ServeStdioIfAsked) or over Streamable HTTP
// on loopback (NewHTTP). Its tools cover what the gateway must handle:
//
//   - echo{text} (read-only): text content, the text back
//   - search.notes{query} (read-only): structured content
//   - create_note{title, body?} (no annotations, so destructive): creates a
//     note and answers {"id": "n-<k>"} as JSON text; every note created is
//     counted (Created) and, over stdio, appended to the file NOTES_LOG
//   - fail{} (read-only): an isError result "quota exceeded for project 7";
//     fail{message, error} answers the message and, when error is given,
//     structuredContent {"error": error}
//   - media{} (read-only): a text, an image, an audio clip, a resource link
//     and an embedded resource
//   - crash{} (read-only): writes to stderr and exits the process mid-call
//     (stdio only)
//   - hang{} (read-only): never answers (it ignores cancellation)
//   - grow{} (read-only): adds the tool added_later{}, which makes the
//     server announce notifications/tools/list_changed
//   - getenv{name} (read-only): the server's environment variable name
package mcptest

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// ServeEnv is the environment variable that makes a test binary serve MCP
// on stdio instead of running its tests (see ServeStdioIfAsked).
const ServeEnv = "TURNSTILE_MCPTEST_SERVE"

// NotesLogEnv names the file a stdio server appends created notes to.
const NotesLogEnv = "NOTES_LOG"

// State is one server's state.
type State struct {
	Created atomic.Int64
	// EchoTraceparent is the _meta traceparent of the last echo call.
	EchoTraceparent atomic.Value // string
	metaMu          sync.Mutex
	metas           []map[string]any // _meta of every echo and create_note call, in order
	server          *sdk.Server
	release         chan struct{} // closed by Close: hanging calls end
	once            sync.Once
	notes           string // NOTES_LOG, for stdio servers
}

// ServeStdioIfAsked serves MCP on stdin/stdout and exits when the
// environment asks for it (ServeEnv=stdio); otherwise it returns at once.
// Call it first thing in TestMain, so that the test binary can be the
// stdio server the tests configure: {"command": os.Args[0], "env":
// {ServeEnv: "stdio"}}.
func ServeStdioIfAsked() {
	if os.Getenv(ServeEnv) != "stdio" {
		return
	}
	st := newState()
	st.notes = os.Getenv(NotesLogEnv)
	err := st.server.Run(context.Background(), &sdk.StdioTransport{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "mcptest:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// StdioConfig is the mcpServers entry of a stdio test server that logs
// created notes to notesLog ("" for none).
func StdioConfig(notesLog string) map[string]any {
	return map[string]any{
		"command": os.Args[0],
		"args":    []string{"-test.run=^$"},
		"env":     map[string]string{ServeEnv: "stdio", NotesLogEnv: notesLog},
	}
}

// HTTP is a test server on Streamable HTTP.
type HTTP struct {
	*State
	URL string
	// Traceparent is the traceparent header of the last request that had one.
	Traceparent atomic.Value // string
	srv         *httptest.Server
	down        atomic.Bool
}

// NewHTTP starts a test server on loopback; its endpoint is URL.
func NewHTTP() *HTTP {
	st := newState()
	h := &HTTP{State: st}
	handler := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return st.server }, nil)
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h.down.Load() {
			http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
			return
		}
		if tp := r.Header.Get("Traceparent"); tp != "" {
			h.Traceparent.Store(tp)
		}
		handler.ServeHTTP(w, r)
	}))
	h.URL = h.srv.URL
	return h
}

// SetDown makes the server answer 503 to everything (down) or serve again.
func (h *HTTP) SetDown(down bool) { h.down.Store(down) }

// CloseClientConnections drops every open connection to the server.
func (h *HTTP) CloseClientConnections() { h.srv.CloseClientConnections() }

// Close stops the server and ends hanging calls.
func (h *HTTP) Close() {
	h.State.Close()
	h.srv.CloseClientConnections()
	h.srv.Close()
	CloseSessions(h.server)
}

// CloseSessions ends the sessions a server still holds: a client that went
// away without saying so leaves one behind (and its goroutines).
func CloseSessions(s *sdk.Server) {
	var open []*sdk.ServerSession
	for ss := range s.Sessions() {
		open = append(open, ss)
	}
	for _, ss := range open {
		_ = ss.Close()
	}
}

// Close ends hanging calls.
func (st *State) Close() {
	st.once.Do(func() { close(st.release) })
}

// Grow adds added_later, as the grow tool does.
func (st *State) Grow() {
	st.server.AddTool(&sdk.Tool{Name: "added_later", Description: "A tool that appeared later.",
		InputSchema: json.RawMessage(`{"type":"object"}`), Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) { return text("later"), nil })
}

// Metas returns the _meta of every echo and create_note call so far, in
// order (over HTTP: stdio servers are other processes).
func (st *State) Metas() []map[string]any {
	st.metaMu.Lock()
	defer st.metaMu.Unlock()
	return append([]map[string]any(nil), st.metas...)
}

func (st *State) noteMeta(m map[string]any) {
	st.metaMu.Lock()
	defer st.metaMu.Unlock()
	st.metas = append(st.metas, maps.Clone(m))
}

func text(s string) *sdk.CallToolResult {
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: s}}}
}

var readOnly = &sdk.ToolAnnotations{ReadOnlyHint: true}

func newState() *State {
	st := &State{release: make(chan struct{})}
	s := sdk.NewServer(&sdk.Implementation{Name: "mcptest", Version: "v1"}, nil)
	st.server = s
	s.AddTool(&sdk.Tool{Name: "echo", Description: "Echo the text back.\n\nA second paragraph for the guide.", Annotations: readOnly,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"],"additionalProperties":false}`)},
		func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			var in struct{ Text string }
			_ = json.Unmarshal(req.Params.Arguments, &in)
			if tp, ok := req.Params.GetMeta()["traceparent"].(string); ok {
				st.EchoTraceparent.Store(tp)
			}
			st.noteMeta(req.Params.GetMeta())
			return text(in.Text), nil
		})
	s.AddTool(&sdk.Tool{Name: "search.notes", Description: "Search the notes.", Annotations: readOnly,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string"}}}`)},
		func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{StructuredContent: map[string]any{"matches": []any{"n-1"}, "total": 1},
				Content: []sdk.Content{&sdk.TextContent{Text: `{"matches":["n-1"],"total":1}`}}}, nil
		})
	s.AddTool(&sdk.Tool{Name: "create_note", Description: "Create a note.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"title":{"type":"string","minLength":1,"maxLength":200},` +
			`"body":{"type":"string"}},"required":["title"],"additionalProperties":false}`)},
		func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			var in struct{ Title string }
			_ = json.Unmarshal(req.Params.Arguments, &in)
			st.noteMeta(req.Params.GetMeta())
			n := st.Created.Add(1)
			if st.notes != "" {
				f, err := os.OpenFile(st.notes, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
				if err == nil {
					_, _ = fmt.Fprintln(f, in.Title)
					_ = f.Close()
				}
			}
			return text(fmt.Sprintf(`{"id": "n-%d", "title": %q}`, n, in.Title)), nil
		})
	s.AddTool(&sdk.Tool{Name: "fail", Description: "Always fails.", Annotations: readOnly,
		InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return failResult(req.Params.Arguments), nil
		})
	s.AddTool(&sdk.Tool{Name: "media", Description: "Returns media.", Annotations: readOnly,
		InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			size := int64(2048)
			return &sdk.CallToolResult{Content: []sdk.Content{
				&sdk.TextContent{Text: "a chart"},
				&sdk.ImageContent{MIMEType: "image/png", Data: []byte(strings.Repeat("\x89PNG", 250))},
				&sdk.AudioContent{MIMEType: "audio/wav", Data: make([]byte, 300)},
				&sdk.ResourceLink{URI: "file:///reports/q3.pdf", Name: "q3.pdf", MIMEType: "application/pdf", Size: &size},
				&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "file:///raw.bin", MIMEType: "application/octet-stream", Blob: make([]byte, 64)}},
			}}, nil
		})
	s.AddTool(&sdk.Tool{Name: "crash", Description: "Exits the server mid-call.", Annotations: readOnly,
		InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			fmt.Fprintln(os.Stderr, "mcptest: crashing on purpose")
			os.Exit(3)
			return nil, nil
		})
	s.AddTool(&sdk.Tool{Name: "hang", Description: "Never answers.", Annotations: readOnly,
		InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			<-st.release // ignores cancellation on purpose
			return text("too late"), nil
		})
	s.AddTool(&sdk.Tool{Name: "getenv", Description: "Reads the server's environment.", Annotations: readOnly,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`)},
		func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			var in struct{ Name string }
			_ = json.Unmarshal(req.Params.Arguments, &in)
			return text(os.Getenv(in.Name)), nil
		})
	s.AddTool(&sdk.Tool{Name: "grow", Description: "Adds a tool.", Annotations: readOnly,
		InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			st.Grow()
			return text("grown"), nil
		})
	return st
}

// failResult is the fail tool's isError result.
func failResult(args json.RawMessage) *sdk.CallToolResult {
	in := struct {
		Message string         `json:"message"`
		Error   map[string]any `json:"error"`
	}{Message: "quota exceeded for project 7"}
	_ = json.Unmarshal(args, &in)
	res := &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: in.Message}}}
	if in.Error != nil {
		res.StructuredContent = map[string]any{"error": in.Error}
	}
	return res
}
