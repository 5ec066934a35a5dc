package fakeopenai

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/turnstile-gw/turnstile/fake/fakeserve"
)

// maxBodyBytes caps a request body.
const maxBodyBytes = 32 << 20

// handleChat serves POST /v1/chat/completions.
func (s *Server) handleChat(w http.ResponseWriter, r *http.Request) {
	if e, ok := s.authError(r); !ok {
		writeError(w, http.StatusUnauthorized, e)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		writeError(w, http.StatusBadRequest, APIError{Type: "invalid_request_error",
			Message: fmt.Sprintf("Could not read the request body: %v", err)})
		return
	}
	var wr wireRequest
	if err := json.Unmarshal(body, &wr); err != nil {
		writeError(w, http.StatusBadRequest, APIError{Type: "invalid_request_error",
			Message: "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your " +
				"HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON.)"})
		return
	}
	if bad := wr.validate(); bad != nil {
		s.log.Info("fake openai: invalid request", "param", bad.param, "err", bad.msg)
		writeError(w, http.StatusBadRequest, APIError{Type: "invalid_request_error", Param: bad.param, Code: bad.code, Message: bad.msg})
		return
	}
	req := &Request{Model: wr.Model, Stream: wr.Stream, Messages: wr.Messages, Tools: wr.Tools,
		ToolChoice: wr.ToolChoice, IncludeUsage: wr.StreamOptions != nil && wr.StreamOptions.IncludeUsage,
		Header: r.Header.Clone(), Body: body}
	log := s.log.With("model", wr.Model, "stream", wr.Stream)

	ctx := r.Context()
	reply := s.brain.Respond(ctx, req)
	for k, vs := range reply.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	if reply.Status >= 400 {
		log.Info("fake openai: error reply", "status", reply.Status)
		writeReplyError(w, reply)
		return
	}
	b := newChunkBuilder(req)
	if wr.Stream {
		err = s.stream(ctx, w, b, reply)
	} else {
		err = s.unary(ctx, w, b, reply)
	}
	switch {
	case err == nil:
		log.Debug("fake openai: reply sent", "chunks", len(reply.Chunks))
	case ctx.Err() != nil:
		log.Debug("fake openai: reply abandoned", "reason", context.Cause(ctx))
	default:
		log.Warn("fake openai: reply failed", "err", err)
	}
}

// authError checks the bearer key when the server has one; the messages
// are the real API's, with the offered key masked as it masks it.
func (s *Server) authError(r *http.Request) (APIError, bool) {
	if s.opts.APIKey == "" {
		return APIError{}, true
	}
	key, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	switch {
	case !ok || key == "":
		return APIError{Type: "invalid_request_error", Message: "You didn't provide an API key. You need to provide your " +
			"API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY)."}, false
	case key != s.opts.APIKey:
		return APIError{Type: "invalid_request_error", Code: "invalid_api_key",
			Message: "Incorrect API key provided: " + maskKey(key) + "."}, false
	}
	return APIError{}, true
}

func maskKey(k string) string {
	if len(k) <= 8 {
		return strings.Repeat("*", len(k))
	}
	return k[:3] + strings.Repeat("*", len(k)-7) + k[len(k)-4:]
}

