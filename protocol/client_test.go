package protocol

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestDecodeAcceptsValidMessages(t *testing.T) {
	cases := []struct {
		in   string
		want ClientMessage
	}{
		{`{"type":"session.start"}`, ClientMessage{Type: TypeSessionStart, Mode: ModeText}},
		{`{"type":"session.start","mode":"voice"}`, ClientMessage{Type: TypeSessionStart, Mode: ModeVoice}},
		{`{"type":"text","text":"hello\nthere"}`, ClientMessage{Type: TypeText, Text: "hello\nthere"}},
		{`{"type":"ping"}`, ClientMessage{Type: TypePing}},
		{`{"type":"turn.cancel"}`, ClientMessage{Type: TypeTurnCancel}},
		{`{"type":"confirm","token":"abc","approve":false}`, ClientMessage{Type: TypeConfirm, Token: "abc"}},
		{`  {"type":"ping","extra":1}  `, ClientMessage{Type: TypePing}},
		{`{"type":"auth","token":"eyJ.abc-_.sig"}`, ClientMessage{Type: TypeAuth, Token: "eyJ.abc-_.sig"}},
		{`{"type":"history","before":41,"limit":100}`, ClientMessage{Type: TypeHistory, Before: 41, Limit: 100}},
		{`{"type":"history","before":1}`, ClientMessage{Type: TypeHistory, Before: 1, Limit: 50}},
	}
	for _, c := range cases {
		got, err := Decode([]byte(c.in), Limits{})
		if err != nil {
			t.Errorf("Decode(%s): %v", c.in, err)
			continue
		}
		if got.Type != c.want.Type || got.Mode != c.want.Mode || got.Text != c.want.Text || got.Token != c.want.Token ||
			got.Before != c.want.Before || got.Limit != c.want.Limit {
			t.Errorf("Decode(%s) = %+v, want %+v", c.in, got, c.want)
		}
	}
}

func TestDecodeStripsControlCharactersFromText(t *testing.T) {
	cases := []struct{ in, want string }{
		{`{"type":"text","text":"a\u0000b"}`, "ab"},
		{`{"type":"text","text":"\u001b[31mred\u001b[0m"}`, "[31mred[0m"},
		{`{"type":"text","text":"tab\tline\nreturn\r\u007f\u0085end"}`, "tab\tline\nreturn\rend"},
	}
	for _, c := range cases {
		got, err := Decode([]byte(c.in), Limits{})
		if err != nil || got.Text != c.want {
			t.Errorf("Decode(%s) = %q, %v; want %q", c.in, got.Text, err, c.want)
		}
	}
	// The length limit counts what is left.
	if _, err := Decode([]byte(`{"type":"text","text":"0123456789\u0000\u0000"}`), Limits{MaxTextChars: 10}); err != nil {
		t.Errorf("ten characters and two NULs refused with a limit of ten: %v", err)
	}
}

