package openaitext_test

import (
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	fo "github.com/turnstile-gw/turnstile/fake/fakeopenai"
	"github.com/turnstile-gw/turnstile/internal/texttest"
	"github.com/turnstile-gw/turnstile/transport"
	"github.com/turnstile-gw/turnstile/transport/openaitext"
)

// modelError drains a stream that must fail before any chunk with a
// *transport.ModelError.
func modelError(t *testing.T, m transport.TextModel) *transport.ModelError {
	t.Helper()
	chunks, err := texttest.Collect(t, testContext(t), m, hello)
	if len(chunks) != 0 {
		t.Errorf("got %d chunks before the error, want none", len(chunks))
	}
	var me *transport.ModelError
	if !errors.As(err, &me) {
		t.Fatalf("error = %v (%T), want *transport.ModelError", err, err)
	}
	return me
}

func TestStreamHTTPErrorsBecomeModelErrorsWithTheProvidersCodeAndMessage(t *testing.T) {
	header := func(k, v string) http.Header { return http.Header{k: {v}} }
	cases := []struct {
		name       string
		reply      fo.Reply
		want       transport.ModelError
		retryAfter time.Duration
	}{
		{"400 invalid request", fo.Reply{Status: 400, Error: &fo.APIError{Type: "invalid_request_error", Param: "messages",
			Message: "Invalid 'messages[1].content': string too long."}},
			transport.ModelError{Status: 400, Code: "invalid_request_error", Message: "Invalid 'messages[1].content': string too long."}, 0},
		{"404 unknown model", fo.ErrorReply(404, "invalid_request_error", "model_not_found", "The model `gpt-nope` does not exist or you do not have access to it."),
			transport.ModelError{Status: 404, Code: "model_not_found", Message: "The model `gpt-nope` does not exist or you do not have access to it."}, 0},
		{"429 rate limit with Retry-After", func() fo.Reply {
			r := fo.ErrorReply(429, "requests", "rate_limit_exceeded", "Rate limit reached for gpt-test-mini on requests per min (RPM): Limit 3.")
			r.Header = header("Retry-After", "7")
			return r
		}(), transport.ModelError{Status: 429, Code: "rate_limit_exceeded", Retryable: true,
			Message: "Rate limit reached for gpt-test-mini on requests per min (RPM): Limit 3."}, 7 * time.Second},
		{"429 quota with retry-after-ms", func() fo.Reply {
			r := fo.ErrorReply(429, "insufficient_quota", "insufficient_quota", "You exceeded your current quota.")
			r.Header = header("Retry-After-Ms", "1500")
			return r
		}(), transport.ModelError{Status: 429, Code: "insufficient_quota", Retryable: true, Message: "You exceeded your current quota."},
			1500 * time.Millisecond},
		{"500 server error", fo.ErrorReply(500, "server_error", "", "The server had an error while processing your request. Sorry about that!"),
			transport.ModelError{Status: 500, Code: "server_error", Retryable: true,
				Message: "The server had an error while processing your request. Sorry about that!"}, 0},
		{"503 overloaded", fo.ErrorReply(503, "server_error", "", "The engine is currently overloaded, please try again later."),
			transport.ModelError{Status: 503, Code: "server_error", Retryable: true,
				Message: "The engine is currently overloaded, please try again later."}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, _ := scripted(t, tc.reply)
			me := modelError(t, m)
			want := tc.want
			want.RetryAfter = tc.retryAfter
			if *me != want {
				t.Errorf("error = %+v, want %+v", *me, want)
			}
		})
	}
}

func TestStreamWithAWrongKeyIsANonRetryable401(t *testing.T) {
	_, base := startFake(t, fo.NewScript(), fo.Options{APIKey: "sk-right-key-0000"})
	me := modelError(t, newModel(t, base, "sk-wrong-key-1234", openaitext.Options{}))
	if me.Status != 401 || me.Code != "invalid_api_key" || me.Retryable || !strings.HasPrefix(me.Message, "Incorrect API key provided") {
		t.Errorf("error = %+v, want a non-retryable 401 invalid_api_key", *me)
	}
	if strings.Contains(me.Message, "sk-wrong-key-1234") {
		t.Errorf("message %q repeats the key", me.Message)
	}
}

func TestStreamSendsTheKeyAsABearerTokenAndNoneWithoutOne(t *testing.T) {
	brain := fo.NewScript(fo.Fixed(fo.TextReply("ok", 1)), fo.Fixed(fo.TextReply("ok", 1)))
	_, base := startFake(t, brain, fo.Options{})
	answer(t, newModel(t, base, "sk-local-1234", openaitext.Options{}), hello)
	answer(t, newModel(t, base, "", openaitext.Options{}), hello)
	reqs := brain.Requests()
	if got := reqs[0].Header.Get("Authorization"); got != "Bearer sk-local-1234" {
		t.Errorf("Authorization = %q, want the key as a bearer token", got)
	}
	if got := reqs[1].Header.Get("Authorization"); got != "" {
		t.Errorf("Authorization = %q without a key, want none (local servers need none)", got)
	}
}

