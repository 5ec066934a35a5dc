package openaitext_test

import (
	"encoding/json"
	"reflect"
	"testing"

	fo "github.com/turnstile-gw/turnstile/fake/fakeopenai"
	"github.com/turnstile-gw/turnstile/tools"
	"github.com/turnstile-gw/turnstile/tools/builtin"
	"github.com/turnstile-gw/turnstile/transport"
	"github.com/turnstile-gw/turnstile/transport/openaitext"
)

// body decodes the request body the fake received.
func body(t *testing.T, r *fo.Request) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("request body: %v", err)
	}
	return m
}

// jsonValue round-trips v through JSON, so that it compares with decoded
// bodies.
func jsonValue(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestStreamDeclaresTheRegistrysToolsAsItRendersThemForOpenAI(t *testing.T) {
	reg, err := tools.Load(builtin.FS, builtin.Handlers(nil))
	if err != nil {
		t.Fatal(err)
	}
	var decls []transport.ToolDecl
	var rendered []map[string]any
	for _, tool := range reg.Tools() {
		decls = append(decls, transport.ToolDecl{Name: tool.Name, Description: tool.Description, Parameters: tool.ParametersSchema()})
		rendered = append(rendered, tool.OpenAIFunction())
	}
	m, brain := scripted(t, fo.TextReply("Five days.", 1))
	req := transport.TextRequest{System: "You answer from the knowledge base.", History: hello.History, Tools: decls}
	answer(t, m, req)

	b := body(t, brain.Requests()[0])
	if !reflect.DeepEqual(b["tools"], jsonValue(t, rendered)) {
		t.Errorf("tools = %v\nwant the registry's OpenAI rendering %v", b["tools"], jsonValue(t, rendered))
	}
	if b["model"] != testModel || b["stream"] != true || b["tool_choice"] != "auto" {
		t.Errorf("model %v stream %v tool_choice %v, want %s, true, auto", b["model"], b["stream"], b["tool_choice"], testModel)
	}
	if want := map[string]any{"include_usage": true}; !reflect.DeepEqual(b["stream_options"], want) {
		t.Errorf("stream_options = %v, want %v so that usage comes in the last chunk", b["stream_options"], want)
	}
	want := []any{
		map[string]any{"role": "system", "content": "You answer from the knowledge base."},
		map[string]any{"role": "user", "content": "hello"},
	}
	if !reflect.DeepEqual(b["messages"], want) {
		t.Errorf("messages = %v, want %v", b["messages"], want)
	}
}

func TestStreamSendsTheToolChoiceSetting(t *testing.T) {
	decls := []transport.ToolDecl{{Name: "finish", Description: "End.", Parameters: map[string]any{"type": "object"}}}
	for _, choice := range []string{openaitext.ToolChoiceRequired, openaitext.ToolChoiceNone} {
		brain := fo.NewScript(fo.Fixed(fo.TextReply("ok", 1)))
		_, base := startFake(t, brain, fo.Options{})
		answer(t, newModel(t, base, "", openaitext.Options{ToolChoice: choice}),
			transport.TextRequest{History: hello.History, Tools: decls})
		if got := brain.Requests()[0].ToolChoiceString(); got != choice {
			t.Errorf("tool_choice = %q, want %q", got, choice)
		}
	}
	if _, err := openaitext.New(openaitext.NewClient(openaitext.ClientConfig{}), testModel, openaitext.Options{ToolChoice: "sometimes"}); err == nil {
		t.Error("New accepted tool choice \"sometimes\"")
	}
}

func TestStreamWithoutSystemOrToolsSendsNeither(t *testing.T) {
	m, brain := scripted(t, fo.TextReply("Hi.", 1))
	answer(t, m, hello)
	b := body(t, brain.Requests()[0])
	for _, key := range []string{"tools", "tool_choice"} {
		if _, ok := b[key]; ok {
			t.Errorf("request has %s = %v without tools (the API refuses tool_choice without tools)", key, b[key])
		}
	}
	if msgs := b["messages"].([]any); len(msgs) != 1 {
		t.Errorf("messages = %v, want the user message alone", msgs)
	}
}

// toolCallIDs lists the ids of an assistant message's tool_calls.
func toolCallIDs(m fo.Message) []string {
	var ids []string
	for _, c := range m.ToolCalls {
		ids = append(ids, c.ID)
	}
	return ids
}

func TestCallIDsStayTheSameWhenTheHistoryIsReplayed(t *testing.T) {
	m, brain := scripted(t,
		fo.CallReply(fo.Call{ID: "call_model_1", Name: "kb_search", Args: `{"query":"refunds"}`},
			fo.Call{Name: "kb_get", Args: `{"id":"returns"}`}),
		fo.TextReply("Refunds take five days.", 1))
	_, end := answer(t, m, hello)
	if len(end.Calls) != 2 {
		t.Fatalf("calls = %+v", end.Calls)
	}
	minted := end.Calls[1].ID
	history := append(append([]transport.Entry(nil), hello.History...),
		transport.Entry{Role: transport.RoleModel, Calls: end.Calls},
		transport.Entry{Role: transport.RoleTool, Results: []transport.FunctionResult{
			{ID: "call_model_1", Name: "kb_search", Response: map[string]any{"output": map[string]any{"results": []any{}}}},
			{ID: minted, Name: "kb_get", Response: map[string]any{"error": map[string]any{"type": "NOT_FOUND", "message": "no such document"}}},
		}})
	answer(t, m, transport.TextRequest{History: history})

	msgs := brain.Requests()[1].Messages
	if len(msgs) != 4 || msgs[1].Role != "assistant" || msgs[2].Role != "tool" || msgs[3].Role != "tool" {
		t.Fatalf("messages = %+v, want user, assistant with calls, two tool messages", msgs)
	}
	if ids := toolCallIDs(msgs[1]); !reflect.DeepEqual(ids, []string{"call_model_1", minted}) {
		t.Errorf("replayed call ids = %q, want the model's id unchanged and the minted one %q", ids, minted)
	}
	if msgs[2].ToolCallID != "call_model_1" || msgs[3].ToolCallID != minted {
		t.Errorf("tool messages answer %q and %q", msgs[2].ToolCallID, msgs[3].ToolCallID)
	}
	if got := msgs[1].ToolCalls[0].Function; got.Name != "kb_search" || got.Arguments != `{"query":"refunds"}` {
		t.Errorf("replayed call = %+v", got)
	}
	if string(msgs[2].Content) != `{"output":{"results":[]}}` || string(msgs[3].Content) != `{"error":{"message":"no such document","type":"NOT_FOUND"}}` {
		t.Errorf("tool contents = %s / %s, want the responses as JSON", msgs[2].Content, msgs[3].Content)
	}
}

func TestHistoryIsSentSoThatEveryCallHasExactlyOneResult(t *testing.T) {
	result := func(id string) transport.FunctionResult {
		return transport.FunctionResult{ID: id, Name: "kb_search", Response: map[string]any{"output": id}}
	}
	history := []transport.Entry{
		{Role: transport.RoleUser, Text: "first"},
		// A call from a Gemini turn, with the ID the session invented.
		{Role: transport.RoleModel, Text: "Searching.", Calls: []transport.FunctionCall{
			{ID: "c1-1-0", Name: "kb_search", Args: map[string]any{"query": "a"}, Synthetic: true},
			{ID: "c1-1-1", Name: "kb_search", Args: map[string]any{"query": "b"}, Synthetic: true}}},
		{Role: transport.RoleTool, Results: []transport.FunctionResult{result("c1-1-0"), result("stray")}},
		{Role: transport.RoleModel, Text: "Found it."},
		{Role: transport.RoleTool, Results: []transport.FunctionResult{result("orphan")}},
		{Role: transport.RoleUser, Text: "second"},
		// Calls without IDs, and a call whose arguments were unreadable.
		{Role: transport.RoleModel, Calls: []transport.FunctionCall{
			{Name: "kb_search", Args: map[string]any{"query": "c"}},
			{Name: "kb_search", ArgsError: "arguments are not valid JSON"}}},
		{Role: transport.RoleTool, Results: []transport.FunctionResult{result(""), result("")}},
		{Role: transport.RoleUser, Text: "third"},
	}
	m, brain := scripted(t, fo.TextReply("ok", 1))
	answer(t, m, transport.TextRequest{History: history}) // the fake refuses unpaired calls and results with a 400

	var got []string
	for _, msg := range brain.Requests()[0].Messages {
		s := msg.Role
		switch {
		case msg.Role == "tool":
			s += "(" + msg.ToolCallID + ")=" + string(msg.Content)
		case len(msg.ToolCalls) > 0:
			s += "["
			for _, c := range msg.ToolCalls {
				s += c.ID + ":" + c.Function.Arguments + " "
			}
			s += "]" + string(msg.Content)
		default:
			s += ":" + string(msg.Content)
		}
		got = append(got, s)
	}
	want := []string{
		"user:first",
		`assistant[c1-1-0:{"query":"a"} c1-1-1:{"query":"b"} ]Searching.`,
		`tool(c1-1-0)={"output":"c1-1-0"}`,
		`tool(c1-1-1)={"error":{"type":"INTERNAL","message":"This call got no result.","retryable":false}}`,
		"assistant:Found it.",
		"user:second",
		`assistant[call_6_0:{"query":"c"} call_6_1:{} ]`,
		`tool(call_6_0)={"output":""}`,
		`tool(call_6_1)={"output":""}`,
		"user:third",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("messages:\n%q\nwant\n%q", got, want)
	}
}
