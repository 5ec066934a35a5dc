package orchestrator

import (
	"bytes"
	"cmp"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// PlainTextMaxBytes bounds what PlainText returns, so an audio model gets
// a result it can take in at a glance rather than a document.
const PlainTextMaxBytes = 4096

// plainTruncated ends text that PlainText had to cut.
const plainTruncated = " … (truncated)"

// PlainText renders a tool result as compact plain text for audio models,
// which otherwise read JSON punctuation and key names aloud. Objects become
// "key: value" pairs ("title" and "name" first, then by key; underscores in
// keys become spaces), separated by ". " at the top level and ", " inside;
// arrays of plain values are joined with ", ", arrays of objects are
// numbered "1) …; 2) …"; null, blank strings and empty arrays or objects
// read "none" (a result that is nil altogether reads "ok", as the model is
// told for any result with no data); booleans read "yes"/"no". Shape's markers read as
// words: an array sentinel as "and K more not shown", a _truncated_json
// wrapper as "partial result: " and its text without JSON punctuation.
// The result is at most PlainTextMaxBytes bytes; longer text is cut on a
// word boundary and ends with "… (truncated)". String values have their
// whitespace collapsed and bare Markdown heading and bullet markers dropped.
func PlainText(data any) string {
	if data == nil {
		return "ok" // what the model is told for a result with no data
	}
	v := data
	if raw, err := json.Marshal(data); err == nil {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if dec.Decode(&v) != nil {
			v = string(raw)
		}
	}
	w := &plainWriter{limit: PlainTextMaxBytes + 1}
	w.value(v, 0)
	if m, ok := v.(map[string]any); ok && len(m) > 0 && !isTruncatedJSON(m) {
		w.endSentence()
	}
	return w.result()
}

// plainWriter accumulates text and stops accepting it past limit, so a
// large result costs no more than the text kept.
type plainWriter struct {
	b     strings.Builder
	limit int
}

func (w *plainWriter) full() bool { return w.b.Len() >= w.limit }

func (w *plainWriter) write(s string) {
	if room := w.limit - w.b.Len(); room > 0 {
		if len(s) > room {
			s = s[:room]
		}
		w.b.WriteString(s)
	}
}

func (w *plainWriter) endsSentence() bool {
	s := w.b.String()
	return strings.HasSuffix(s, ".") || strings.HasSuffix(s, "?") || strings.HasSuffix(s, "!")
}

func (w *plainWriter) endSentence() {
	if w.b.Len() > 0 && !w.endsSentence() {
		w.write(".")
	}
}

func (w *plainWriter) result() string {
	s := w.b.String()
	if len(s) <= PlainTextMaxBytes {
		return s
	}
	cut := PlainTextMaxBytes - len(plainTruncated)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	if sp := strings.LastIndexByte(s[:cut], ' '); sp > cut*3/4 {
		cut = sp
	}
	return strings.TrimRight(s[:cut], " ,;.") + plainTruncated
}

func (w *plainWriter) value(v any, depth int) {
	if w.full() {
		return
	}
	switch v := v.(type) {
	case nil:
		w.write("none")
	case bool:
		if v {
			w.write("yes")
		} else {
			w.write("no")
		}
	case json.Number:
		w.write(string(v))
	case string:
		if s := spokenText(v); s != "" {
			w.write(s)
		} else {
			w.write("none")
		}
	case []any:
		w.array(v, depth)
	case map[string]any:
		w.object(v, depth)
	default: // not reached: v comes from decoding JSON
		w.write("none")
	}
}

func (w *plainWriter) array(arr []any, depth int) {
	if len(arr) == 0 {
		w.write("none")
		return
	}
	composite := slices.ContainsFunc(arr, func(e any) bool {
		switch e.(type) {
		case []any:
			return true
		case map[string]any:
			return !isSentinel(e)
		}
		return false
	})
	for i, e := range arr {
		if w.full() {
			return
		}
		switch {
		case i == 0:
		case composite && w.endsSentence():
			w.write(" ")
		case composite:
			w.write("; ")
		default:
			w.write(", ")
		}
		if isSentinel(e) {
			w.write("and " + sentinelOmitted(e) + " more not shown")
			continue
		}
		if composite {
			w.write(strconv.Itoa(i+1) + ") ")
		}
		w.value(e, depth+1)
	}
}

func (w *plainWriter) object(obj map[string]any, depth int) {
	if len(obj) == 0 {
		w.write("none")
		return
	}
	if isTruncatedJSON(obj) {
		text, _ := obj["_truncated_json"].(string)
		w.write("partial result: " + stripJSONPunctuation(text) + " …")
		return
	}
	sep := ", "
	if depth == 0 {
		sep = ". "
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if pa, pb := keyPriority(a), keyPriority(b); pa != pb {
			return pa - pb
		}
		return cmp.Compare(a, b)
	})
	for i, k := range keys {
		if w.full() {
			return
		}
		switch {
		case i == 0:
		case depth == 0 && w.endsSentence():
			w.write(" ") // the value already ended its sentence
		default:
			w.write(sep)
		}
		w.write(spokenKey(k) + ": ")
		w.value(obj[k], depth+1)
	}
}

// keyPriority puts the members a listener needs first in front.
func keyPriority(k string) int {
	switch strings.ToLower(k) {
	case "title":
		return 0
	case "name":
		return 1
	}
	return 2
}

func spokenKey(k string) string {
	k = strings.NewReplacer("_", " ", "-", " ").Replace(k)
	if k = collapseSpace(k); k == "" {
		return "value"
	}
	return k
}

func isSentinel(v any) bool {
	m, ok := v.(map[string]any)
	if !ok || len(m) != 2 {
		return false
	}
	t, _ := m["_truncated"].(bool)
	_, hasOmitted := m["omitted"]
	return t && hasOmitted
}

func sentinelOmitted(v any) string {
	m, _ := v.(map[string]any)
	switch n := m["omitted"].(type) {
	case json.Number:
		return string(n)
	case int:
		return strconv.Itoa(n)
	}
	return "some"
}

func isTruncatedJSON(m map[string]any) bool {
	_, ok := m["_truncated_json"].(string)
	return ok
}

// stripJSONPunctuation turns a fragment of JSON text into words: quotes,
// braces and brackets go, colons and commas keep their role as separators.
func stripJSONPunctuation(s string) string {
	s = strings.NewReplacer(`\"`, "'", `\n`, " ", `\t`, " ", `"`, "", "{", " ", "}", " ", "[", " ", "]", " ",
		",", ", ", ":", ": ").Replace(s)
	return strings.ReplaceAll(collapseSpace(s), " ,", ",")
}

// spokenText is a string value with its whitespace collapsed and bare
// Markdown heading and bullet markers ("#", "##", "*") dropped, since a
// voice would read them out.
func spokenText(s string) string {
	words := strings.Fields(s)
	kept := words[:0]
	for _, w := range words {
		if strings.Trim(w, "#") != "" && w != "*" {
			kept = append(kept, w)
		}
	}
	return strings.Join(kept, " ")
}

func collapseSpace(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