func TestStreamReadsErrorBodiesOfOtherCompatibleServers(t *testing.T) {
	cases := []struct {
		name    string
		status  int
		body    string
		code    string
		message string
	}{
		{"vLLM", 400, `{"object":"error","message":"This model's maximum context length is 4096 tokens.","type":"BadRequestError","param":null,"code":400}`,
			"BadRequestError", "This model's maximum context length is 4096 tokens."},
		{"Ollama", 404, `{"error":"model \"llama3\" not found, try pulling it first"}`, "", `model "llama3" not found, try pulling it first`},
		{"proxy page", 502, "<html><body>502 Bad Gateway</body></html>", "", "<html><body>502 Bad Gateway</body></html>"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, _ := scripted(t, fo.Reply{Status: tc.status, RawError: []byte(tc.body)})
			me := modelError(t, m)
			want := transport.ModelError{Status: tc.status, Code: tc.code, Message: tc.message, Retryable: transport.RetryableStatus(tc.status)}
			if *me != want {
				t.Errorf("error = %+v, want %+v", *me, want)
			}
		})
	}
}

func TestStreamErrorEventMidStreamIsAModelErrorAfterTheTextSent(t *testing.T) {
	m, _ := scripted(t, fo.Reply{Chunks: []fo.Chunk{{Text: "Let me "}, {Text: "think"}},
		MidStreamError: &fo.APIError{Type: "server_error", Message: "The server had an error while processing your request."}})
	chunks, err := texttest.Collect(t, testContext(t), m, hello)
	if len(chunks) != 2 || chunks[0].Text != "Let me " || chunks[1].Text != "think" {
		t.Errorf("chunks = %+v, want the two sent before the error", chunks)
	}
	var me *transport.ModelError
	if !errors.As(err, &me) {
		t.Fatalf("error = %v (%T), want *transport.ModelError", err, err)
	}
	if me.Status != 500 || me.Code != "server_error" || !me.Retryable || me.Message != "The server had an error while processing your request." {
		t.Errorf("error = %+v, want a retryable 500 server_error with the provider's message", *me)
	}
}

func TestStreamCancelDuringHangEndsPromptlyWithContextError(t *testing.T) {
	brain := fo.NewScript(fo.Fixed(fo.Reply{Chunks: []fo.Chunk{{Text: "Still thinking"}}, Hang: true}))
	s, base := startFake(t, brain, fo.Options{})
	texttest.CancelDuringHangEndsPromptly(t, newModel(t, base, "", openaitext.Options{}), s.InFlight)
}

func TestStreamDeadlineDuringHangIsContextError(t *testing.T) {
	m, _ := scripted(t, fo.Reply{Hang: true})
	texttest.DeadlineDuringHangIsContextError(t, m)
}

func TestStreamConsumerStoppingEarlyReleasesTheRequest(t *testing.T) {
	brain := fo.NewScript(fo.Fixed(fo.Reply{Chunks: []fo.Chunk{{Text: "first"}, {Text: "second"}}, Hang: true}))
	s, base := startFake(t, brain, fo.Options{})
	texttest.ConsumerStoppingEarlyReleasesTheRequest(t, newModel(t, base, "", openaitext.Options{}), s.InFlight)
}

func TestStreamRefusedByAdmitSendsNothing(t *testing.T) {
	brain := fo.NewScript(fo.Fixed(fo.Reply{Chunks: []fo.Chunk{{Text: "hello", FinishReason: "stop"}}}))
	_, base := startFake(t, brain, fo.Options{})
	texttest.RefusedRequestIsNotSent(t, newModel(t, base, "", openaitext.Options{}), func() int { return len(brain.Requests()) })
}

// The request's headers go out while its verdict is awaited; its body
// once admitted.
func TestStreamSendsItsHeadersBeforeTheVerdict(t *testing.T) {
	texttest.HeadersGoBeforeTheVerdict(t, func(base string) transport.TextModel {
		return newModel(t, base, "", openaitext.Options{})
	})
}

func TestStreamUnreachableServerIsRetryableModelErrorWithoutTheURL(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	me := modelError(t, newModel(t, "http://user:pw@"+addr+"/v1", "", openaitext.Options{}))
	if me.Status != 0 || !me.Retryable || me.Code != "unavailable" {
		t.Errorf("error = %+v, want status 0, unavailable and retryable", *me)
	}
	if strings.Contains(me.Message, "pw@") || strings.Contains(me.Message, "http://") {
		t.Errorf("message %q shows the URL", me.Message)
	}
}
