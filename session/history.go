package session

import (
	"encoding/json"
	"math"
	"slices"
	"unicode/utf8"

	"github.com/turnstile-gw/turnstile/metrics"
	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/store"
	"github.com/turnstile-gw/turnstile/transport"
)

// trimHistory keeps at most max newest entries and makes the result start
// at a user text entry, so that a model never sees a tool result or a
// function call whose other half was trimmed away.
func trimHistory(h []transport.Entry, max int) []transport.Entry {
	start, _ := historyStart(h, nil, max, 0)
	return h[start:]
}

// historyStart is where a bounded history begins: after dropping entries
// beyond max (0: no bound), then the oldest while the sizes of the rest add
// up to more than maxSize (0: no bound; never the last user entry, the
// current turn), the first user entry left. bySize reports whether the
// size bound dropped anything.
func historyStart(h []transport.Entry, sizes []int, max, maxSize int) (start int, bySize bool) {
	if max > 0 && len(h) > max {
		start = len(h) - max
	}
	if maxSize > 0 {
		lastUser := len(h)
		for i := len(h) - 1; i >= start; i-- {
			if h[i].Role == transport.RoleUser {
				lastUser = i
				break
			}
		}
		total := 0
		for _, n := range sizes[start:] {
			total += n
		}
		for total > maxSize && start < lastUser {
			total -= sizes[start]
			start++
			bySize = true
		}
	}
	// A profile's greeting opens the conversation (greeting.go): a start
	// too, never sent to a model as an entry.
	for start < len(h) && h[start].Role != transport.RoleUser && !(start == 0 && isGreeting(h[0])) {
		start++
	}
	return start, bySize
}

// entrySize is an entry's size as the store keeps it (its JSON), in bytes,
// what the history's byte bounds count, and in characters, what the
// context's token estimate counts (one encoding for both).
func entrySize(e transport.Entry) (bytes, chars int) {
	b, err := store.MarshalJSON(e)
	if err != nil {
		return len(e.Text), utf8.RuneCountInString(e.Text)
	}
	return len(b), utf8.RuneCount(b)
}

// fitContext keeps the newest history that fits budget estimated tokens
// (ceil(JSON characters / 4), as the session-init estimate counts; chars
// are the entries' JSON sizes in characters), always the last user entry
// and what follows, starting at a user entry. dropped is whether anything
// was left out.
func fitContext(h []transport.Entry, chars []int, budget int) (kept []transport.Entry, dropped bool) {
	total := 0
	for _, n := range chars {
		total += n
	}
	if metrics.EstimateTokens(total) <= budget {
		return h, false
	}
	// ceil(n/4) <= budget exactly when n <= 4 × budget.
	start, _ := historyStart(h, chars, 0, max(budget, 1)*4)
	return h[start:], start > 0
}

// historyItems is the text of the conversation as session.ready and
// history answers show it, with each entry's turn number.
func historyItems(h []transport.Entry) []protocol.HistoryItem {
	var out []protocol.HistoryItem
	for _, e := range h {
		switch {
		case e.Role == transport.RoleUser:
			out = append(out, protocol.HistoryItem{Role: "user", Text: e.Text, Turn: e.Turn, Kind: e.Kind})
		case e.Role == transport.RoleModel && e.Text != "" && len(e.Calls) == 0:
			out = append(out, protocol.HistoryItem{Role: "model", Text: e.Text, Turn: e.Turn, Kind: e.Kind})
		}
	}
	return out
}

// minItemBytes is the least an item is cut to, so that a tight budget
// still shows the start of each entry.
const minItemBytes = 256

// newestTurns picks the newest whole turns of items (a turn is never
// split: a client asks for older ones with the oldest turn it holds), at
// most maxItems of them (0: no bound; the newest turn is taken whatever its
// count) and at most budget bytes of JSON; an item larger than a quarter of
// the budget is cut (Truncated). cut reports whether older items were left
// out. items is not changed.
func newestTurns(items []protocol.HistoryItem, maxItems, budget int) (out []protocol.HistoryItem, cut bool) {
	itemCap := max(budget/4, minItemBytes)
	end, used, count := len(items), 0, 0
	var picked []protocol.HistoryItem // newest first
	for end > 0 {
		g := end - 1
		for g > 0 && items[g-1].Turn == items[end-1].Turn {
			g--
		}
		size := 0
		group := make([]protocol.HistoryItem, 0, end-g)
		for _, it := range items[g:end] {
			it, n := fitItem(it, itemCap)
			group = append(group, it)
			size += n
		}
		if (maxItems > 0 && count > 0 && count+len(group) > maxItems) || used+size > budget {
			break
		}
		for i := len(group) - 1; i >= 0; i-- {
			picked = append(picked, group[i])
		}
		used, count, end = used+size, count+len(group), g
	}
	out = make([]protocol.HistoryItem, len(picked))
	for i, it := range picked {
		out[len(picked)-1-i] = it
	}
	return out, end > 0
}

// fitItem cuts an item's text until its JSON (and a separating comma) is
// at most limit bytes, and returns it with that size.
func fitItem(it protocol.HistoryItem, limit int) (protocol.HistoryItem, int) {
	n := itemSize(it)
	for n > limit && it.Text != "" {
		keep := len(it.Text) - (n - limit) - 1
		if keep < 0 {
			keep = 0
		}
		for keep > 0 && !utf8.RuneStart(it.Text[keep]) {
			keep--
		}
		it.Text, it.Truncated = it.Text[:keep], true
		n = itemSize(it)
	}
	return it, n
}

func itemSize(it protocol.HistoryItem) int {
	b, _ := json.Marshal(it)
	return len(b) + 1
}

// historyOverhead is what a history answer or session.ready adds around
// its entries, and more.
const historyOverhead = 128

// historyPage answers a history request: the newest whole turns before
// turn before, at most limit entries, cut to fit the send queue.
func (s *session) historyPage(before, limit int) {
	var older []protocol.HistoryItem
	for _, it := range historyItems(s.st.historyCopy()) {
		if it.Turn < before {
			older = append(older, it)
		}
	}
	want, _ := newestTurns(older, limit, math.MaxInt)
	short := false
	s.reply(func(budget int) protocol.Event {
		page, more := newestTurns(older, limit, budget-historyOverhead)
		short = len(page) < len(want) || slices.ContainsFunc(page, func(it protocol.HistoryItem) bool { return it.Truncated })
		if page == nil {
			page = []protocol.HistoryItem{}
		}
		return protocol.History{Entries: page, More: more}
	})
	if short {
		s.refused(limitHistoryPage, s.m.now())
	}
}
