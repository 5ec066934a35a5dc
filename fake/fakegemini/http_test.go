package fakegemini

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestRawRequestsAreAnsweredLikeTheRealAPI checks the answers a client gets
// for malformed or unauthenticated requests, with the real error body shape.
func TestRawRequestsAreAnsweredLikeTheRealAPI(t *testing.T) {
	const body = `{"contents":[{"parts":[{"text":"hi"}],"role":"user"}]}`
	cases := []struct {
		name, method, path, key, body string
		wantCode                      int
		wantStatus                    string
	}{
		{"missing api key is refused", "POST", "v1beta/models/m:streamGenerateContent?alt=sse", "", body, 403, "PERMISSION_DENIED"},
		{"key query parameter is accepted", "POST", "v1beta/models/m:streamGenerateContent?alt=sse&key=k", "", body, 200, ""},
		{"header key is accepted", "POST", "v1beta/models/m:generateContent", "k", body, 200, ""},
		{"bad json", "POST", "v1beta/models/m:streamGenerateContent?alt=sse", "k", `{"contents":[`, 400, "INVALID_ARGUMENT"},
		{"wrong field type", "POST", "v1beta/models/m:generateContent", "k", `{"contents":"hi"}`, 400, "INVALID_ARGUMENT"},
		{"no contents", "POST", "v1beta/models/m:generateContent", "k", `{}`, 400, "INVALID_ARGUMENT"},
		{"stream without alt=sse", "POST", "v1beta/models/m:streamGenerateContent", "k", body, 400, "INVALID_ARGUMENT"},
		{"unknown method", "POST", "v1beta/models/m:countTokens", "k", body, 404, "NOT_FOUND"},
		{"unknown version", "POST", "v9/models/m:generateContent", "k", body, 404, "NOT_FOUND"},
		{"unknown path", "GET", "v1beta/files", "k", "", 404, "NOT_FOUND"},
	}
	brain := NewScript()
	for range cases {
		brain.Push(Fixed(TextReply("ok", 1)))
	}
	_, base := startServer(t, brain)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	hc := &http.Client{Transport: tr}

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(testContext(t), tc.method, base+tc.path, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			if tc.key != "" {
				req.Header.Set("x-goog-api-key", tc.key)
			}
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatalf("do: %v", err)
			}
			defer resp.Body.Close()
			data, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatalf("read: %v", err)
			}
			if resp.StatusCode != tc.wantCode {
				t.Fatalf("status = %d (%s), want %d", resp.StatusCode, data, tc.wantCode)
			}
			if tc.wantCode == 200 {
				return
			}
			var e struct {
				Error struct {
					Code    int    `json:"code"`
					Message string `json:"message"`
					Status  string `json:"status"`
				} `json:"error"`
			}
			if err := json.Unmarshal(data, &e); err != nil {
				t.Fatalf("error body %q is not JSON: %v", data, err)
			}
			if e.Error.Code != tc.wantCode || e.Error.Status != tc.wantStatus || e.Error.Message == "" {
				t.Fatalf("error body = %s, want code %d status %s and a message", data, tc.wantCode, tc.wantStatus)
			}
		})
	}
}

// TestStreamWireFormatIsCompactDataLines pins the SSE framing the SDK's
// scanner relies on: "data: " + one-line JSON + blank line, and a raw error
// line without the prefix.
func TestStreamWireFormatIsCompactDataLines(t *testing.T) {
	_, base := startServer(t, NewScript(Fixed(Reply{
		Chunks:         []Chunk{{Text: "a\nb"}, {Calls: []Call{{Name: "f"}}}},
		MidStreamError: &APIError{Code: 503, Message: "overloaded", Status: "UNAVAILABLE"},
	})))
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	req, err := http.NewRequestWithContext(testContext(t), "POST", base+"v1beta/models/m:streamGenerateContent?alt=sse",
		strings.NewReader(`{"contents":[{"parts":[{"text":"hi"}],"role":"user"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("x-goog-api-key", "k")
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatalf("do: %v", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("content type = %q", ct)
	}
	events := strings.Split(strings.TrimSuffix(string(data), "\n\n"), "\n\n")
	if len(events) != 3 {
		t.Fatalf("got %d events, want 3: %q", len(events), data)
	}
	for i, ev := range events[:2] {
		if !strings.HasPrefix(ev, "data: {") || strings.Contains(ev, "\n") {
			t.Errorf("event %d = %q, want one compact data line", i, ev)
		}
	}
	if want := `"functionCall":{"args":{},"name":"f"}`; !strings.Contains(events[1], want) {
		t.Errorf("call event = %s, want %s (no id when the brain set none)", events[1], want)
	}
	if want := `{"error":{"code":503,"message":"overloaded","status":"UNAVAILABLE"}}`; events[2] != want {
		t.Errorf("error event = %q, want %q", events[2], want)
	}
}
