package openaitext_test

import (
	"errors"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	fo "github.com/turnstile-gw/turnstile/fake/fakeopenai"
	"github.com/turnstile-gw/turnstile/internal/texttest"
	"github.com/turnstile-gw/turnstile/transport"
)

func TestStreamYieldsTextDeltasInOrderThenFinishReasonAndUsage(t *testing.T) {
	reply := fo.TextReply("Refunds take five business days.", 3)
	reply.Usage = &fo.Usage{PromptTokens: 42, CompletionTokens: 7}
	m, _ := scripted(t, reply)
	chunks, end := answer(t, m, hello)

	var texts []string
	for i, c := range chunks {
		if c.Text != "" {
			texts = append(texts, c.Text)
		}
		if i < len(chunks)-1 && (c.FinishReason != "" || c.Usage != nil) {
			t.Errorf("chunk %d = %+v: finish reason and usage belong to the last chunk only", i, c)
		}
	}
	if want := []string{"Refunds ", "take five ", "business days."}; !slices.Equal(texts, want) {
		t.Errorf("deltas = %q, want %q", texts, want)
	}
	if end.FinishReason != "stop" || end.Usage == nil || *end.Usage != (transport.Usage{InputTokens: 42, OutputTokens: 7}) {
		t.Errorf("last chunk = %+v (usage %+v), want finish reason stop and the usage the server reported", end, end.Usage)
	}
}

var uuidPattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func TestStreamAnnouncesACallByNameBeforeItsArgumentsArrive(t *testing.T) {
	release := make(chan struct{})
	reply := fo.CallReply(fo.Call{ID: "call_abc", Name: "kb_search", Pieces: []string{`{"query":`, `"refunds","limit":3}`}})
	reply.Chunks[1].Wait = release // the arguments wait until the test has seen the announcement
	m, _ := scripted(t, reply)

	var chunks []transport.Chunk
	for c, err := range m.Stream(testContext(t), hello) {
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
		if len(chunks) == 0 {
			if want := []transport.FunctionCall{{ID: "call_abc", Name: "kb_search"}}; !reflect.DeepEqual(c.Started, want) || c.Calls != nil {
				t.Fatalf("first chunk = %+v, want only the announcement %+v", c, want)
			}
			close(release)
		}
		chunks = append(chunks, c)
	}
	end := chunks[len(chunks)-1]
	want := []transport.FunctionCall{{ID: "call_abc", Name: "kb_search", Args: map[string]any{"query": "refunds", "limit": float64(3)}}}
	if len(chunks) != 2 || !reflect.DeepEqual(end.Calls, want) || end.Started != nil || end.FinishReason != "tool_calls" {
		t.Fatalf("chunks = %+v, want the announcement then %+v with finish reason tool_calls", chunks, want)
	}
}