func writeReplyError(w http.ResponseWriter, reply Reply) {
	if reply.RawError != nil {
		ct := "text/plain; charset=utf-8"
		if json.Valid(reply.RawError) {
			ct = "application/json"
		}
		w.Header().Set("Content-Type", ct)
		w.WriteHeader(reply.Status)
		_, _ = w.Write(reply.RawError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(reply.Status)
	_, _ = w.Write(errorBody(reply.Status, reply.Error))
}

// stream writes reply as server-sent events: one compact "data: {...}" line
// and a blank line per chunk, flushed each time, then the usage chunk and
// "data: [DONE]".
func (s *Server) stream(ctx context.Context, w http.ResponseWriter, b *chunkBuilder, reply Reply) error {
	sse, err := fakeserve.OpenSSE(w, "text/event-stream; charset=utf-8")
	if err != nil {
		return fmt.Errorf("stream: %w", err)
	}
	if err := fakeserve.SendChunks(ctx, sse, reply.Chunks, Chunk.pace, b.build); err != nil {
		return fmt.Errorf("stream: %w", err)
	}
	if reply.MidStreamError != nil {
		if err := sse.Data(errorBody(http.StatusInternalServerError, reply.MidStreamError)); err != nil {
			return fmt.Errorf("stream: error event: %w", err)
		}
		return nil
	}
	if reply.Hang {
		<-ctx.Done()
		return fmt.Errorf("stream: hang: %w", ctx.Err())
	}
	if reply.Cut {
		return nil
	}
	if b.includeUsage {
		data, err := b.usage(reply.Usage)
		if err != nil {
			return fmt.Errorf("stream: usage: %w", err)
		}
		if err := sse.Data(data); err != nil {
			return fmt.Errorf("stream: usage: %w", err)
		}
	}
	if err := sse.Data([]byte("[DONE]")); err != nil {
		return fmt.Errorf("stream: done: %w", err)
	}
	return nil
}

// pace is when c may be sent in a stream.
func (c Chunk) pace() fakeserve.Pace { return fakeserve.Pace{Delay: c.Delay, Gate: c.Wait} }

// unary answers a request without "stream": the whole reply merged into
// one chat.completion object.
func (s *Server) unary(ctx context.Context, w http.ResponseWriter, b *chunkBuilder, reply Reply) error {
	if err := fakeserve.Wait(ctx, fakeserve.TotalDelay(reply.Chunks, Chunk.pace)); err != nil {
		return fmt.Errorf("unary: %w", err)
	}
	if reply.MidStreamError != nil {
		writeReplyError(w, Reply{Status: http.StatusInternalServerError, Error: reply.MidStreamError})
		return nil
	}
	if reply.Hang {
		<-ctx.Done()
		return fmt.Errorf("unary: hang: %w", ctx.Err())
	}
	data, err := json.Marshal(b.completion(reply))
	if err != nil {
		return fmt.Errorf("unary: encode: %w", err)
	}
	if reply.Cut {
		data = data[:len(data)/2]
	}
	w.Header().Set("Content-Type", "application/json")
	if _, err := w.Write(data); err != nil {
		return fmt.Errorf("unary: write: %w", err)
	}
	return nil
}

type wireCompletion struct {
	ID                string           `json:"id"`
	Object            string           `json:"object"`
	Created           int64            `json:"created"`
	Model             string           `json:"model"`
	SystemFingerprint string           `json:"system_fingerprint"`
	Choices           []map[string]any `json:"choices"`
	Usage             *wireUsage       `json:"usage"`
}

// completion merges a reply's chunks: texts joined, calls assembled by
// index, the last finish reason.
func (b *chunkBuilder) completion(reply Reply) wireCompletion {
	var text strings.Builder
	var finish *string
	type call struct{ id, name, args string }
	calls := map[int]*call{}
	for _, c := range reply.Chunks {
		text.WriteString(c.Text)
		b.outputChars += len(c.Text)
		for _, d := range c.Calls {
			cl := calls[d.Index]
			if cl == nil {
				cl = &call{}
				calls[d.Index] = cl
			}
			cl.id = cmp.Or(cl.id, d.ID)
			cl.name = cmp.Or(cl.name, d.Name)
			cl.args += d.Args
			b.outputChars += len(d.Name) + len(d.Args)
		}
		if c.FinishReason != "" {
			finish = &c.FinishReason
		}
	}
	msg := map[string]any{"role": "assistant", "content": text.String(), "refusal": nil}
	if len(calls) > 0 {
		if text.Len() == 0 {
			msg["content"] = nil
		}
		idx := make([]int, 0, len(calls))
		for i := range calls {
			idx = append(idx, i)
		}
		slices.Sort(idx)
		var tcs []map[string]any
		for _, i := range idx {
			tcs = append(tcs, map[string]any{"id": calls[i].id, "type": "function",
				"function": map[string]any{"name": calls[i].name, "arguments": calls[i].args}})
		}
		msg["tool_calls"] = tcs
	}
	return wireCompletion{ID: b.id, Object: "chat.completion", Created: b.created, Model: b.model,
		SystemFingerprint: fingerprint, Usage: b.counts(reply.Usage),
		Choices: []map[string]any{{"index": 0, "message": msg, "logprobs": nil, "finish_reason": finish}}}
}
