// Package geminitext adapts Gemini's streaming text API
// (Models.GenerateContentStream of google.golang.org/genai) to the
// provider-neutral transport.TextModel.
package geminitext

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"slices"
	"strings"
	"time"

	"google.golang.org/genai"

	"github.com/turnstile-gw/turnstile/internal/stages"
	"github.com/turnstile-gw/turnstile/transport"
	"github.com/turnstile-gw/turnstile/transport/httphold"
)

// Model streams answers from one Gemini text model.
type Model struct {
	client *genai.Client
	name   string
	opts   Options
	encode bool // the request's contents are encoded here (encodeContents)
	holds  bool // the client's HTTP transport holds a body for its verdict (httphold.Transport)
}

// Options tune a Model.
type Options struct {
	// ToolChoice (transport.ToolChoiceAuto, the zero value, Required or
	// None) is sent as toolConfig.functionCallingConfig.mode (AUTO, ANY,
	// NONE) with every request that declares tools.
	ToolChoice string
}

// New returns a text model backed by client. name is the model id, e.g.
// "gemini-2.5-flash". It refuses a ToolChoice it does not know.
func New(client *genai.Client, name string, opts Options) (*Model, error) {
	if opts.ToolChoice == "" {
		opts.ToolChoice = transport.ToolChoiceAuto
	}
	if !transport.ValidToolChoice(opts.ToolChoice) {
		return nil, fmt.Errorf("geminitext: tool choice %q is not auto, required or none", opts.ToolChoice)
	}
	cc := client.ClientConfig()
	encode := cc.Backend == genai.BackendGeminiAPI
	return &Model{client: client, name: name, opts: opts, encode: encode, holds: httphold.Holds(cc.HTTPClient)}, nil
}

// functionCallingModes are Gemini's names of the tool choices.
var functionCallingModes = map[string]genai.FunctionCallingConfigMode{
	transport.ToolChoiceAuto:     genai.FunctionCallingConfigModeAuto,
	transport.ToolChoiceRequired: genai.FunctionCallingConfigModeAny,
	transport.ToolChoiceNone:     genai.FunctionCallingConfigModeNone,
}

// ToolConfig is the toolConfig of a request declaring tools: the tool
// choice as functionCallingConfig.mode. nil without tools (there is
// nothing to choose, and ANY without declarations is an error).
func ToolConfig(choice string, tools []*genai.Tool) *genai.ToolConfig {
	if len(tools) == 0 {
		return nil
	}
	return &genai.ToolConfig{FunctionCallingConfig: &genai.FunctionCallingConfig{Mode: functionCallingModes[choice]}}
}

// Name is the model id.
func (m *Model) Name() string { return m.name }

