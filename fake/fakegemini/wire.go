package fakegemini

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"google.golang.org/genai"
)

// wireRequest is the body of generateContent / streamGenerateContent. genai
// types decode the Gemini API wire JSON directly.
type wireRequest struct {
	Contents          []*genai.Content        `json:"contents"`
	SystemInstruction *genai.Content          `json:"systemInstruction"`
	Tools             []*genai.Tool           `json:"tools"`
	ToolConfig        *genai.ToolConfig       `json:"toolConfig"`
	GenerationConfig  *genai.GenerationConfig `json:"generationConfig"`
}

// wireResponse mirrors a recorded GenerateContentResponse chunk. A blocked
// prompt's answer has promptFeedback and no candidates.
type wireResponse struct {
	Candidates     []wireCandidate     `json:"candidates,omitempty"`
	PromptFeedback *wirePromptFeedback `json:"promptFeedback,omitempty"`
	UsageMetadata  wireUsage           `json:"usageMetadata"`
	ModelVersion   string              `json:"modelVersion"`
	ResponseID     string              `json:"responseId"`
}

type wirePromptFeedback struct {
	BlockReason string `json:"blockReason"`
}

type wireCandidate struct {
	Content      wireContent `json:"content"`
	FinishReason string      `json:"finishReason,omitempty"`
	Index        int         `json:"index"`
}

type wireContent struct {
	Parts []map[string]any `json:"parts"`
	Role  string           `json:"role"`
}

type wireUsage struct {
	PromptTokenCount     int `json:"promptTokenCount"`
	CandidatesTokenCount int `json:"candidatesTokenCount,omitempty"`
	TotalTokenCount      int `json:"totalTokenCount"`
}

type wireError struct {
	Error APIError `json:"error"`
}

// responseBuilder turns chunks into wire responses for one reply: same
// responseId throughout, cumulative usage like the real service.
type responseBuilder struct {
	model        string
	responseID   string
	promptTokens int
	outputChars  int
}

func newResponseBuilder(req *Request, body []byte) *responseBuilder {
	return &responseBuilder{model: req.Model, responseID: newResponseID(), promptTokens: max(1, len(body)/4)}
}

// build encodes one chunk as compact JSON on a single line.
func (b *responseBuilder) build(c Chunk) ([]byte, error) {
	parts := make([]map[string]any, 0, 1+len(c.Calls))
	if c.Text != "" || len(c.Calls) == 0 {
		// The real service sends {"text":""} in a content-less final chunk.
		parts = append(parts, map[string]any{"text": c.Text})
	}
	for _, call := range c.Calls {
		fc := map[string]any{"name": call.Name, "args": call.Args}
		if call.Args == nil {
			fc["args"] = map[string]any{}
		}
		if call.ID != "" {
			fc["id"] = call.ID
		}
		part := map[string]any{"functionCall": fc}
		if len(call.Signature) > 0 {
			part["thoughtSignature"] = call.Signature // []byte: standard base64, as proto3 JSON bytes
		}
		parts = append(parts, part)
	}
	b.outputChars += len(c.Text)
	for _, call := range c.Calls {
		b.outputChars += len(call.Name) + 16*len(call.Args)
	}
	out := (b.outputChars + 3) / 4
	resp := wireResponse{
		Candidates: []wireCandidate{{
			Content:      wireContent{Parts: parts, Role: "model"},
			FinishReason: c.FinishReason,
		}},
		UsageMetadata: wireUsage{PromptTokenCount: b.promptTokens, CandidatesTokenCount: out, TotalTokenCount: b.promptTokens + out},
		ModelVersion:  b.model,
		ResponseID:    b.responseID,
	}
	data, err := json.Marshal(resp)
	if err != nil {
		return nil, fmt.Errorf("encode response chunk: %w", err)
	}
	return data, nil
}

// buildBlocked encodes the single chunk that answers a blocked prompt:
// promptFeedback.blockReason, prompt usage, and no candidates.
func (b *responseBuilder) buildBlocked(reason string) ([]byte, error) {
	resp := wireResponse{
		PromptFeedback: &wirePromptFeedback{BlockReason: reason},
		UsageMetadata:  wireUsage{PromptTokenCount: b.promptTokens, TotalTokenCount: b.promptTokens},
		ModelVersion:   b.model,
		ResponseID:     b.responseID,
	}
	data, err := json.Marshal(resp)
	if err != nil {
		return nil, fmt.Errorf("encode blocked response: %w", err)
	}
	return data, nil
}

// merge folds all chunks of a reply into the single chunk a non-streaming
// generateContent answers: texts joined, calls kept in order, the last
// finish reason.
func merge(chunks []Chunk) Chunk {
	var m Chunk
	var text strings.Builder
	for _, c := range chunks {
		text.WriteString(c.Text)
		m.Calls = append(m.Calls, c.Calls...)
		if c.FinishReason != "" {
			m.FinishReason = c.FinishReason
		}
	}
	m.Text = text.String()
	return m
}

// errorBody encodes {"error":{...}} for e, filling gaps from code.
func errorBody(code int, e *APIError) []byte {
	body := wireError{}
	if e != nil {
		body.Error = *e
	}
	if body.Error.Code == 0 {
		body.Error.Code = code
	}
	if body.Error.Status == "" {
		body.Error.Status = statusName(body.Error.Code)
	}
	if body.Error.Message == "" {
		body.Error.Message = http.StatusText(body.Error.Code)
	}
	data, err := json.Marshal(body)
	if err != nil { // cannot happen: only strings and ints
		return []byte(`{"error":{"code":500,"message":"encode error","status":"INTERNAL"}}`)
	}
	return data
}

// writeError answers an HTTP error with a Gemini API error body.
func writeError(w http.ResponseWriter, code int, status, msg string) {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(code)
	_, _ = w.Write(errorBody(code, &APIError{Code: code, Message: msg, Status: status}))
}

func newResponseID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return base64.RawURLEncoding.EncodeToString(b)
}