func TestStreamAssemblesArgumentsCutInsideStringsAndEscapes(t *testing.T) {
	pieces := []string{`{"query":"caf\u00`, `e9 \`, `"bio\`, `" \`, `\ beans","note":"\`, `n"}`}
	m, _ := scripted(t, fo.CallReply(fo.Call{ID: "call_1", Name: "kb_search", Pieces: pieces}))
	_, end := answer(t, m, hello)
	want := map[string]any{"query": `café "bio" \ beans`, "note": "\n"}
	if len(end.Calls) != 1 || end.Calls[0].ArgsError != "" || !reflect.DeepEqual(end.Calls[0].Args, want) {
		t.Fatalf("calls = %+v, want one call with args %q", end.Calls, want)
	}
}

func TestStreamAssemblesInterleavedCallsByIndex(t *testing.T) {
	m, _ := scripted(t, fo.InterleavedCallReply(
		fo.Call{ID: "call_a", Name: "kb_search", Args: `{"query":"refund window","limit":2}`},
		fo.Call{ID: "call_b", Name: "kb_get", Args: `{"id":"returns-and-refunds"}`},
		fo.Call{ID: "call_c", Name: "finish", Args: `{}`, Pieces: []string{"{", "}"}},
	))
	chunks, end := answer(t, m, hello)
	var started []string
	for _, c := range chunks {
		for _, s := range c.Started {
			started = append(started, s.ID+":"+s.Name)
		}
	}
	if want := []string{"call_a:kb_search", "call_b:kb_get", "call_c:finish"}; !slices.Equal(started, want) {
		t.Errorf("announced %q, want %q", started, want)
	}
	want := []transport.FunctionCall{
		{ID: "call_a", Name: "kb_search", Args: map[string]any{"query": "refund window", "limit": float64(2)}},
		{ID: "call_b", Name: "kb_get", Args: map[string]any{"id": "returns-and-refunds"}},
		{ID: "call_c", Name: "finish", Args: map[string]any{}},
	}
	if !reflect.DeepEqual(end.Calls, want) {
		t.Errorf("calls = %+v, want %+v", end.Calls, want)
	}
}

func TestStreamReadsFragmentsOfSeveralCallsInOneChunk(t *testing.T) {
	m, _ := scripted(t, fo.Reply{Chunks: []fo.Chunk{
		{Calls: []fo.CallDelta{{Index: 1, ID: "call_y", Name: "kb_get"}, {Index: 0, ID: "call_x", Name: "kb_search"}}},
		{Calls: []fo.CallDelta{{Index: 0, Args: `{"query":`}, {Index: 1, Args: `{"id":"a"}`}}},
		{Calls: []fo.CallDelta{{Index: 0, Args: `"x"}`}}},
		{FinishReason: "tool_calls"},
	}})
	_, end := answer(t, m, hello)
	want := []transport.FunctionCall{
		{ID: "call_x", Name: "kb_search", Args: map[string]any{"query": "x"}},
		{ID: "call_y", Name: "kb_get", Args: map[string]any{"id": "a"}},
	}
	if !reflect.DeepEqual(end.Calls, want) {
		t.Errorf("calls = %+v, want %+v in index order", end.Calls, want)
	}
}

func TestStreamGivesCallsWithoutIDsAUUIDThatStaysFromStartToEnd(t *testing.T) {
	m, _ := scripted(t, fo.CallReply(
		fo.Call{Name: "kb_search", Args: `{"query":"a"}`},
		fo.Call{Name: "kb_search", Args: `{"query":"b"}`},
	))
	chunks, end := answer(t, m, hello)
	var started []transport.FunctionCall
	for _, c := range chunks {
		started = append(started, c.Started...)
	}
	if len(started) != 2 || len(end.Calls) != 2 {
		t.Fatalf("announced %+v, delivered %+v, want two of each", started, end.Calls)
	}
	for i, c := range end.Calls {
		if !uuidPattern.MatchString(c.ID) || c.ID != started[i].ID || c.Synthetic {
			t.Errorf("call %d id %q (announced as %q, synthetic %v), want one UUID, the same throughout, not synthetic",
				i, c.ID, started[i].ID, c.Synthetic)
		}
	}
	if end.Calls[0].ID == end.Calls[1].ID {
		t.Errorf("both calls got id %q", end.Calls[0].ID)
	}
}

func TestStreamKeepsAnIDThatArrivesAfterTheName(t *testing.T) {
	m, _ := scripted(t, fo.Reply{Chunks: []fo.Chunk{
		{Calls: []fo.CallDelta{{Index: 0, Name: "kb_get"}}},
		{Calls: []fo.CallDelta{{Index: 0, ID: "call_late", Args: `{"id":"a"}`}}},
		{FinishReason: "tool_calls"},
	}})
	chunks, end := answer(t, m, hello)
	announced := []transport.FunctionCall{{ID: "call_late", Name: "kb_get"}}
	if len(chunks) != 2 || !reflect.DeepEqual(chunks[0].Started, announced) || len(end.Calls) != 1 || end.Calls[0].ID != "call_late" {
		t.Errorf("chunks = %+v, want the call announced with the model's id call_late once it arrived, then delivered", chunks)
	}
}

func TestStreamMarksCallsWithUnreadableArgumentsWithoutQuotingThem(t *testing.T) {
	m, _ := scripted(t, fo.CallReply(
		fo.Call{ID: "c1", Name: "kb_search", Args: `{"query": "secret-cut`},
		fo.Call{ID: "c2", Name: "kb_search", Args: `["secret-array"]`},
		fo.Call{ID: "c3", Name: "kb_search", Args: `{"query":"ok"}{"query":"secret-twice"}`},
		fo.Call{ID: "c4", Name: "kb_get", Args: `{"id":"fine"}`},
		fo.Call{ID: "c5", Name: "finish", Args: ``},
	))
	_, end := answer(t, m, hello)
	if len(end.Calls) != 5 {
		t.Fatalf("calls = %+v, want all five delivered", end.Calls)
	}
	for _, c := range end.Calls[:3] {
		if c.ArgsError == "" || c.Args != nil || strings.Contains(c.ArgsError, "secret") {
			t.Errorf("call %s = %+v, want no args and an error that does not quote them", c.ID, c)
		}
	}
	if c := end.Calls[3]; c.ArgsError != "" || c.Args["id"] != "fine" {
		t.Errorf("valid sibling = %+v", c)
	}
	if c := end.Calls[4]; c.ArgsError != "" || c.Args == nil || len(c.Args) != 0 {
		t.Errorf("call with empty arguments = %+v, want {} (some servers send nothing for no arguments)", c)
	}
}

func TestStreamFinishReasons(t *testing.T) {
	text := func(reason string) fo.Reply {
		return fo.Reply{Chunks: []fo.Chunk{{Text: "Partial answer"}, {FinishReason: reason}}}
	}
	cases := []struct {
		name  string
		reply fo.Reply
		is    error // nil: the answer ends properly
	}{
		{"stop ends the answer", text("stop"), nil},
		{"tool_calls ends the answer", fo.CallReply(fo.Call{ID: "c", Name: "finish", Args: "{}"}), nil},
		{"length is truncated", text("length"), transport.ErrTruncated},
		{"content_filter is refused", text("content_filter"), transport.ErrRefused},
		{"no finish reason before [DONE] is truncated", fo.Reply{Chunks: []fo.Chunk{{Text: "Half an answ"}}}, transport.ErrTruncated},
		{"a dropped connection is truncated", fo.Reply{Chunks: []fo.Chunk{{Text: "Half an answ"}}, Cut: true}, transport.ErrTruncated},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, _ := scripted(t, tc.reply)
			chunks, err := texttest.Collect(t, testContext(t), m, hello)
			if tc.is == nil {
				if err != nil || chunks[len(chunks)-1].FinishReason == "" {
					t.Fatalf("stream ended with %v after %+v, want a finished answer", err, chunks)
				}
				return
			}
			if !errors.Is(err, tc.is) {
				t.Fatalf("error = %v, want %v", err, tc.is)
			}
			if errors.Is(err, transport.ErrRefused) && errors.Is(err, transport.ErrTruncated) {
				t.Errorf("error %v is both refused and truncated", err)
			}
			for _, c := range chunks {
				if c.FinishReason != "" || c.Calls != nil {
					t.Errorf("chunk %+v before the error looks like an end of answer", c)
				}
			}
		})
	}
}

