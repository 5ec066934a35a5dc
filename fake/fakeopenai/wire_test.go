package fakeopenai_test

import (
	"net/http"
	"reflect"
	"strings"
	"testing"

	fo "github.com/turnstile-gw/turnstile/fake/fakeopenai"
)

func TestStreamIsServerSentChunksThenUsageThenDone(t *testing.T) {
	reply := fo.TextReply("Refunds take five days.", 2)
	reply.Usage = &fo.Usage{PromptTokens: 11, CompletionTokens: 5}
	_, base := startServer(t, fo.NewScript(fo.Fixed(reply)), fo.Options{})
	resp, body := post(t, base, "/chat/completions", userRequest(true, true), nil)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d content type %q, want a 200 event stream", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	evs := events(t, body)
	if len(evs) != 5 || evs[4] != "[DONE]" {
		t.Fatalf("events = %q, want two text chunks, the finish chunk, the usage chunk and [DONE]", evs)
	}
	var id string
	var text strings.Builder
	for i, e := range evs[:4] {
		c := decode(t, e)
		if c["object"] != "chat.completion.chunk" || c["model"] != "gpt-test" || (id != "" && c["id"] != id) {
			t.Errorf("chunk %d = %v, want a chat.completion.chunk of model gpt-test with the stream's id", i, c)
		}
		id, _ = c["id"].(string)
		if _, ok := c["usage"]; !ok {
			t.Errorf("chunk %d has no usage key, want null until the usage chunk", i)
		}
		if i == 3 {
			break
		}
		choice := c["choices"].([]any)[0].(map[string]any)
		delta := choice["delta"].(map[string]any)
		s, _ := delta["content"].(string)
		text.WriteString(s)
		if (i == 0) != (delta["role"] == "assistant") {
			t.Errorf("chunk %d delta %v: the role belongs to the first delta only", i, delta)
		}
		if want := map[int]any{0: nil, 1: nil, 2: "stop"}[i]; choice["finish_reason"] != want || c["usage"] != nil {
			t.Errorf("chunk %d: finish_reason %v usage %v, want %v and null", i, choice["finish_reason"], c["usage"], want)
		}
	}
	if text.String() != "Refunds take five days." {
		t.Errorf("content = %q", text.String())
	}
	usage := decode(t, evs[3])
	if choices := usage["choices"].([]any); len(choices) != 0 {
		t.Errorf("usage chunk has choices %v, want []", choices)
	}
	if want := map[string]any{"prompt_tokens": 11.0, "completion_tokens": 5.0, "total_tokens": 16.0}; !reflect.DeepEqual(usage["usage"], want) {
		t.Errorf("usage = %v, want %v", usage["usage"], want)
	}
}

func TestStreamWithoutIncludeUsageSendsNoUsage(t *testing.T) {
	_, base := startServer(t, fo.NewScript(fo.Fixed(fo.TextReply("Hi.", 1))), fo.Options{})
	_, body := post(t, base, "/chat/completions", userRequest(true, false), nil)
	evs := events(t, body)
	if len(evs) != 3 || evs[2] != "[DONE]" {
		t.Fatalf("events = %q, want text, finish, [DONE]", evs)
	}
	for _, e := range evs[:2] {
		if _, ok := decode(t, e)["usage"]; ok {
			t.Errorf("chunk %s has usage without include_usage", e)
		}
	}
}

