// Package openaitext adapts any OpenAI-compatible Chat Completions endpoint
// (OpenAI, Azure OpenAI, vLLM, Ollama, LiteLLM, OpenRouter, ...), streamed
// through the official openai-go client, to the provider-neutral
// transport.TextModel. It assembles streamed tool-call fragments into calls,
// announces each call as soon as its name is known, and reports usage.
package openaitext

import (
	"context"
	"fmt"
	"iter"
	"net/http"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/shared"

	"github.com/turnstile-gw/turnstile/transport"
	"github.com/turnstile-gw/turnstile/transport/httphold"
)

// DefaultBaseURL is OpenAI's own endpoint.
const DefaultBaseURL = transport.OpenAIDefaultBaseURL

// Tool choices a Model may send (transport's); the zero value means
// ToolChoiceAuto.
const (
	ToolChoiceAuto     = transport.ToolChoiceAuto
	ToolChoiceRequired = transport.ToolChoiceRequired
	ToolChoiceNone     = transport.ToolChoiceNone
)

// ClientConfig says where a client sends its requests.
type ClientConfig struct {
	// BaseURL is the endpoint including its version path, e.g.
	// "http://localhost:11434/v1"; "" means DefaultBaseURL.
	BaseURL string
	// APIKey is sent as a bearer token; "" sends none (local servers).
	APIKey string
	// HTTPClient is the client to use; nil means the SDK's default.
	HTTPClient *http.Client
}

// NewClient returns an openai-go client for cfg. Its base URL and key come
// from cfg only (never from OPENAI_* variables, which the gateway reads
// itself), and it does not retry: a failed request is reported at once,
// with whether it is worth retrying, and the caller decides.
func NewClient(cfg ClientConfig) openai.Client {
	base := cfg.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	opts := []option.RequestOption{option.WithBaseURL(base), option.WithAPIKey(cfg.APIKey), option.WithMaxRetries(0)}
	if cfg.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(cfg.HTTPClient))
	}
	return openai.NewClient(opts...)
}

// Options tune a Model.
type Options struct {
	// ToolChoice is sent as tool_choice when tools are declared: "auto"
	// (the zero value), "required" or "none".
	ToolChoice string
}

// Model streams answers from one chat model.
type Model struct {
	client openai.Client
	name   string
	opts   Options
}

// New returns a text model backed by client. name is the model id, e.g.
// "gpt-4o-mini" or "llama3.1". It refuses a ToolChoice it does not know.
func New(client openai.Client, name string, opts Options) (*Model, error) {
	if opts.ToolChoice == "" {
		opts.ToolChoice = ToolChoiceAuto
	}
	if !transport.ValidToolChoice(opts.ToolChoice) {
		return nil, fmt.Errorf("openaitext: tool choice %q is not auto, required or none", opts.ToolChoice)
	}
	return &Model{client: client, name: name, opts: opts}, nil
}

// Name is the model id.
func (m *Model) Name() string { return m.name }

