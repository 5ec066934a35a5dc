package session

import (
	"strings"
	"testing"
	"time"

	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/transport"
)

func TestFitContextKeepsTheCurrentTurnAndWholeRounds(t *testing.T) {
	big := strings.Repeat("x", 4000)
	h := []transport.Entry{user(big), modelCall("1"), toolResult("1"), model(big), user(big), model(big), user("now")}
	sizes := make([]int, len(h))
	for i, e := range h {
		_, sizes[i] = entrySize(e)
	}
	kept, dropped := fitContext(h, sizes, 2100) // about two big entries
	if !dropped || labels(kept)[0] != "user:"+big || len(kept) != 3 {
		t.Fatalf("kept %d entries starting %q, dropped %v; want the last user entry with the turn before it", len(kept),
			labels(kept)[0][:8], dropped)
	}
	kept, dropped = fitContext(h, sizes, 10)
	if !dropped || len(kept) != 1 || kept[0].Text != "now" {
		t.Fatalf("a budget below the current turn: kept %q, want it alone", labels(kept))
	}
	if kept, dropped := fitContext(h, sizes, 1<<20); dropped || len(kept) != len(h) {
		t.Fatalf("a large budget dropped entries")
	}
}

// The context budget is in seed 004's tokens, ceil(characters / 4): a
// non-ASCII history is as big as its characters, not its UTF-8 bytes, and
// one character over four tokens' worth is a token more.
func TestFitContextCountsCharactersAndRoundsUp(t *testing.T) {
	s := &state{now: time.Now}
	s.append([]transport.Entry{user(strings.Repeat("你好", 500)), model(strings.Repeat("wörld ", 200)), user("now")})
	h, chars := s.historyAndChars()
	_, bytes := s.historyAndSizes()
	total, totalBytes := 0, 0
	for i := range h {
		total, totalBytes = total+chars[i], totalBytes+bytes[i]
	}
	budget := (total + 3) / 4
	if totalBytes/4 <= budget {
		t.Fatalf("%d bytes for %d characters: the history is too ASCII to prove anything", totalBytes, total)
	}
	if kept, dropped := fitContext(h, chars, budget); dropped || len(kept) != len(h) {
		t.Errorf("a history of %d characters (%d tokens, %d bytes) dropped entries at a budget of %d tokens",
			total, budget, totalBytes, budget)
	}
	// Pad to exactly 4 × budget + 1 characters for a larger budget: ceil
	// makes that one token over it (rounding down, it fitted).
	_, overhead := entrySize(model("é"))
	overhead-- // the entry around its text
	budget += overhead
	s.append([]transport.Entry{model(strings.Repeat("é", 4*budget+1-total-overhead))})
	h, chars = s.historyAndChars()
	total = 0
	for _, n := range chars {
		total += n
	}
	if total != 4*budget+1 {
		t.Fatalf("padded history is %d characters, want %d", total, 4*budget+1)
	}
	if _, dropped := fitContext(h, chars, budget); !dropped {
		t.Errorf("%d characters (%d tokens rounded up) fit a budget of %d tokens", total, (total+3)/4, budget)
	}
}

func TestStateBoundsHistoryBytesButKeepsTheCurrentTurn(t *testing.T) {
	trimmed := 0
	s := &state{historyMax: 100, historyMaxBytes: 10000, now: time.Now, trimmed: func(n int) { trimmed += n }}
	big := strings.Repeat("y", 3000)
	for range 5 {
		s.append([]transport.Entry{user(big), model(big)})
	}
	h := s.historyCopy()
	size := 0
	for _, e := range h {
		n, _ := entrySize(e)
		size += n
	}
	if size > 10000 || len(h) != 2 || h[0].Role != transport.RoleUser || trimmed != 8 {
		t.Fatalf("history of %d entries, %d bytes, %d trimmed; want the newest turn within 10000", len(h), size, trimmed)
	}
	s.append([]transport.Entry{user(strings.Repeat("z", 20000))})
	if h := s.historyCopy(); len(h) != 1 || len(h[0].Text) != 20000 {
		t.Fatalf("an entry over the bound: %d entries; want it kept alone", len(h))
	}
}

func TestNewestTurnsTakesWholeTurnsWithinCountAndBytes(t *testing.T) {
	var items []protocol.HistoryItem
	for turn := 1; turn <= 10; turn++ {
		items = append(items, protocol.HistoryItem{Role: "user", Text: strings.Repeat("u", 100), Turn: turn},
			protocol.HistoryItem{Role: "model", Text: strings.Repeat("m", 100), Turn: turn})
	}
	got, cut := newestTurns(items, 5, 1<<20)
	if !cut || len(got) != 4 || got[0].Turn != 9 || got[3].Turn != 10 {
		t.Fatalf("count 5: %d items from turn %d, cut %v; want turns 9 and 10 whole", len(got), got[0].Turn, cut)
	}
	got, cut = newestTurns(items, 0, 700)
	if !cut || len(got) != 4 || got[0].Turn != 9 {
		t.Fatalf("700 bytes: %d items, cut %v; want the two newest turns", len(got), cut)
	}
	if got, cut := newestTurns(items, 0, 1<<20); cut || len(got) != 20 {
		t.Fatalf("no bound: %d items, cut %v", len(got), cut)
	}
	// An entry too large for its share of the budget is cut, not dropped.
	huge := []protocol.HistoryItem{{Role: "model", Text: strings.Repeat("é", 5000), Turn: 1}}
	got, _ = newestTurns(huge, 0, 4000)
	if len(got) != 1 || !got[0].Truncated || itemSize(got[0]) > 1000 || !strings.HasPrefix(huge[0].Text, got[0].Text) {
		t.Fatalf("a huge entry: %d items, truncated %v, %d bytes", len(got), got[0].Truncated, itemSize(got[0]))
	}
}
