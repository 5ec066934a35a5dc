package fakegemini

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/genai"
)

func TestBlockedPromptIsOneChunkWithPromptFeedbackAndNoCandidates(t *testing.T) {
	_, base := startServer(t, NewScript(Fixed(BlockedReply("PROHIBITED_CONTENT")), Fixed(BlockedReply("SAFETY"))))
	c := newClient(t, base)

	resps, err := collect(c.Models.GenerateContentStream(testContext(t), testModel, genai.Text("something forbidden"), nil))
	if err != nil {
		t.Fatalf("stream: %v, want HTTP 200 as the real API answers", err)
	}
	if len(resps) != 1 {
		t.Fatalf("got %d chunks, want 1", len(resps))
	}
	r := resps[0]
	if len(r.Candidates) != 0 || r.PromptFeedback == nil || r.PromptFeedback.BlockReason != genai.BlockedReasonProhibitedContent {
		t.Fatalf("chunk has %d candidates and prompt feedback %+v, want none and PROHIBITED_CONTENT", len(r.Candidates), r.PromptFeedback)
	}
	if r.UsageMetadata == nil || r.UsageMetadata.PromptTokenCount == 0 || r.ResponseID == "" {
		t.Errorf("chunk usage %+v id %q, want prompt usage and a response id", r.UsageMetadata, r.ResponseID)
	}

	unary, err := c.Models.GenerateContent(testContext(t), testModel, genai.Text("again"), nil)
	if err != nil || len(unary.Candidates) != 0 || unary.PromptFeedback == nil || unary.PromptFeedback.BlockReason != genai.BlockedReasonSafety {
		t.Fatalf("generateContent = %+v, %v; want a SAFETY block", unary, err)
	}
}

func TestRateLimitErrorCarriesRetryInfoAsGoogleSendsIt(t *testing.T) {
	_, base := startServer(t, NewScript(Fixed(RateLimitReply(testModel, 29443869346*time.Nanosecond))))
	c := newClient(t, base)

	_, err := collect(c.Models.GenerateContentStream(testContext(t), testModel, genai.Text("hi"), nil))
	apiErr := asAPIError(t, err)
	if apiErr.Code != 429 || apiErr.Status != "RESOURCE_EXHAUSTED" || !strings.Contains(apiErr.Message, "Please retry in 29.443869346s.") {
		t.Fatalf("error = %+v, want 429 RESOURCE_EXHAUSTED saying when to retry", apiErr)
	}
	types := map[string]map[string]any{}
	for _, d := range apiErr.Details {
		typ, _ := d["@type"].(string)
		types[typ] = d
	}
	if d := types["type.googleapis.com/google.rpc.RetryInfo"]; d == nil || d["retryDelay"] != "29.443869346s" {
		t.Errorf("details %+v, want a RetryInfo with retryDelay 29.443869346s", apiErr.Details)
	}
	if d := types["type.googleapis.com/google.rpc.QuotaFailure"]; d == nil {
		t.Errorf("details %+v, want a QuotaFailure", apiErr.Details)
	} else if vs, _ := d["violations"].([]any); len(vs) != 1 {
		t.Errorf("QuotaFailure %+v, want one violation", d)
	}
	if types["type.googleapis.com/google.rpc.Help"] == nil {
		t.Errorf("details %+v, want a Help link", apiErr.Details)
	}
}

func TestErrorInfoDetailReachesTheSDK(t *testing.T) {
	_, base := startServer(t, NewScript(Fixed(InvalidAPIKeyReply())))
	c := newClient(t, base)
	_, err := collect(c.Models.GenerateContentStream(testContext(t), testModel, genai.Text("hi"), nil))
	apiErr := asAPIError(t, err)
	if apiErr.Code != 400 || len(apiErr.Details) == 0 {
		t.Fatalf("error = %+v, want 400 with details", apiErr)
	}
	d := apiErr.Details[0]
	md, _ := d["metadata"].(map[string]any)
	if d["@type"] != "type.googleapis.com/google.rpc.ErrorInfo" || d["reason"] != "API_KEY_INVALID" ||
		d["domain"] != "googleapis.com" || md["service"] != "generativelanguage.googleapis.com" {
		t.Errorf("first detail = %+v, want the ErrorInfo API_KEY_INVALID", d)
	}
}

// TestErrorBodyWireShape pins the JSON of an error with details: the
// "details" array follows code, message and status, and is absent when
// there are none.
func TestErrorBodyWireShape(t *testing.T) {
	_, base := startServer(t, NewScript(
		Fixed(ErrorReply(429, "RESOURCE_EXHAUSTED", "slow down", RetryInfo(2*time.Second))),
		Fixed(ErrorReply(503, "UNAVAILABLE", "overloaded"))))
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	for _, want := range []string{
		`{"error":{"code":429,"message":"slow down","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"2s"}]}}`,
		`{"error":{"code":503,"message":"overloaded","status":"UNAVAILABLE"}}`,
	} {
		req, err := http.NewRequestWithContext(testContext(t), "POST", base+"v1beta/models/m:generateContent",
			strings.NewReader(`{"contents":[{"parts":[{"text":"hi"}],"role":"user"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("x-goog-api-key", "k")
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			t.Fatalf("do: %v", err)
		}
		data, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil || string(data) != want {
			t.Errorf("body = %s (%v), want %s", data, err, want)
		}
	}
}

func TestProtoDurationFormatsLikeProto3JSON(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "0s", 50 * time.Second: "50s", 500 * time.Millisecond: "0.5s",
		2463586755 * time.Nanosecond: "2.463586755s", -1500 * time.Millisecond: "-1.5s", time.Nanosecond: "0.000000001s",
	} {
		if got := protoDuration(d); got != want {
			t.Errorf("protoDuration(%v) = %q, want %q", d, got, want)
		}
	}
}
