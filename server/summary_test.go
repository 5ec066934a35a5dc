package server

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/turnstile-gw/turnstile/metrics"
)

func TestSummaryHandlerServesIndentedJSON(t *testing.T) {
	s := metrics.NewSummary(1000)
	s.ObserveTool("kb_search", 12*time.Millisecond, 2048, "ok")
	s.ObserveTool("kb_search", 30*time.Millisecond, 4096, "ok")
	s.ObserveTool("kb_search", 5*time.Second, -1, "timeout")
	s.SetContextTokens("text", 1800)
	s.SetLoopState(func() any { return map[string]int{"detections": 2} })

	srv := httptest.NewServer(SummaryHandler(s))
	t.Cleanup(srv.Close)
	res, body := getSummary(t, srv.URL+"/metrics/summary")

	if res.StatusCode != http.StatusOK {
		t.Fatalf("status = %d: %s", res.StatusCode, body)
	}
	if ct := res.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q", ct)
	}
	if cc := res.Header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("Cache-Control = %q", cc)
	}
	if !bytes.Contains(body, []byte("\n  \"")) {
		t.Errorf("body is not indented:\n%s", body)
	}
	var v struct {
		Window int `json:"window"`
		Tools  map[string]struct {
			Calls       int                `json:"calls"`
			Outcomes    map[string]int     `json:"outcomes"`
			SizeSamples int                `json:"size_samples"`
			ResultChars map[string]float64 `json:"result_chars"`
			Tokens      map[string]float64 `json:"result_tokens"`
			LatencyMs   map[string]float64 `json:"latency_ms"`
		} `json:"tools"`
		ContextTokens map[string]int `json:"context_tokens"`
		LoopState     map[string]int `json:"loop_state"`
		GeneratedAt   time.Time      `json:"generated_at"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("decode: %v\n%s", err, body)
	}
	kb := v.Tools["kb_search"]
	if v.Window != 1000 || kb.Calls != 3 || kb.Outcomes["timeout"] != 1 || kb.SizeSamples != 2 {
		t.Errorf("window/calls/outcomes/samples wrong:\n%s", body)
	}
	if kb.ResultChars["p50"] != 2048 || kb.ResultChars["p99"] != 4096 || kb.Tokens["avg"] != 768 ||
		kb.LatencyMs["p99"] != 5000 {
		t.Errorf("figures wrong:\n%s", body)
	}
	if v.ContextTokens["text"] != 1800 || v.LoopState["detections"] != 2 || v.GeneratedAt.IsZero() {
		t.Errorf("context/loop state/time wrong:\n%s", body)
	}
}

func TestSummaryHandlerEmptyAndErrors(t *testing.T) {
	s := metrics.NewSummary(0)
	srv := httptest.NewServer(SummaryHandler(s))
	t.Cleanup(srv.Close)

	res, body := getSummary(t, srv.URL)
	if res.StatusCode != http.StatusOK || !json.Valid(body) || !bytes.Contains(body, []byte(`"tools": {}`)) {
		t.Errorf("empty summary: %d %s", res.StatusCode, body)
	}

	post, err := http.Post(srv.URL, "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = post.Body.Close()
	if post.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST status = %d, want 405", post.StatusCode)
	}

	s.SetLoopState(func() any { return func() {} }) // not JSON-encodable
	res, body = getSummary(t, srv.URL)
	if res.StatusCode != http.StatusInternalServerError || !json.Valid(body) {
		t.Errorf("unencodable loop state: %d %s", res.StatusCode, body)
	}
}

func getSummary(t *testing.T, url string) (*http.Response, []byte) {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res, body
}