func TestStreamWithoutAUsageChunkReportsNoUsage(t *testing.T) {
	m, _ := scripted(t, fo.Reply{Chunks: []fo.Chunk{{Text: "Hi."}, {FinishReason: "stop"}}, Cut: true})
	_, end := answer(t, m, hello)
	if end.FinishReason != "stop" || end.Usage != nil {
		t.Errorf("last chunk = %+v, want stop without usage (the server sent none)", end)
	}
}

func TestStreamAnnouncesAWholeCallWithoutIDTogetherWithItsEnd(t *testing.T) {
	// Some servers send a call whole, in one fragment, and without an id.
	m, _ := scripted(t, fo.Reply{Chunks: []fo.Chunk{
		{Calls: []fo.CallDelta{{Index: 0, Name: "kb_get", Args: `{"id":"a"}`}}},
		{FinishReason: "stop"},
	}})
	chunks, end := answer(t, m, hello)
	if len(chunks) != 1 || len(end.Started) != 1 || len(end.Calls) != 1 {
		t.Fatalf("chunks = %+v, want one final chunk announcing and delivering the call", chunks)
	}
	if id := end.Started[0].ID; !uuidPattern.MatchString(id) || end.Calls[0].ID != id || end.Calls[0].Args["id"] != "a" {
		t.Errorf("announced %+v, delivered %+v, want the same minted id and the arguments", end.Started, end.Calls)
	}
}

func TestStreamAssemblyStartsAfreshWithEachRequest(t *testing.T) {
	m, _ := scripted(t,
		fo.CallReply(fo.Call{ID: "call_1", Name: "kb_search", Args: `{"query":"first"}`}),
		fo.CallReply(fo.Call{ID: "call_2", Name: "kb_get", Args: `{"id":"second"}`}))
	answer(t, m, hello)
	_, end := answer(t, m, hello)
	want := []transport.FunctionCall{{ID: "call_2", Name: "kb_get", Args: map[string]any{"id": "second"}}}
	if !reflect.DeepEqual(end.Calls, want) {
		t.Errorf("second request's calls = %+v, want only its own %+v", end.Calls, want)
	}
}
