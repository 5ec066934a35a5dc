package tools_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/turnstile-gw/turnstile/tools"
)

func TestCanonicalArgsForms(t *testing.T) {
	cases := []struct {
		name, in, want string
	}{
		{"empty input is the empty object", ``, `{}`},
		{"whitespace input is the empty object", " \n\t ", `{}`},
		{"null is the empty object", ` null `, `{}`},
		{"keys sorted and whitespace dropped", `{ "b" : 1 , "a" : [ 1 , 2 ] }`, `{"a":[1,2],"b":1}`},
		{"nested keys sorted", `{"z":{"y":true,"x":null},"a":{}}`, `{"a":{},"z":{"x":null,"y":true}}`},
		{"keys sort by bytes", `{"b":1,"B":2,"é":3,"a":4}`, `{"B":2,"a":4,"b":1,"é":3}`},
		{"last duplicate key wins", `{"a":1,"a":2}`, `{"a":2}`},
		{"1.0 is 1", `{"n":1.0}`, `{"n":1}`},
		{"1e0 is 1", `{"n":1e0}`, `{"n":1}`},
		{"10e-1 is 1", `{"n":10E-1}`, `{"n":1}`},
		{"1e2 is 100", `{"n":1e+2}`, `{"n":100}`},
		{"-0 is 0", `{"n":-0.0e5}`, `{"n":0}`},
		{"fraction keeps its digits", `{"n":0.50}`, `{"n":0.5}`},
		{"negative fraction", `{"n":-12.340}`, `{"n":-12.34}`},
		{"small fraction in plain digits", `{"n":1e-6}`, `{"n":0.000001}`},
		{"smaller fraction in exponent form", `{"n":1.5e-7}`, `{"n":1.5e-7}`},
		{"21-digit integer in plain digits", `{"n":1e20}`, `{"n":100000000000000000000}`},
		{"past 21 digits in exponent form", `{"n":1e21}`, `{"n":1e+21}`},
		{"integers beyond float64 stay exact", `{"n":12345678901234567891}`, `{"n":12345678901234567891}`},
		{"long mantissa in exponent form stays exact", `{"n":123456789012345678901234}`,
			`{"n":1.23456789012345678901234e+23}`},
		{"huge exponent is kept exactly", `{"n":2.5e400}`, `{"n":2.5e+400}`},
		{"escapes only what JSON requires", `{"s":"a\/b\u0041\u00e9\t\u0001\"\\<>&\u2028"}`,
			"{\"s\":\"a/bAé\\t\\u0001\\\"\\\\<>&\u2028\"}"},
		{"surrogate pair becomes UTF-8", `{"s":"\ud83d\ude00"}`, `{"s":"😀"}`},
		{"control characters get short escapes", `{"s":"\b\f\n\r"}`, `{"s":"\b\f\n\r"}`},
		{"invalid UTF-8 becomes U+FFFD", "{\"s\":\"a\xffb\"}", "{\"s\":\"a\uFFFDb\"}"},
		{"arrays keep their order", `{"a":[3,1,2,{"b":1,"a":2}]}`, `{"a":[3,1,2,{"a":2,"b":1}]}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tools.CanonicalArgs(json.RawMessage(tc.in))
			if err != nil {
				t.Fatalf("CanonicalArgs(%q): %v", tc.in, err)
			}
			if string(got) != tc.want {
				t.Errorf("CanonicalArgs(%q) = %s, want %s", tc.in, got, tc.want)
			}
		})
	}
}

func TestCanonicalArgsSameForKeyOrderWhitespaceAndNumberSpelling(t *testing.T) {
	spellings := []string{
		`{"query":"opening hours","limit":5,"filters":{"lang":"en","tags":["a","b"]}}`,
		`{"limit":5.0,"query":"opening hours","filters":{"tags":["a","b"],"lang":"en"}}`,
		"{\n  \"filters\": {\"tags\": [ \"a\" , \"b\" ], \"lang\": \"\\u0065n\"},\n  \"limit\": 5e0,\n  \"query\": \"opening hours\"\n}",
	}
	first, err := tools.CanonicalArgs(json.RawMessage(spellings[0]))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range spellings[1:] {
		got, err := tools.CanonicalArgs(json.RawMessage(s))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, first) {
			t.Errorf("CanonicalArgs(%s) = %s, want %s", s, got, first)
		}
	}
}

// A model's arguments arrive as a decoded map (numbers as float64); its
// canonical form must match the raw text the model meant.
func TestCanonicalArgsOfMarshalledMapMatchesRawText(t *testing.T) {
	raw, err := json.Marshal(map[string]any{"limit": float64(3), "query": "x", "ratio": 0.25})
	if err != nil {
		t.Fatal(err)
	}
	got, err := tools.CanonicalArgs(raw)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := tools.CanonicalArgs(json.RawMessage(`{"query":"x","ratio":25e-2,"limit":3.00}`))
	if !bytes.Equal(got, want) {
		t.Errorf("canonical of marshalled map = %s, want %s", got, want)
	}
}

func TestCanonicalArgsDifferentValuesDiffer(t *testing.T) {
	distinct := []string{
		`{}`,
		`{"n":1}`,
		`{"n":"1"}`,
		`{"n":1.5}`,
		`{"n":-1}`,
		`{"n":12345678901234567890}`,
		`{"n":12345678901234567891}`,
		`{"n":null}`,
		`{"n":false}`,
		`{"n":[]}`,
		`{"n":{}}`,
		`{"n":[1,2]}`,
		`{"n":[2,1]}`,
		`{"N":1}`,
		`{"n":1,"m":1}`,
		`{"q":"kb"}`,
		`{"q":"kb "}`,
		`{"q":"KB"}`,
	}
	seen := map[string]string{}
	for _, in := range distinct {
		got, err := tools.CanonicalArgs(json.RawMessage(in))
		if err != nil {
			t.Fatalf("CanonicalArgs(%s): %v", in, err)
		}
		if prev, dup := seen[string(got)]; dup {
			t.Errorf("%s and %s have the same canonical form %s", prev, in, got)
		}
		seen[string(got)] = in
	}
}

func TestCanonicalArgsRejectsNonObjectsAndBadJSON(t *testing.T) {
	bad := []string{
		`[1,2]`,
		`"query"`,
		`42`,
		`true`,
		`{"a":1} {"b":2}`,
		`{"a":1}x`,
		`{"a":}`,
		`{"a":1`,
		`{"n":1e1000000001}`,
		`{"n":1e-1000000001}`,
		`{"n":1e99999999999999999999}`,
	}
	for _, in := range bad {
		if got, err := tools.CanonicalArgs(json.RawMessage(in)); err == nil {
			t.Errorf("CanonicalArgs(%s) = %s, want an error", in, got)
		} else if !strings.HasPrefix(err.Error(), "canonical args:") {
			t.Errorf("CanonicalArgs(%s) error %q does not name the operation", in, err)
		}
	}
}

func TestArgsDigestIsHexSHA256OfCanonicalBytes(t *testing.T) {
	// sha256("{}")
	const emptyObject = "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
	if got := tools.ArgsDigest([]byte("{}")); got != emptyObject {
		t.Errorf("ArgsDigest({}) = %s, want %s", got, emptyObject)
	}
	a, _ := tools.CanonicalArgs(json.RawMessage(`{"query":"secret plans","limit":2}`))
	b, _ := tools.CanonicalArgs(json.RawMessage(`{ "limit": 2.0, "query": "secret plans" }`))
	c, _ := tools.CanonicalArgs(json.RawMessage(`{"query":"secret plans","limit":3}`))
	da, db, dc := tools.ArgsDigest(a), tools.ArgsDigest(b), tools.ArgsDigest(c)
	if da != db {
		t.Errorf("digests of the same arguments differ: %s vs %s", da, db)
	}
	if da == dc {
		t.Errorf("digests of different arguments are equal: %s", da)
	}
	if len(da) != 64 || strings.Contains(da, "secret") {
		t.Errorf("digest %q is not 64 hex characters free of the arguments", da)
	}
}

func FuzzCanonicalArgs(f *testing.F) {
	for _, s := range []string{
		``, `null`, `{}`, `{"a":1}`, `{"b":[1,2.50,-0,1e400],"a":{"z":null,"y":"\u00e9\n"}}`,
		`{"n":123456789012345678901234567890e-40}`, `{"s":"\ud83d\ude00\u0000<&>"}`, "{\"s\":\"\xff\xfe\"}",
		`[1]`, `{"a":1}{}`, `{"n":0.0000001}`, `{"n":1E+21}`, `{"a":1,"a":[true,false]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		c1, err := tools.CanonicalArgs(raw)
		if err != nil {
			return
		}
		if !json.Valid(c1) {
			t.Fatalf("canonical form %q of %q is not valid JSON", c1, raw)
		}
		c2, err := tools.CanonicalArgs(c1)
		if err != nil {
			t.Fatalf("canonical form %q of %q does not canonicalise: %v", c1, raw, err)
		}
		if !bytes.Equal(c1, c2) {
			t.Fatalf("not idempotent: %q -> %q -> %q", raw, c1, c2)
		}
		var v any
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			return // empty input
		}
		for variant := range 2 {
			var b strings.Builder
			reencode(&b, v, variant)
			c3, err := tools.CanonicalArgs(json.RawMessage(b.String()))
			if err != nil {
				t.Fatalf("re-encoding %q of %q does not canonicalise: %v", b.String(), raw, err)
			}
			if !bytes.Equal(c1, c3) {
				t.Fatalf("re-encoding changed the canonical form:\n in  %q -> %q\n re  %q -> %q", raw, c1, b.String(), c3)
			}
		}
		var back any
		dec = json.NewDecoder(bytes.NewReader(c1))
		dec.UseNumber()
		if err := dec.Decode(&back); err != nil {
			t.Fatal(err)
		}
		if v != nil && !sameJSONValue(v, back) {
			t.Fatalf("canonical form %q changed the value of %q", c1, raw)
		}
	})
}

// reencode writes v as a different but equivalent JSON text: keys in
// reverse order, extra whitespace, every non-ASCII character and '/'
// escaped, and numbers spelled differently (variant 0: a trailing zero
// digit; variant 1: an explicit zero exponent).
func reencode(b *strings.Builder, v any, variant int) {
	switch v := v.(type) {
	case nil:
		b.WriteString(" null ")
	case bool:
		fmt.Fprintf(b, " %t ", v)
	case json.Number:
		s := string(v)
		mant, exp, hasExp := strings.Cut(s, "e")
		if !hasExp {
			mant, exp, hasExp = strings.Cut(s, "E")
		}
		if variant == 0 {
			if !strings.Contains(mant, ".") {
				mant += ".0"
			} else {
				mant += "0"
			}
			if hasExp {
				mant += "E" + exp
			}
			b.WriteString(mant)
		} else if hasExp {
			b.WriteString(s)
		} else {
			b.WriteString(s + "e+0")
		}
	case string:
		b.WriteByte('"')
		for _, r := range v {
			switch {
			case r == '"' || r == '\\':
				b.WriteString(`\` + string(r))
			case r == '/':
				b.WriteString(`\/`)
			case r < 0x20 || r > 0x7e:
				for _, u := range utf16.Encode([]rune{r}) {
					fmt.Fprintf(b, `\u%04X`, u)
				}
			default:
				b.WriteRune(r)
			}
		}
		b.WriteByte('"')
	case []any:
		b.WriteString("[ ")
		for i, e := range v {
			if i > 0 {
				b.WriteString(" ,\n")
			}
			reencode(b, e, variant)
		}
		b.WriteString(" ]")
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		slices.Reverse(keys)
		b.WriteString("{\t")
		for i, k := range keys {
			if i > 0 {
				b.WriteString(",\r\n ")
			}
			reencode(b, k, variant)
			b.WriteString(" : ")
			reencode(b, v[k], variant)
		}
		b.WriteString("}")
	}
}

// sameJSONValue compares decoded JSON values, numbers by exact value when
// that is cheap to compute.
func sameJSONValue(a, b any) bool {
	switch a := a.(type) {
	case json.Number:
		bn, ok := b.(json.Number)
		if !ok {
			return false
		}
		return sameNumber(string(a), string(bn))
	case []any:
		bs, ok := b.([]any)
		if !ok || len(a) != len(bs) {
			return false
		}
		for i := range a {
			if !sameJSONValue(a[i], bs[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		bm, ok := b.(map[string]any)
		if !ok || len(a) != len(bm) {
			return false
		}
		for k, av := range a {
			bv, ok := bm[k]
			if !ok || !sameJSONValue(av, bv) {
				return false
			}
		}
		return true
	default:
		return a == b
	}
}

func sameNumber(a, b string) bool {
	for _, s := range []string{a, b} {
		if i := strings.IndexAny(s, "eE"); i >= 0 {
			if e, err := strconv.Atoi(s[i+1:]); err != nil || e > 400 || e < -400 {
				return true // too costly to compare exactly; idempotence covers it
			}
		}
	}
	ra, okA := new(big.Rat).SetString(a)
	rb, okB := new(big.Rat).SetString(b)
	return okA && okB && ra.Cmp(rb) == 0
}