// Stream implements transport.TextModel. Errors are *transport.ModelError
// (with RetryAfter from a RetryInfo detail; a blocked prompt matches
// transport.ErrPromptBlocked), transport.ErrTruncated, or the context's
// error. Function calls carry their thoughtSignature as Signature. The last
// chunk carries the usage of the latest usageMetadata (Gemini's counts are
// cumulative). A request req.Admit refused is transport.ErrNotAdmitted,
// and its contents were not sent: with a client from HTTPClient its
// headers went out while the verdict was awaited and its body never did,
// else nothing went out.
func (m *Model) Stream(ctx context.Context, req transport.TextRequest) iter.Seq2[transport.Chunk, error] {
	return func(yield func(transport.Chunk, error) bool) {
		system, history := FoldReminders(req.System, req.History)
		cfg := &genai.GenerateContentConfig{SystemInstruction: SystemInstruction(system), Tools: Tools(req.Tools)}
		cfg.ToolConfig = ToolConfig(m.opts.ToolChoice, cfg.Tools)
		finished := false
		var usage *transport.Usage
		contents := m.encodeContents(cfg, Contents(history))
		stages.Mark(stages.Built)
		hold, sendCtx := httphold.New(req.Admit), ctx
		if m.holds {
			// The verdict is asked as the body is about to go out: the
			// SDK's preparation, the connection and the headers overlap
			// its round trip (httphold.Transport).
			sendCtx = httphold.With(ctx, hold)
		} else if !hold.Admitted() {
			yield(transport.Chunk{}, transport.ErrNotAdmitted)
			return
		}
		for resp, err := range m.client.Models.GenerateContentStream(sendCtx, m.name, contents, cfg) {
			if finished {
				// Past the finish, the stream is read to its end and
				// nothing more is told: net/http keeps a connection for
				// the next request only once its response's body has been
				// read to EOF, and stopping at the finish chunk left the
				// body's last bytes unread whenever they had not arrived
				// with it, so the next turn dialled (and to Google,
				// shook hands) anew.
				if err != nil {
					return
				}
				continue
			}
			stages.Mark(stages.FirstChunk)
			if err != nil && !hold.Admitted() {
				// Refused as its body was about to go out, or cancelled
				// for its refusal before the transport asked.
				yield(transport.Chunk{}, transport.ErrNotAdmitted)
				return
			}
			if err != nil {
				yield(transport.Chunk{}, classify(ctx, err))
				return
			}
			chunk, err := fromResponse(resp)
			if err != nil {
				yield(transport.Chunk{}, err)
				return
			}
			if u := resp.UsageMetadata; u != nil {
				usage = &transport.Usage{InputTokens: int(u.PromptTokenCount),
					OutputTokens: int(u.CandidatesTokenCount) + int(u.ThoughtsTokenCount)}
			}
			if chunk.FinishReason != "" {
				finished = true
				chunk.Usage = usage
			}
			if !yield(chunk, nil) {
				return
			}
		}
		if finished {
			return
		}
		if ctx.Err() != nil {
			yield(transport.Chunk{}, ctx.Err())
			return
		}
		yield(transport.Chunk{}, transport.ErrTruncated)
	}
}

// encodeContents puts contents into the request's body encoded at once
// (json.Marshal of the genai types, whose JSON is the Gemini API's) and
// returns what remains for the SDK to convert: nothing. The SDK's own
// conversion marshals the contents, unmarshals them into maps, copies
// those field by field into new maps and encodes these again — for a long
// history most of a request's CPU before its first byte is sent
// (docs/benchmarks.md, the text path). The body is handed over through
// the SDK's documented hook for a request's body (HTTPOptions'
// ExtrasRequestProvider); the request, its headers and the streamed
// answer stay the SDK's. Over Vertex AI, whose conversion differs, and
// should the contents not encode, the SDK converts them as before.
// TestEncodedContentsAreTheBodyTheSDKWouldSend holds the two equal.
func (m *Model) encodeContents(cfg *genai.GenerateContentConfig, contents []*genai.Content) []*genai.Content {
	if !m.encode || len(contents) == 0 {
		return contents
	}
	raw, err := json.Marshal(contents)
	if err != nil {
		return contents
	}
	cfg.HTTPOptions = &genai.HTTPOptions{ExtrasRequestProvider: func(body map[string]any) map[string]any {
		body["contents"] = json.RawMessage(raw)
		return body
	}}
	return nil
}

// HTTPClient is the client for Gemini text requests: HTTP/1.1 connections
// to a Gemini-compatible endpoint are kept for as many turns as run at
// once (the standard transport keeps 2 idle per host, so a node with more
// concurrent turns would open a connection for most of them), and no
// compressed answers are asked for (a stream of small chunks gains little
// from gzip and pays for inflating each one); a request's body waits for
// its turn's verdict while its headers go out (httphold.Transport).
func HTTPClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = maxIdleConnsPerHost
	t.DisableCompression = true
	return &http.Client{Transport: httphold.Transport(t)}
}

// maxIdleConnsPerHost is the idle connections kept to the model endpoint:
// about the text turns a node runs at once.
const maxIdleConnsPerHost = 256

