package web

import (
	"io/fs"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"

	jsclient "github.com/turnstile-gw/turnstile/clients/js"
)

// These tests keep the client package, the demo page and docs/protocol.md
// from drifting apart: they may send only documented client messages, and
// each must handle every documented server message.

// jsFile is a shipped JavaScript file: the page's (name "app.js") or the
// client package's (name "client/client.js").
type jsFile struct{ name, body string }

func (f jsFile) client() bool { return strings.HasPrefix(f.name, "client/") }

// jsFiles lists the page's and the client package's JavaScript.
func jsFiles(t *testing.T) []jsFile {
	t.Helper()
	var out []jsFile
	add := func(fsys fs.FS, root, prefix string) {
		err := fs.WalkDir(fsys, root, func(name string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || path.Ext(name) != ".js" {
				return err
			}
			b, err := fs.ReadFile(fsys, name)
			out = append(out, jsFile{prefix + path.Base(name), string(b)})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	add(static, "static", "")
	add(jsclient.FS(), ".", "client/")
	if !slices.ContainsFunc(out, jsFile.client) || slices.IndexFunc(out, func(f jsFile) bool { return !f.client() }) < 0 {
		t.Fatalf("found %d JavaScript files: want the page's and the client package's", len(out))
	}
	return out
}

func only(files []jsFile, client bool) []jsFile {
	var out []jsFile
	for _, f := range files {
		if f.client() == client {
			out = append(out, f)
		}
	}
	return out
}

func protocolDoc(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../docs/protocol.md")
	if err != nil {
		t.Fatalf("read protocol doc: %v", err)
	}
	return string(b)
}

var backticked = regexp.MustCompile("`([^`]+)`")

// tableRows returns the cells of the table rows in the section under heading,
// up to the next heading of any level.
func tableRows(t *testing.T, doc, heading string) [][]string {
	t.Helper()
	lines := strings.Split(doc, "\n")
	start := slices.Index(lines, heading)
	if start < 0 {
		t.Fatalf("protocol doc has no %q section", heading)
	}
	var rows [][]string
	for _, line := range lines[start+1:] {
		if strings.HasPrefix(line, "#") {
			break
		}
		if !strings.HasPrefix(line, "|") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if strings.HasPrefix(cells[0], "---") || cells[0] == "type" || cells[0] == "code" {
			continue
		}
		rows = append(rows, cells)
	}
	if len(rows) == 0 {
		t.Fatalf("protocol doc section %q has no table rows", heading)
	}
	return rows
}

// messageTypes lists the backticked names in the first column of a section's table.
func messageTypes(t *testing.T, doc, heading string) []string {
	t.Helper()
	var types []string
	for _, row := range tableRows(t, doc, heading) {
		for _, m := range backticked.FindAllStringSubmatch(row[0], -1) {
			types = append(types, m[1])
		}
	}
	return types
}

var (
	sendCall    = regexp.MustCompile(`\.send\(([^)]*)`)
	sendLiteral = regexp.MustCompile(`\.send\(\s*"([^"]+)"`)
	typeSwitch  = regexp.MustCompile(`switch\s*\(\s*msg\.type\s*\)\s*\{`)
	caseLabel   = regexp.MustCompile(`case\s+"([^"]+)"\s*:`)
)

// rawSends are the only socket writes allowed without a message type
// literal: Connection.send's JSON write and Connection.sendAudio's binary
// write. Any other would send something this test cannot see.
var rawSends = []string{"JSON.stringify({ ...fields, type }", "buffer"}

func sentTypes(t *testing.T) []string {
	t.Helper()
	var sent, raw []string
	for _, js := range jsFiles(t) {
		for _, m := range sendCall.FindAllStringSubmatch(js.body, -1) {
			if !strings.HasPrefix(strings.TrimSpace(m[1]), `"`) {
				raw = append(raw, m[1])
			}
		}
		for _, m := range sendLiteral.FindAllStringSubmatch(js.body, -1) {
			sent = append(sent, m[1])
		}
	}
	if !slices.Equal(raw, rawSends) {
		t.Errorf(".send( calls whose first argument is not a message type literal: %q, want exactly %q", raw, rawSends)
	}
	return sent
}

func handledTypes(files []jsFile) []string {
	var handled []string
	for _, js := range files {
		for _, loc := range typeSwitch.FindAllStringIndex(js.body, -1) {
			depth, end := 0, len(js.body)
			for i := loc[1] - 1; i < len(js.body); i++ {
				if js.body[i] == '{' {
					depth++
				} else if js.body[i] == '}' {
					depth--
					if depth == 0 {
						end = i
						break
					}
				}
			}
			for _, m := range caseLabel.FindAllStringSubmatch(js.body[loc[1]:end], -1) {
				handled = append(handled, m[1])
			}
		}
	}
	return handled
}

func TestClientSendsOnlyDocumentedMessages(t *testing.T) {
	documented := messageTypes(t, protocolDoc(t), "## Client → server")
	sent := sentTypes(t)
	for _, typ := range sent {
		if !slices.Contains(documented, typ) {
			t.Errorf("the client sends %q, which docs/protocol.md does not list as a client message (%v)", typ, documented)
		}
	}
	for _, typ := range documented {
		if !slices.Contains(sent, typ) {
			t.Errorf("the client never sends %q", typ)
		}
	}
}

// binaryRow returns the "(binary)" row of a section's table.
func binaryRow(t *testing.T, doc, heading string) string {
	t.Helper()
	for _, row := range tableRows(t, doc, heading) {
		if row[0] == "(binary)" {
			return strings.Join(row, " | ")
		}
	}
	t.Fatalf("docs/protocol.md section %q has no (binary) row", heading)
	return ""
}

func TestBinaryFramesAreAudioBothWaysAsDocumented(t *testing.T) {
	doc := protocolDoc(t)
	if row := binaryRow(t, doc, "## Client → server"); !strings.Contains(row, "PCM16 little-endian mono 16 kHz") {
		t.Errorf("client binary row %q does not name the page's format (PCM16 LE mono 16 kHz)", row)
	}
	if row := binaryRow(t, doc, "## Server → client"); !strings.Contains(row, "PCM16 little-endian mono 24 kHz") {
		t.Errorf("server binary row %q does not name the format the page plays (PCM16 LE mono 24 kHz)", row)
	}
	all := ""
	for _, js := range jsFiles(t) {
		all += js.body
	}
	// The client reads binary frames as ArrayBuffers and hands them to the
	// speaker; sendAudio is the only binary write (see rawSends).
	for _, want := range []string{`binaryType = "arraybuffer"`, "this.voice.audio(ev.data)", "sendAudio(buffer)"} {
		if !strings.Contains(all, want) {
			t.Errorf("the client's JavaScript has no %s", want)
		}
	}
}

// Both the client package (which keeps its state and emits a typed event
// for each) and the demo page (which shows each) must know every documented
// server message, and no other.
func TestClientAndPageHandleEveryDocumentedServerMessage(t *testing.T) {
	documented := messageTypes(t, protocolDoc(t), "## Server → client")
	for _, side := range []struct {
		what   string
		client bool
	}{{"the client package", true}, {"the demo page", false}} {
		handled := handledTypes(only(jsFiles(t), side.client))
		if len(handled) == 0 {
			t.Fatalf("no `switch (msg.type)` dispatch found in %s", side.what)
		}
		for _, typ := range documented {
			if !slices.Contains(handled, typ) {
				t.Errorf("docs/protocol.md lists server message %q, which %s does not handle", typ, side.what)
			}
		}
		for _, typ := range handled {
			if !slices.Contains(documented, typ) {
				t.Errorf("%s handles %q, which docs/protocol.md does not list as a server message", side.what, typ)
			}
		}
	}
}

func TestClientUsesTheDocumentedEndpoint(t *testing.T) {
	doc := protocolDoc(t)
	for _, want := range []string{`"turnstile.v1"`, "/v1/ws", `"access_token"`} {
		if !strings.Contains(doc, strings.Trim(want, `"`)) {
			t.Errorf("docs/protocol.md no longer mentions %s", want)
		}
		found := false
		for _, js := range jsFiles(t) {
			found = found || strings.Contains(js.body, want)
		}
		if !found {
			t.Errorf("the client's JavaScript does not use %s", want)
		}
	}
}
