package openaitext

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/turnstile-gw/turnstile/internal/clock"
	"github.com/turnstile-gw/turnstile/transport"
)

// maxErrorText bounds an error message taken from a body that is not JSON
// (an HTML page from a proxy, say), in runes.
const maxErrorText = 200

// classify turns a stream's error into the context's error or a
// *transport.ModelError. resp is the HTTP response, when there was one.
func classify(ctx context.Context, err error, resp *http.Response) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if api, ok := errorsAs[*openai.Error](err); ok {
		if api.Message == "" && api.Response != nil {
			// The body was not in OpenAI's shape (another server's own):
			// the SDK kept it for reading.
			return bodyError(api.Response)
		}
		var h http.Header
		if api.Response != nil {
			h = api.Response.Header
		}
		return modelError(api.StatusCode, api.Code, api.Type, api.Message, h)
	}
	if se, ok := errorsAs[*ssestream.StreamError](err); ok {
		// An error event inside a 200 stream: no HTTP status, so the
		// status is inferred from the error's code or type.
		st, code, msg := parseErrorBody(se.Event.Data)
		if st == 0 {
			st = http.StatusInternalServerError
		}
		return modelError(st, code, "", msg, nil)
	}
	if resp != nil && resp.StatusCode >= 400 {
		// An error body the SDK could not read at all.
		return bodyError(resp)
	}
	if se, ok := errorsAs[*json.SyntaxError](err); ok {
		return errMalformed("a stream event is not JSON: " + se.Error())
	}
	msg := err.Error()
	if ue, ok := errorsAs[*url.Error](err); ok {
		msg = "request failed: " + ue.Err.Error() // without the URL, which may carry credentials
	}
	return &transport.ModelError{Code: "unavailable", Message: msg, Retryable: true}
}

// bodyError reads an error response whose body is not in OpenAI's shape.
func bodyError(resp *http.Response) *transport.ModelError {
	var body []byte
	if resp.Body != nil {
		body, _ = io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	}
	_, code, msg := parseErrorBody(body)
	return modelError(resp.StatusCode, code, "", msg, resp.Header)
}

// errorsAs is errors.As for a target type, as a value.
func errorsAs[T error](err error) (T, bool) {
	var t T
	ok := errors.As(err, &t)
	return t, ok
}

// modelError is a provider error with the retry rules every adapter uses.
func modelError(status int, code, typ, msg string, h http.Header) *transport.ModelError {
	if code == "" {
		code = typ
	}
	if msg == "" {
		msg = http.StatusText(status)
	}
	return &transport.ModelError{Status: status, Code: code, Message: msg,
		Retryable: transport.RetryableStatus(status), RetryAfter: retryAfter(h, clock.Wall.Now())}
}

// parseErrorBody reads an error body in the shapes compatible servers use:
// OpenAI's {"error":{"message","type","code"}}, a bare {"message","type",
// "code"} (vLLM, whose code is the HTTP status), {"error":"text"} (Ollama)
// or plain text. status is a numeric code, or the one its type implies,
// 0 when neither says.
func parseErrorBody(body []byte) (status int, code, msg string) {
	var outer struct {
		Error json.RawMessage `json:"error"`
	}
	obj := bytes.TrimSpace(body)
	if json.Unmarshal(obj, &outer) == nil && len(outer.Error) > 0 {
		var s string
		if json.Unmarshal(outer.Error, &s) == nil {
			return 0, "", s
		}
		obj = outer.Error
	}
	var e struct {
		Message string          `json:"message"`
		Type    string          `json:"type"`
		Code    json.RawMessage `json:"code"`
	}
	if err := json.Unmarshal(obj, &e); err != nil {
		return 0, "", clip(strings.TrimSpace(string(body)))
	}
	var n int
	var s string
	switch {
	case json.Unmarshal(e.Code, &n) == nil && n >= 400 && n <= 599:
		status = n
	case json.Unmarshal(e.Code, &s) == nil:
		code = s
	}
	if code == "" {
		code = e.Type
	}
	if status == 0 {
		status = statusOf(code, e.Type)
	}
	return status, code, e.Message
}

// statusOf is the HTTP status an error code or type implies, 0 if unknown.
func statusOf(code, typ string) int {
	switch {
	case strings.Contains(code, "rate_limit") || typ == "requests" || typ == "tokens":
		return http.StatusTooManyRequests
	case typ == "invalid_request_error":
		return http.StatusBadRequest
	case typ == "server_error":
		return http.StatusInternalServerError
	}
	return 0
}

func clip(s string) string {
	if utf8.RuneCountInString(s) <= maxErrorText {
		return s
	}
	return string([]rune(s)[:maxErrorText-1]) + "…"
}

// retryAfter reads how long the provider asks to wait: retry-after-ms
// (OpenAI's), then Retry-After in seconds or as an HTTP date. 0 when absent
// or unreadable.
func retryAfter(h http.Header, now time.Time) time.Duration {
	if h == nil {
		return 0
	}
	if ms, err := strconv.ParseFloat(h.Get("Retry-After-Ms"), 64); err == nil && ms > 0 {
		return time.Duration(ms * float64(time.Millisecond))
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s <= 0 {
			return 0
		}
		return time.Duration(s * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