// FoldReminders moves the gateway's system-role entries
// (transport.RoleSystem) out of history into system's turn note: Gemini has
// no system role inside contents, and a reminder sent as a user message
// would put words in the user's mouth. The plain model answer a reminder
// corrects (a text-only model entry right before it) goes too, so the
// contents still end on the user's side, as Gemini expects of a request;
// the note says what to do instead. history is not modified.
func FoldReminders(system string, history []transport.Entry) (string, []transport.Entry) {
	i := slices.IndexFunc(history, func(e transport.Entry) bool { return e.Role == transport.RoleSystem })
	if i < 0 {
		return system, history
	}
	kept := make([]transport.Entry, 0, len(history))
	kept = append(kept, history[:i]...)
	seen := map[string]bool{}
	for _, e := range history[i:] {
		if e.Role != transport.RoleSystem {
			kept = append(kept, e)
			continue
		}
		if n := len(kept); n > 0 && kept[n-1].Role == transport.RoleModel && len(kept[n-1].Calls) == 0 {
			kept = kept[:n-1]
		}
		if !seen[e.Text] { // the same reminder again says nothing new
			seen[e.Text] = true
			system = transport.TurnNote(system, e.Text)
		}
	}
	return system, kept
}

// SystemInstruction is the genai form of a system instruction; nil for "".
func SystemInstruction(text string) *genai.Content {
	if text == "" {
		return nil
	}
	return &genai.Content{Parts: []*genai.Part{{Text: text}}}
}

// Tools declares tools to Gemini with their JSON Schema
// (parametersJsonSchema); nil when there are none. Behavior stays unset:
// every tool is blocking, so the model waits for results the orchestrator
// may gate or confirm.
func Tools(ts []transport.ToolDecl) []*genai.Tool {
	if len(ts) == 0 {
		return nil
	}
	decls := make([]*genai.FunctionDeclaration, 0, len(ts))
	for _, t := range ts {
		decls = append(decls, &genai.FunctionDeclaration{
			Name: t.Name, Description: t.Description, ParametersJsonSchema: t.Parameters,
		})
	}
	return []*genai.Tool{{FunctionDeclarations: decls}}
}

func fromResponse(resp *genai.GenerateContentResponse) (transport.Chunk, error) {
	var c transport.Chunk
	if len(resp.Candidates) == 0 {
		if pf := resp.PromptFeedback; pf != nil && pf.BlockReason != "" {
			msg := "the model refused the prompt (" + string(pf.BlockReason) + ")"
			if pf.BlockReasonMessage != "" {
				msg += ": " + pf.BlockReasonMessage
			}
			return c, &transport.ModelError{Status: 400, Code: transport.CodePromptBlocked, Message: msg,
				Reason: string(pf.BlockReason)}
		}
		return c, nil
	}
	cand := resp.Candidates[0]
	if cand.Content != nil {
		for _, p := range cand.Content.Parts {
			switch {
			case p.FunctionCall != nil:
				c.Calls = append(c.Calls, transport.FunctionCall{
					ID: p.FunctionCall.ID, Name: p.FunctionCall.Name, Args: p.FunctionCall.Args,
					Signature: p.ThoughtSignature,
				})
			case p.Text != "" && !p.Thought:
				c.Text += p.Text
			}
		}
	}
	c.FinishReason = string(cand.FinishReason)
	return c, nil
}

func classify(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var api genai.APIError
	if errors.As(err, &api) {
		me := &transport.ModelError{Status: api.Code, Code: api.Status, Message: api.Message,
			Retryable: transport.RetryableStatus(api.Code)}
		readDetails(me, api.Details)
		return me
	}
	return &transport.ModelError{Code: "UNAVAILABLE", Message: err.Error(), Retryable: true}
}