// Stream implements transport.TextModel. Text deltas are yielded as they
// arrive; each tool call is announced in Chunk.Started as soon as its name
// is known; the final chunk, sent once the stream has ended, carries the
// assembled calls, the finish reason and the usage. A call whose arguments
// are not a JSON object is delivered with ArgsError set.
//
// A refusal (delta.refusal) is streamed as text: it is the model's answer
// to the user. finish_reason "stop" and "tool_calls" (and any reason this
// adapter does not know) end the answer; "length" is transport.ErrTruncated (wrapped),
// "content_filter" is transport.ErrRefused (wrapped), and a stream that
// ends without a finish reason is transport.ErrTruncated. Other errors are
// *transport.ModelError or the context's error; a request req.Admit
// refused is transport.ErrNotAdmitted, and its contents were not sent (its
// headers went out while the verdict was awaited, its body never did).
func (m *Model) Stream(ctx context.Context, req transport.TextRequest) iter.Seq2[transport.Chunk, error] {
	return func(yield func(transport.Chunk, error) bool) {
		params := m.params(req)
		// The verdict is asked as the body is about to go out: the SDK's
		// preparation, the connection and the headers overlap its round
		// trip, and a refused request's body is never sent
		// (httphold.Hold).
		hold := httphold.New(req.Admit)
		var resp *http.Response
		stream := m.client.Chat.Completions.NewStreaming(ctx, params, option.WithResponseInto(&resp),
			option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
				r, err := hold.Request(r)
				if err != nil {
					return nil, err
				}
				return next(r)
			}))
		defer func() { _ = stream.Close() }()

		var calls assembler
		var finish string
		var usage *transport.Usage
		for stream.Next() {
			c := stream.Current()
			if c.JSON.Usage.Valid() {
				usage = &transport.Usage{InputTokens: int(c.Usage.PromptTokens), OutputTokens: int(c.Usage.CompletionTokens)}
			}
			for _, ch := range c.Choices {
				if ch.Index != 0 { // only one choice is asked for
					continue
				}
				out := transport.Chunk{Text: ch.Delta.Content + ch.Delta.Refusal}
				for _, d := range ch.Delta.ToolCalls {
					out.Started = append(out.Started, calls.add(d.Index, d.ID, d.Function.Name, d.Function.Arguments)...)
				}
				if ch.FinishReason != "" {
					finish = ch.FinishReason
				}
				if out.Text != "" || len(out.Started) > 0 {
					if !yield(out, nil) {
						return
					}
				}
			}
		}
		if err := stream.Err(); err != nil {
			if !hold.Admitted() { // refused before its body went out (or, cancelled, before it was asked)
				err = transport.ErrNotAdmitted
			} else {
				err = classify(ctx, err, resp)
			}
			yield(transport.Chunk{}, err)
			return
		}
		if ctx.Err() != nil {
			yield(transport.Chunk{}, ctx.Err())
			return
		}
		if err := finishError(finish); err != nil {
			yield(transport.Chunk{}, err)
			return
		}
		started, done, err := calls.finish()
		if err != nil {
			yield(transport.Chunk{}, err)
			return
		}
		yield(transport.Chunk{Started: started, Calls: done, FinishReason: finish, Usage: usage}, nil)
	}
}

// finishError says what a finish reason means for the answer.
func finishError(reason string) error {
	switch reason {
	case "":
		return transport.ErrTruncated
	case "length":
		return fmt.Errorf("%w: the model reached its output token limit (finish_reason length)", transport.ErrTruncated)
	case "content_filter":
		return fmt.Errorf("%w: the provider's content filter stopped the answer (finish_reason content_filter)", transport.ErrRefused)
	}
	return nil
}

// params builds the request: the conversation, the tools with the setting's
// tool_choice, and usage in the stream's last chunk.
func (m *Model) params(req transport.TextRequest) openai.ChatCompletionNewParams {
	p := openai.ChatCompletionNewParams{
		Model:         shared.ChatModel(m.name),
		Messages:      Messages(req.System, req.History),
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: param.NewOpt(true)},
	}
	if len(req.Tools) > 0 {
		p.Tools = Tools(req.Tools)
		p.ToolChoice = openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: param.NewOpt(m.opts.ToolChoice)}
	}
	return p
}

// Tools declares tools as Chat Completions function tools, the way the
// tool registry renders them (tools.Tool.OpenAIFunction): the JSON Schema as
// parameters, strict off (strict mode demands every property be required;
// the gateway validates arguments against the full schema anyway).
func Tools(ts []transport.ToolDecl) []openai.ChatCompletionToolUnionParam {
	out := make([]openai.ChatCompletionToolUnionParam, 0, len(ts))
	for _, t := range ts {
		out = append(out, openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name:        t.Name,
			Description: param.NewOpt(t.Description),
			Parameters:  shared.FunctionParameters(t.Parameters),
			Strict:      param.NewOpt(false),
		}))
	}
	return out
}

// errMalformed is a stream that broke the Chat Completions format.
func errMalformed(msg string) error {
	return &transport.ModelError{Status: http.StatusBadGateway, Code: "malformed_stream", Message: msg,
		Retryable: transport.RetryableStatus(http.StatusBadGateway)}
}

var _ transport.TextModel = (*Model)(nil)
