package fakegemini

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/turnstile-gw/turnstile/fake/fakeserve"
	"github.com/turnstile-gw/turnstile/internal/stages"
)

// maxBodyBytes caps a request body; the real API refuses large inline
// payloads too.
const maxBodyBytes = 32 << 20

// handleModels serves the Gemini API's POST /{version}/models/{model}:{method}.
func (s *Server) handleModels(w http.ResponseWriter, r *http.Request) {
	stages.Mark(stages.FakeGot)
	model, method, _ := strings.Cut(r.PathValue("rest"), ":")
	if !hasAPIKey(r) {
		writeError(w, http.StatusForbidden, "PERMISSION_DENIED", msgNoAPIKey)
		return
	}
	s.serveGenerate(w, r, &Request{Model: model, API: GeminiAPI, APIVersion: r.PathValue("version")}, method)
}

// handleVertexModels serves Vertex AI's POST
// /{version}/projects/{p}/locations/{l}/publishers/{pub}/models/{model}:{method},
// which takes an OAuth access token instead of an API key.
func (s *Server) handleVertexModels(w http.ResponseWriter, r *http.Request) {
	model, method, _ := strings.Cut(r.PathValue("rest"), ":")
	if _, ok := bearerToken(r); !ok {
		writeError(w, http.StatusUnauthorized, "UNAUTHENTICATED", msgNoBearer)
		return
	}
	s.serveGenerate(w, r, &Request{
		Model: model, API: VertexAI, APIVersion: r.PathValue("version"),
		Project: r.PathValue("project"), Location: r.PathValue("location"),
	}, method)
}

// serveGenerate answers generateContent or streamGenerateContent for req,
// whose endpoint fields the route has filled in.
func (s *Server) serveGenerate(w http.ResponseWriter, r *http.Request, req *Request, method string) {
	model := req.Model
	if !apiVersionServed(req.API, req.APIVersion) {
		writeError(w, http.StatusNotFound, "NOT_FOUND", fmt.Sprintf("API version %q is not served", req.APIVersion))
		return
	}
	switch method {
	case "streamGenerateContent":
		req.Stream = true
	case "generateContent":
	default:
		writeError(w, http.StatusNotFound, "NOT_FOUND", fmt.Sprintf("method %q is not found for models/%s", method, model))
		return
	}
	if model == "" {
		writeError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "model name is empty")
		return
	}
	if req.Stream && r.URL.Query().Get("alt") != "sse" {
		writeError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "the fake Gemini server streams only with alt=sse")
		return
	}

	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		writeError(w, http.StatusBadRequest, "INVALID_ARGUMENT", fmt.Sprintf("read request body: %v", err))
		return
	}
	var wr wireRequest
	if err := json.Unmarshal(body, &wr); err != nil {
		writeError(w, http.StatusBadRequest, "INVALID_ARGUMENT", fmt.Sprintf("Invalid JSON payload received. %v", err))
		return
	}
	if len(wr.Contents) == 0 {
		writeError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "* GenerateContentRequest.contents: contents is not specified")
		return
	}
	stages.Mark(stages.FakeDecoded)
	req.Contents, req.SystemInstruction, req.Tools = wr.Contents, wr.SystemInstruction, wr.Tools
	req.ToolConfig, req.GenerationConfig, req.Header = wr.ToolConfig, wr.GenerationConfig, r.Header.Clone()
	req.RemoteAddr = r.RemoteAddr
	log := s.log.With("api", string(req.API), "version", req.APIVersion, "model", model, "method", method)

	var reply Reply
	if bad := s.checkContents(req.Contents); bad != nil {
		reply = *bad // strict mode: the real API refuses the request
	} else {
		reply = s.brain.Respond(r.Context(), req)
		s.noteRESTCalls(reply)
	}
	if reply.Status >= 400 {
		log.Info("fake gemini: error reply", "status", reply.Status)
		w.Header().Set("Content-Type", "application/json; charset=UTF-8")
		w.WriteHeader(reply.Status)
		_, _ = w.Write(errorBody(reply.Status, reply.Error))
		return
	}
	ctx := r.Context()
	rb := newResponseBuilder(req, body)
	if req.Stream {
		err = s.stream(ctx, w, rb, reply)
	} else {
		err = s.unary(ctx, w, rb, reply)
	}
	switch {
	case err == nil:
		log.Debug("fake gemini: reply sent", "chunks", len(reply.Chunks))
	case ctx.Err() != nil:
		log.Debug("fake gemini: reply abandoned", "reason", context.Cause(ctx))
	default:
		log.Warn("fake gemini: reply failed", "err", err)
	}
}

// stream writes reply as server-sent events the genai client parses: one
// compact "data: {...}" line and a blank line per chunk, flushed each time.
func (s *Server) stream(ctx context.Context, w http.ResponseWriter, rb *responseBuilder, reply Reply) error {
	sse, err := fakeserve.OpenSSE(w, "text/event-stream")
	if err != nil {
		return fmt.Errorf("stream: %w", err)
	}
	if reply.BlockReason != "" {
		data, err := rb.buildBlocked(reply.BlockReason)
		if err != nil {
			return fmt.Errorf("stream: %w", err)
		}
		if err := sse.Data(data); err != nil {
			return fmt.Errorf("stream: blocked chunk: %w", err)
		}
		return nil
	}
	if err := fakeserve.SendChunks(ctx, sse, reply.Chunks, Chunk.pace, rb.build); err != nil {
		return fmt.Errorf("stream: %w", err)
	}
	if reply.MidStreamError != nil {
		// The SDK reads a token without the "data:" prefix as a structured
		// error; with the prefix it would decode as an empty response.
		if err := sse.Line(errorBody(http.StatusInternalServerError, reply.MidStreamError)); err != nil {
			return fmt.Errorf("stream: error line: %w", err)
		}
		return nil
	}
	if reply.Hang {
		<-ctx.Done()
		return fmt.Errorf("stream: hang: %w", ctx.Err())
	}
	return nil
}

// pace is when c may be sent in a stream.
func (c Chunk) pace() fakeserve.Pace { return fakeserve.Pace{Delay: c.Delay} }

// unary answers generateContent: the whole reply merged into one body.
func (s *Server) unary(ctx context.Context, w http.ResponseWriter, rb *responseBuilder, reply Reply) error {
	if err := fakeserve.Wait(ctx, fakeserve.TotalDelay(reply.Chunks, Chunk.pace)); err != nil {
		return fmt.Errorf("unary: %w", err)
	}
	if reply.MidStreamError != nil {
		code := reply.MidStreamError.Code
		if code < 400 {
			code = http.StatusInternalServerError
		}
		w.Header().Set("Content-Type", "application/json; charset=UTF-8")
		w.WriteHeader(code)
		_, err := w.Write(errorBody(code, reply.MidStreamError))
		return err
	}
	if reply.Hang {
		<-ctx.Done()
		return fmt.Errorf("unary: hang: %w", ctx.Err())
	}
	var data []byte
	var err error
	if reply.BlockReason != "" {
		data, err = rb.buildBlocked(reply.BlockReason)
	} else {
		data, err = rb.build(merge(reply.Chunks))
	}
	if err != nil {
		return fmt.Errorf("unary: %w", err)
	}
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	if _, err := w.Write(data); err != nil {
		return fmt.Errorf("unary: write: %w", err)
	}
	return nil
}
