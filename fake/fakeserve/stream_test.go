package fakeserve

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestSplitTextKeepsEveryCharacter(t *testing.T) {
	cases := []struct {
		text   string
		pieces int
		want   int
	}{
		{"", 3, 1},
		{"a", 3, 1},
		{"abc", 5, 3},
		{"The quick brown fox jumps over the lazy dog", 4, 4},
		{"naïve café déjà vu", 3, 3},
		{"one", 0, 1},
	}
	for _, tc := range cases {
		parts := SplitText(tc.text, tc.pieces)
		if len(parts) != tc.want || strings.Join(parts, "") != tc.text {
			t.Errorf("SplitText(%q, %d) = %q, want %d parts joining to the text", tc.text, tc.pieces, parts, tc.want)
		}
		for _, p := range parts {
			if p == "" && tc.text != "" || !utf8.ValidString(p) {
				t.Errorf("SplitText(%q, %d) has a bad part %q", tc.text, tc.pieces, p)
			}
		}
	}
}

func TestSendChunksSendsEachChunkAsADataEventInOrder(t *testing.T) {
	rec := httptest.NewRecorder()
	sse, err := OpenSSE(rec, "text/event-stream")
	if err != nil {
		t.Fatal(err)
	}
	open := make(chan struct{})
	close(open)
	pace := func(string) Pace { return Pace{Gate: open} }
	build := func(s string) ([]byte, error) { return []byte(`{"t":"` + s + `"}`), nil }
	if err := SendChunks(t.Context(), sse, []string{"a", "b"}, pace, build); err != nil {
		t.Fatal(err)
	}
	if got, want := rec.Body.String(), "data: {\"t\":\"a\"}\n\ndata: {\"t\":\"b\"}\n\n"; got != want {
		t.Errorf("body = %q, want %q", got, want)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type = %q", ct)
	}
}

func TestSendChunksHoldsAGatedChunkUntilTheClientGoes(t *testing.T) {
	rec := httptest.NewRecorder()
	sse, err := OpenSSE(rec, "text/event-stream")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	never := make(chan struct{})
	pace := func(s string) Pace {
		if s == "held" {
			return Pace{Gate: never}
		}
		return Pace{}
	}
	build := func(s string) ([]byte, error) { return []byte(s), nil }
	err = SendChunks(ctx, sse, []string{"first", "held"}, func(s string) Pace {
		if s == "held" {
			cancel() // the client goes while the second chunk waits for its gate
		}
		return pace(s)
	}, build)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if got := rec.Body.String(); got != "data: first\n\n" {
		t.Errorf("body = %q, want only the first chunk", got)
	}
}