func TestToolCallFragmentsCarryIDAndNameOnTheFirstOnlyAndArgumentsAsCut(t *testing.T) {
	pieces := []string{`{"q":"caf\u00`, `e9 \`, `"x\""}`}
	_, base := startServer(t, fo.NewScript(fo.Fixed(fo.CallReply(fo.Call{ID: "call_1", Name: "kb_search", Pieces: pieces}))), fo.Options{})
	_, body := post(t, base, "/chat/completions", userRequest(true, false), nil)
	evs := events(t, body)
	if len(evs) != 6 {
		t.Fatalf("events = %q, want header, three fragments, finish, [DONE]", evs)
	}
	delta := func(i int) map[string]any {
		return decode(t, evs[i])["choices"].([]any)[0].(map[string]any)["delta"].(map[string]any)
	}
	first := delta(0)["tool_calls"].([]any)[0]
	want := map[string]any{"index": 0.0, "id": "call_1", "type": "function", "function": map[string]any{"name": "kb_search", "arguments": ""}}
	if !reflect.DeepEqual(first, want) || delta(0)["content"] != nil {
		t.Errorf("first fragment = %v (content %v), want %v and null content", first, delta(0)["content"], want)
	}
	var args strings.Builder
	for i := 1; i <= 3; i++ {
		frag := delta(i)["tool_calls"].([]any)[0].(map[string]any)
		if len(frag) != 2 || frag["index"] != 0.0 {
			t.Errorf("fragment %d = %v, want only index and function", i, frag)
		}
		fn := frag["function"].(map[string]any)
		if len(fn) != 1 || fn["arguments"] != pieces[i-1] {
			t.Errorf("fragment %d function = %v, want only the arguments piece %q", i, fn, pieces[i-1])
		}
		args.WriteString(fn["arguments"].(string))
	}
	if args.String() != `{"q":"caf\u00e9 \"x\""}` {
		t.Errorf("arguments = %s", args.String())
	}
	if fin := decode(t, evs[4])["choices"].([]any)[0].(map[string]any); fin["finish_reason"] != "tool_calls" || len(fin["delta"].(map[string]any)) != 0 {
		t.Errorf("finish chunk = %v, want an empty delta with tool_calls", fin)
	}
}

func TestMidStreamErrorIsAnErrorEventWithoutDone(t *testing.T) {
	_, base := startServer(t, fo.NewScript(fo.Fixed(fo.Reply{Chunks: []fo.Chunk{{Text: "Par"}},
		MidStreamError: &fo.APIError{Type: "server_error", Message: "boom"}})), fo.Options{})
	_, body := post(t, base, "/chat/completions", userRequest(true, true), nil)
	evs := events(t, body)
	if len(evs) != 2 || evs[1] != `{"error":{"message":"boom","type":"server_error","param":null,"code":null}}` {
		t.Fatalf("events = %q, want a chunk then the error event, and no [DONE]", evs)
	}
}

func TestErrorRepliesHaveTheRealBodyAndHeaders(t *testing.T) {
	r := fo.ErrorReply(429, "requests", "rate_limit_exceeded", "Rate limit reached.")
	r.Header = http.Header{"Retry-After": {"3"}}
	_, base := startServer(t, fo.NewScript(fo.Fixed(r), fo.Fixed(fo.Reply{Status: 503})), fo.Options{})
	resp, body := post(t, base, "/chat/completions", userRequest(true, true), nil)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "3" || resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("status %d Retry-After %q type %q", resp.StatusCode, resp.Header.Get("Retry-After"), resp.Header.Get("Content-Type"))
	}
	if want := `{"error":{"message":"Rate limit reached.","type":"requests","param":null,"code":"rate_limit_exceeded"}}`; string(body) != want {
		t.Errorf("body = %s, want %s", body, want)
	}
	resp, body = post(t, base, "/chat/completions", userRequest(true, true), nil)
	if want := `{"error":{"message":"Service Unavailable","type":"server_error","param":null,"code":null}}`; resp.StatusCode != 503 || string(body) != want {
		t.Errorf("bare status: %d %s, want 503 %s", resp.StatusCode, body, want)
	}
}

func TestAPIKeyIsCheckedWhenTheServerHasOne(t *testing.T) {
	_, base := startServer(t, fo.NewScript(fo.Fixed(fo.TextReply("ok", 1))), fo.Options{APIKey: "sk-test-0123456789"})
	resp, body := post(t, base, "/chat/completions", userRequest(true, false), nil)
	if e := decode(t, string(body))["error"].(map[string]any); resp.StatusCode != 401 || e["code"] != nil ||
		!strings.HasPrefix(e["message"].(string), "You didn't provide an API key.") {
		t.Errorf("without a key: %d %s", resp.StatusCode, body)
	}
	resp, body = post(t, base, "/chat/completions", userRequest(true, false), http.Header{"Authorization": {"Bearer sk-nope-9876543210"}})
	if e := decode(t, string(body))["error"].(map[string]any); resp.StatusCode != 401 || e["code"] != "invalid_api_key" ||
		e["message"] != "Incorrect API key provided: sk-***********3210." {
		t.Errorf("with a wrong key: %d %s", resp.StatusCode, body)
	}
	if resp, _ := post(t, base, "/chat/completions", userRequest(true, false), http.Header{"Authorization": {"Bearer sk-test-0123456789"}}); resp.StatusCode != 200 {
		t.Errorf("with the key: %d", resp.StatusCode)
	}
}

func TestRequestsAreCheckedLikeTheRealAPI(t *testing.T) {
	user := map[string]any{"role": "user", "content": "hi"}
	asst := map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{
		map[string]any{"id": "call_1", "type": "function", "function": map[string]any{"name": "f", "arguments": "{}"}}}}
	tool := func(id string) map[string]any {
		return map[string]any{"role": "tool", "tool_call_id": id, "content": "{}"}
	}
	fn := map[string]any{"type": "function", "function": map[string]any{"name": "f", "parameters": map[string]any{"type": "object"}}}
	req := func(mut func(map[string]any)) map[string]any {
		r := userRequest(true, false)
		mut(r)
		return r
	}
	cases := []struct {
		name  string
		body  any
		param string
		msg   string
	}{
		{"no model", req(func(r map[string]any) { delete(r, "model") }), "", "you must provide a model parameter"},
		{"no messages", req(func(r map[string]any) { r["messages"] = []any{} }), "messages", "[] is too short - 'messages'"},
		{"tool without call", req(func(r map[string]any) { r["messages"] = []any{user, tool("call_9")} }), "messages.[1].role",
			"Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'."},
		{"call without tool message", req(func(r map[string]any) { r["messages"] = []any{user, asst, user} }), "messages.[1].role",
			"An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. " +
				"The following tool_call_ids did not have response messages: call_1"},
		{"call last", req(func(r map[string]any) { r["messages"] = []any{user, asst} }), "messages.[1].role",
			"An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. " +
				"The following tool_call_ids did not have response messages: call_1"},
		{"tool_choice without tools", req(func(r map[string]any) { r["tool_choice"] = "auto" }), "tool_choice",
			"Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified."},
		{"unknown tool_choice", req(func(r map[string]any) { r["tools"] = []any{fn}; r["tool_choice"] = "always" }), "tool_choice",
			"Invalid value: 'always'. Supported values are: 'none', 'auto', and 'required'."},
		{"stream_options without stream", userRequest(false, true), "stream_options",
			"The 'stream_options' parameter is only allowed when 'stream' is enabled."},
		{"bad function name", req(func(r map[string]any) {
			r["tools"] = []any{map[string]any{"type": "function", "function": map[string]any{"name": "kb search"}}}
		}), "tools[0].function.name",
			"Invalid 'tools[0].function.name': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'."},
		{"not JSON", []byte(`{"model":`), "", "We could not parse the JSON body of your request."},
	}
	brain := fo.NewScript()
	_, base := startServer(t, brain, fo.Options{})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := post(t, base, "/chat/completions", tc.body, nil)
			e, _ := decode(t, string(body))["error"].(map[string]any)
			param, _ := e["param"].(string)
			if resp.StatusCode != 400 || e["type"] != "invalid_request_error" || param != tc.param || !strings.HasPrefix(e["message"].(string), tc.msg) {
				t.Errorf("%d %s, want 400 invalid_request_error param %q: %s", resp.StatusCode, body, tc.param, tc.msg)
			}
		})
	}
	if n := len(brain.Requests()); n != 0 {
		t.Errorf("the brain saw %d invalid requests", n)
	}
	ok := req(func(r map[string]any) {
		r["messages"] = []any{user, asst, tool("call_1")}
		r["tools"] = []any{fn}
		r["tool_choice"] = "required"
	})
	brain.Push(fo.Fixed(fo.TextReply("fine", 1)))
	if resp, body := post(t, base, "/chat/completions", ok, nil); resp.StatusCode != 200 {
		t.Errorf("a valid conversation with a call and its result: %d %s", resp.StatusCode, body)
	}
}

func TestUnknownPathsAnswer404AndAnExhaustedScript500(t *testing.T) {
	_, base := startServer(t, fo.NewScript(), fo.Options{})
	resp, body := post(t, base, "/completions", userRequest(true, false), nil)
	if resp.StatusCode != 404 || string(body) != `{"error":{"message":"Invalid URL (POST /v1/completions)","type":"invalid_request_error","param":null,"code":null}}` {
		t.Errorf("unknown path: %d %s", resp.StatusCode, body)
	}
	resp, body = post(t, base, "/chat/completions", userRequest(true, false), nil)
	if resp.StatusCode != 500 || !strings.Contains(string(body), "script exhausted") {
		t.Errorf("exhausted script: %d %s", resp.StatusCode, body)
	}
}