// readDetails takes what a caller can act on from the google.rpc details of
// an error body: the retry delay of a RetryInfo and the reason of an
// ErrorInfo.
func readDetails(me *transport.ModelError, details []map[string]any) {
	for _, d := range details {
		switch d["@type"] {
		case "type.googleapis.com/google.rpc.RetryInfo":
			if s, ok := d["retryDelay"].(string); ok {
				if delay, err := parseProtoDuration(s); err == nil && delay > 0 {
					me.RetryAfter = delay
				}
			}
		case "type.googleapis.com/google.rpc.ErrorInfo":
			if r, ok := d["reason"].(string); ok && me.Reason == "" {
				me.Reason = r
			}
		}
	}
}

// parseProtoDuration reads a google.protobuf.Duration in proto3 JSON:
// decimal seconds with an "s" suffix ("29s", "2.463586755s").
func parseProtoDuration(s string) (time.Duration, error) {
	if !strings.HasSuffix(s, "s") || strings.ContainsAny(s, "hm") {
		return 0, fmt.Errorf("duration %q is not in seconds", s)
	}
	return time.ParseDuration(s)
}

// Contents converts neutral history to Gemini contents: function calls go
// back with the thoughtSignature they came with (thinking models refuse a
// history without it), tool results travel
// as user-role functionResponse parts, and consecutive entries of the same
// role merge into one content (a failed turn leaves two user entries in a
// row, which the API would otherwise refuse).
func Contents(history []transport.Entry) []*genai.Content {
	// A long history is converted for every request: its parts, calls and
	// responses come from one slab each, and each content's parts are one
	// run of a shared slice (merging extends the run), rather than an
	// allocation per part.
	if len(history) == 0 {
		return nil
	}
	var nParts, nCalls, nResults int
	for _, e := range history {
		nParts += 1 + len(e.Calls) + len(e.Results)
		nCalls += len(e.Calls)
		nResults += len(e.Results)
	}
	parts := make([]genai.Part, 0, nParts)
	refs := make([]*genai.Part, 0, nParts)
	calls := make([]genai.FunctionCall, 0, nCalls)
	responses := make([]genai.FunctionResponse, 0, nResults)
	contents := make([]genai.Content, 0, len(history))
	out := make([]*genai.Content, 0, len(history))
	var synthetic map[string]bool
	start := 0 // where the last content's parts begin in refs
	add := func(role string, p genai.Part) {
		parts = append(parts, p)
		refs = append(refs, &parts[len(parts)-1])
		if n := len(out); n > 0 && out[n-1].Role == role {
			out[n-1].Parts = refs[start:len(refs):len(refs)]
			return
		}
		start = len(refs) - 1
		contents = append(contents, genai.Content{Role: role, Parts: refs[start:len(refs):len(refs)]})
		out = append(out, &contents[len(contents)-1])
	}
	for _, e := range history {
		switch e.Role {
		case transport.RoleUser:
			add(genai.RoleUser, genai.Part{Text: e.Text})
		case transport.RoleModel:
			if e.Text != "" {
				add(genai.RoleModel, genai.Part{Text: e.Text})
			}
			for _, c := range e.Calls {
				id := c.ID
				if c.Synthetic {
					if synthetic == nil {
						synthetic = map[string]bool{}
					}
					synthetic[c.ID] = true
					id = ""
				}
				calls = append(calls, genai.FunctionCall{ID: id, Name: c.Name, Args: c.Args})
				add(genai.RoleModel, genai.Part{FunctionCall: &calls[len(calls)-1], ThoughtSignature: c.Signature})
			}
		case transport.RoleTool:
			for _, r := range e.Results {
				id := r.ID
				if synthetic[r.ID] {
					id = ""
				}
				responses = append(responses, genai.FunctionResponse{ID: id, Name: r.Name, Response: r.Response})
				add(genai.RoleUser, genai.Part{FunctionResponse: &responses[len(responses)-1]})
			}
		}
	}
	return out
}