func TestDecodeResume(t *testing.T) {
	m, err := Decode([]byte(`{"type":"session.start","resume":{"sessionId":"s_abc","resumeToken":"tok-_1"}}`), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if m.Resume == nil || m.Resume.SessionID != "s_abc" || m.Resume.ResumeToken != "tok-_1" {
		t.Fatalf("resume = %+v", m.Resume)
	}
}

func TestDecodeRefusesBadInputWithCode(t *testing.T) {
	long := strings.Repeat("a", 11)
	cases := []struct{ in, code string }{
		{``, CodeBadJSON},
		{`not json`, CodeBadJSON},
		{`[1,2]`, CodeBadJSON},
		{`{"type":`, CodeBadJSON},
		{`{"type":5}`, CodeBadJSON},
		{`{}`, CodeBadMessage},
		{`{"type":""}`, CodeBadMessage},
		{`{"type":"launch.missiles"}`, CodeUnknownType},
		{`{"type":"text"}`, CodeBadMessage},
		{`{"type":"text","text":"   "}`, CodeBadMessage},
		{`{"type":"text","text":"\u0000\u001b \u007f"}`, CodeBadMessage}, // nothing left but a space
		{`{"type":"text","text":"` + long + `"}`, CodeBadMessage},
		{`{"type":"session.start","mode":"video"}`, CodeBadMessage},
		{`{"type":"session.start","resume":{"sessionId":"../etc","resumeToken":"x"}}`, CodeBadMessage},
		{`{"type":"session.start","resume":{"sessionId":"s_1"}}`, CodeBadMessage},
		{`{"type":"confirm","token":"abc"}`, CodeBadMessage},
		{`{"type":"auth"}`, CodeBadMessage},
		{`{"type":"auth","token":""}`, CodeBadMessage},
		{`{"type":"auth","token":"a b"}`, CodeBadMessage},
		{`{"type":"auth","token":"` + strings.Repeat("a", 8193) + `"}`, CodeBadMessage},
		{`{"type":"history"}`, CodeBadMessage},
		{`{"type":"history","before":0,"limit":5}`, CodeBadMessage},
		{`{"type":"history","before":3,"limit":0}`, CodeBadMessage},
		{`{"type":"history","before":3,"limit":101}`, CodeBadMessage},
		{`{"type":"history","before":3.5}`, CodeBadJSON},
		{`{"type":"history","before":"3"}`, CodeBadJSON},
	}
	for _, c := range cases {
		_, err := Decode([]byte(c.in), Limits{MaxTextChars: 10})
		var de *DecodeError
		if !errors.As(err, &de) {
			t.Errorf("Decode(%q) error = %v, want a DecodeError", c.in, err)
			continue
		}
		if de.Code != c.code {
			t.Errorf("Decode(%q) code = %s, want %s", c.in, de.Code, c.code)
		}
	}
}

func TestDecodeErrorNeverEchoesInput(t *testing.T) {
	secret := "SECRET-PAYLOAD-1234"
	for _, in := range []string{
		`{"type":"` + secret + `"}`,
		`{"type":"text","text":"` + secret + strings.Repeat("x", 8000) + `"}`,
		`{"type":"session.start","mode":"` + secret + `"}`,
	} {
		_, err := Decode([]byte(in), Limits{})
		if err == nil || strings.Contains(err.Error(), secret) {
			t.Errorf("Decode(%q) error %v echoes the input", in, err)
		}
	}
}

func TestCloseReasonFitsFrame(t *testing.T) {
	r := CloseReason(strings.Repeat("é", 100))
	if len(r) > MaxCloseReasonBytes || !utf8.ValidString(r) {
		t.Fatalf("reason of %d bytes, valid=%v", len(r), utf8.ValidString(r))
	}
	if CloseReason("short") != "short" {
		t.Fatal("short reason changed")
	}
}

func FuzzDecode(f *testing.F) {
	for _, s := range []string{`{"type":"session.start","resume":{"sessionId":"a","resumeToken":"b"}}`,
		`{"type":"text","text":"hi"}`, `{"type":"confirm","token":"t","approve":true}`, `[`, `{"type":null}`,
		`{"type":"auth","token":"a.b.c"}`, `{"type":"history","before":12,"limit":30}`, `{"type":"history","before":-1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Decode(data, Limits{MaxTextChars: 100})
		if err != nil {
			var de *DecodeError
			if !errors.As(err, &de) || de.Code == "" {
				t.Fatalf("error without code: %v", err)
			}
			return
		}
		if m.Type == TypeText && (utf8.RuneCountInString(m.Text) > 100 || strings.TrimSpace(m.Text) == "" || HasControl(m.Text)) {
			t.Fatalf("accepted bad text %q", m.Text)
		}
		if m.Type == TypeSessionStart && m.Mode != ModeText && m.Mode != ModeVoice {
			t.Fatalf("accepted mode %q", m.Mode)
		}
		if m.Type == TypeHistory && (m.Before < 1 || m.Limit < 1 || m.Limit > HistoryLimitMax) {
			t.Fatalf("accepted history before=%d limit=%d", m.Before, m.Limit)
		}
		if m.Type == TypeAuth && !validToken(m.Token) {
			t.Fatalf("accepted auth token %q", m.Token)
		}
	})
}

func BenchmarkDecodeText(b *testing.B) {
	msg := []byte(`{"type":"text","text":"How long does shipping take to Canada, and can I track my order?"}`)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := Decode(msg, Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}

func TestDecodeSessionStartTraceparent(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	m, err := Decode([]byte(`{"type":"session.start","traceparent":"`+tp+`"}`), Limits{})
	if err != nil || m.Traceparent != tp {
		t.Fatalf("got %+v, %v", m, err)
	}
	for _, bad := range []string{
		"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", // unknown version
		"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", // upper case
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01", // zero trace ID
		"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", // zero span ID
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",    // no flags
		"not-a-trace-context",
	} {
		_, err := Decode([]byte(`{"type":"session.start","traceparent":"`+bad+`"}`), Limits{})
		var de *DecodeError
		if !errors.As(err, &de) || de.Code != CodeBadMessage || strings.Contains(de.Message, bad) {
			t.Errorf("%q: err %v, want bad_message without the value", bad, err)
		}
	}
}
