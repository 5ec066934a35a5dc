package geminitext_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	fg "github.com/turnstile-gw/turnstile/fake/fakegemini"
	"github.com/turnstile-gw/turnstile/internal/texttest"
	"github.com/turnstile-gw/turnstile/transport"
)

func TestStreamReportsTheLastUsageMetadataOnTheFinalChunk(t *testing.T) {
	// Recorded shape of a streamed answer: cumulative usageMetadata on every
	// chunk, thinking tokens counted apart from the candidates'.
	events := []string{
		`{"candidates":[{"content":{"parts":[{"text":"Refunds "}],"role":"model"},"index":0}],` +
			`"usageMetadata":{"promptTokenCount":120,"candidatesTokenCount":2,"totalTokenCount":122},"modelVersion":"gemini-2.5-flash"}`,
		`{"candidates":[{"content":{"parts":[{"text":"take five days."}],"role":"model"},"finishReason":"STOP","index":0}],` +
			`"usageMetadata":{"promptTokenCount":120,"candidatesTokenCount":6,"thoughtsTokenCount":30,"totalTokenCount":156},"modelVersion":"gemini-2.5-flash"}`,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, e := range events {
			_, _ = fmt.Fprintf(w, "data: %s\r\n\r\n", e)
		}
	}))
	t.Cleanup(srv.Close)

	chunks, err := texttest.Collect(t, testContext(t), newModel(t, srv.URL+"/"), hello)
	if err != nil || len(chunks) != 2 {
		t.Fatalf("stream: %d chunks, %v", len(chunks), err)
	}
	if chunks[0].Usage != nil {
		t.Errorf("first chunk carries usage %+v, want it on the last chunk only", *chunks[0].Usage)
	}
	if u := chunks[1].Usage; u == nil || *u != (transport.Usage{InputTokens: 120, OutputTokens: 36}) {
		t.Errorf("usage = %+v, want 120 in and 36 out (candidates plus thoughts)", u)
	}
}

func TestStreamFromTheFakeReportsItsUsage(t *testing.T) {
	_, base := startFake(t, fg.NewScript(fg.Fixed(fg.TextReply("Refunds take five business days.", 3))))
	chunks, err := texttest.Collect(t, testContext(t), newModel(t, base), hello)
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	u := chunks[len(chunks)-1].Usage
	if u == nil || u.InputTokens <= 0 || u.OutputTokens != 8 {
		t.Errorf("usage = %+v, want the fake's counts (32 characters of answer are 8 tokens)", u)
	}
}
