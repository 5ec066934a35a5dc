package gateway

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"go/format"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"text/template"
)

// newToolMarker is the line of the built-in constructors table above which
// `gateway tools new` adds a tool (tools/builtin/registry.go).
const newToolMarker = "// gateway tools new: new tools go above this line."

var toolName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)

// toolsNew scaffolds a Go tool: its folder (schema.json, guide.md), its
// handler and constructor, a test, and its line in the constructors table.
// It writes nothing when any target exists or the table is not found.
func toolsNew(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("gateway tools new", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, toolsUsage) }
	dir := fs.String("dir", filepath.Join("tools", "builtin"), "the built-in tools package (run from the repository root)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "gateway tools new: give exactly one tool name")
		return 2
	}
	name := fs.Arg(0)
	if !toolName.MatchString(name) {
		fmt.Fprintf(stderr, "gateway tools new: %q is not a tool name: a lower-case letter, then lower-case letters, digits or _ (at most 64)\n", name)
		return 2
	}
	files, err := scaffoldTool(*dir, name)
	if err != nil {
		fmt.Fprintf(stderr, "gateway tools new: %v\n", err)
		return 1
	}
	for _, f := range files {
		fmt.Fprintln(stdout, "wrote", f)
	}
	fmt.Fprint(stdout, nextSteps(*dir, name))
	return 0
}

// nextSteps is what toolsNew prints once the files are written. Besides the
// tests of dir, the golden renderings of the tools package, the parent of
// dir (every built-in's Gemini and OpenAI declaration, in its testdata),
// must be regenerated, else TestGeminiRenderingsMatchGolden and
// TestOpenAIRenderingsMatchGolden fail.
func nextSteps(dir, name string) string {
	parent := goPackage(path.Dir(filepath.ToSlash(filepath.Clean(dir))))
	return fmt.Sprintf("next: describe %s in %s and %s, write its handler in %s, then run\n"+
		"  go test %s -run Golden -update   # rewrites %s/testdata/*.golden.json, which list every built-in\n"+
		"  go test %s/... && go run ./cmd/gateway tools check\n",
		name, filepath.Join(dir, name, "schema.json"), filepath.Join(dir, name, "guide.md"),
		filepath.Join(dir, name+".go"), parent, parent, parent)
}

// goPackage is how go test names the package in the slash-separated
// directory p: relative ones start with "./".
func goPackage(p string) string {
	if filepath.IsAbs(filepath.FromSlash(p)) || p == "." || p == ".." || strings.HasPrefix(p, "../") {
		return p
	}
	return "./" + p
}

// scaffoldTool writes the files of a new tool in dir and registers its
// constructor; it returns the files written or changed.
func scaffoldTool(dir, name string) ([]string, error) {
	table, pkg, src, err := findConstructorTable(dir)
	if err != nil {
		return nil, err
	}
	imp, err := importPath(dir)
	if err != nil {
		return nil, err
	}
	camel := camelCase(name)
	data := scaffoldData{Name: name, Camel: camel, Package: pkg, Import: imp}
	targets := []struct {
		path  string
		tmpl  *template.Template
		gofmt bool
	}{
		{filepath.Join(dir, name, "schema.json"), schemaTemplate, false},
		{filepath.Join(dir, name, "guide.md"), guideTemplate, false},
		{filepath.Join(dir, name+".go"), handlerTemplate, true},
		{filepath.Join(dir, name+"_test.go"), testTemplate, true},
	}
	if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
		return nil, fmt.Errorf("%s already exists", filepath.Join(dir, name))
	}
	for _, t := range targets {
		if _, err := os.Stat(t.path); err == nil {
			return nil, fmt.Errorf("%s already exists", t.path)
		}
	}
	if bytes.Contains(src, []byte(fmt.Sprintf("%q:", name))) {
		return nil, fmt.Errorf("%s already registers a tool called %s", table, name)
	}

	// Render everything before writing anything.
	contents := make([][]byte, len(targets))
	for i, t := range targets {
		var b bytes.Buffer
		if err := t.tmpl.Execute(&b, data); err != nil {
			return nil, err
		}
		contents[i] = b.Bytes()
		if t.gofmt {
			if contents[i], err = format.Source(contents[i]); err != nil {
				return nil, fmt.Errorf("format %s: %w", t.path, err)
			}
		}
	}
	i := bytes.Index(src, []byte(newToolMarker))
	lineStart := bytes.LastIndexByte(src[:i], '\n') + 1
	indent := src[lineStart:i]
	entry := fmt.Sprintf("%s%q: new%s,\n", indent, name, camel)
	updated := append(append(append([]byte{}, src[:lineStart]...), entry...), src[lineStart:]...)
	if updated, err = format.Source(updated); err != nil {
		return nil, fmt.Errorf("format %s: %w", table, err)
	}

	var written []string
	undo := func() {
		for _, p := range written {
			_ = os.Remove(p)
		}
		_ = os.Remove(filepath.Join(dir, name))
	}
	if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
		return nil, err
	}
	for i, t := range targets {
		if err := os.WriteFile(t.path, contents[i], 0o644); err != nil {
			undo()
			return nil, err
		}
		written = append(written, t.path)
	}
	if err := writeFileAtomic(table, updated); err != nil {
		undo()
		return nil, err
	}
	return append(written, table), nil
}

// findConstructorTable finds the one Go file of dir holding the marker
// line, and its package name.
func findConstructorTable(dir string) (path, pkg string, src []byte, err error) {
	matches, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return "", "", nil, err
	}
	for _, m := range matches {
		if strings.HasSuffix(m, "_test.go") {
			continue
		}
		b, err := os.ReadFile(m)
		if err != nil {
			return "", "", nil, err
		}
		if !bytes.Contains(b, []byte(newToolMarker)) {
			continue
		}
		if path != "" {
			return "", "", nil, fmt.Errorf("both %s and %s hold the line %q", path, m, newToolMarker)
		}
		path, src = m, b
	}
	if path == "" {
		return "", "", nil, fmt.Errorf("no Go file in %s holds the line %q: -dir must be the built-in tools package "+
			"(tools/builtin, with its constructors table), and the command runs from the repository root", dir, newToolMarker)
	}
	if m := regexp.MustCompile(`(?m)^package (\w+)`).FindSubmatch(src); m != nil {
		pkg = string(m[1])
	}
	return path, pkg, src, nil
}

// importPath is the import path of the package in dir: the module path of
// the nearest go.mod above it, and dir's path below that.
func importPath(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for root := abs; ; root = filepath.Dir(root) {
		b, err := os.ReadFile(filepath.Join(root, "go.mod"))
		if err == nil {
			m := regexp.MustCompile(`(?m)^module\s+(\S+)`).FindSubmatch(b)
			if m == nil {
				return "", fmt.Errorf("%s has no module line", filepath.Join(root, "go.mod"))
			}
			rel, err := filepath.Rel(root, abs)
			if err != nil {
				return "", err
			}
			return string(m[1]) + "/" + filepath.ToSlash(rel), nil
		}
		if filepath.Dir(root) == root {
			return "", fmt.Errorf("no go.mod above %s", dir)
		}
	}
}

// camelCase turns kb_search into KbSearch.
func camelCase(name string) string {
	var b strings.Builder
	for _, part := range strings.Split(name, "_") {
		if part != "" {
			b.WriteString(strings.ToUpper(part[:1]) + part[1:])
		}
	}
	return b.String()
}

type scaffoldData struct {
	Name, Camel, Package, Import string
}

var schemaTemplate = template.Must(template.New("schema").Parse(`{
  "$comment": "Describe {{.Name}}: see docs/tools.md. The example argument 'text' is a placeholder.",
  "name": "{{.Name}}",
  "category": "utility",
  "modes": ["text"],
  "requiresConfirmation": false,
  "terminal": false,
  "timeoutMs": 5000,
  "redact": {"args": ["text"], "result": ["text"]},
  "parameters": {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "properties": {
      "text": {"type": "string", "description": "What to work on.", "minLength": 1, "maxLength": 1000}
    },
    "required": ["text"],
    "additionalProperties": false
  }
}
`))

var guideTemplate = template.Must(template.New("guide").Parse(`# {{.Name}}

Say in one sentence what {{.Name}} does: this line is the tool's description for the model.

Say when to use it and when not to, what each argument means, what comes back, and what to do
with an empty or failed result.

- ` + "`text`" + `: what to work on.
`))

var handlerTemplate = template.Must(template.New("handler").Parse(`package {{.Package}}

import (
	"context"
	"encoding/json"

	"github.com/turnstile-gw/turnstile/tools"
)

// tool{{.Camel}} answers {{.Name}}{text} with {"text": text}.
// TODO: replace the echo with what {{.Name}} does.
type tool{{.Camel}} struct {
	deps tools.Deps
}

// new{{.Camel}} builds the handler of {{.Name}}. Check here that what the
// tool needs is there (d.Settings, d.Secret) and return an error when it is
// not: the gateway then refuses to start and says why.
func new{{.Camel}}(d Deps) (tools.Handler, error) {
	return tool{{.Camel}}{deps: d.Deps}, nil
}

// Handle runs one call. The arguments were validated against schema.json;
// the call's ctx carries its timeout and cancellation: pass it on to
// every request the handler makes (use h.deps.HTTP for HTTP).
func (h tool{{.Camel}}) Handle(ctx context.Context, call tools.Call) tools.Envelope {
	if ctx.Err() != nil {
		return tools.Fail(tools.ErrTransient, "the call was cancelled before it finished", true, false)
	}
	var args struct {
		Text string ` + "`json:\"text\"`" + `
	}
	if err := json.Unmarshal(call.Args, &args); err != nil {
		return tools.Fail(tools.ErrValidation, "arguments must be an object with a string text", false, false)
	}
	return tools.OK(map[string]any{"text": args.Text})
}
`))

var testTemplate = template.Must(template.New("test").Parse(`package {{.Package}}_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/turnstile-gw/turnstile/tools"
	"{{.Import}}"
)

// Test{{.Camel}}AnswersThroughTheRegistry loads the built-in tools as the
// gateway does and calls {{.Name}} the way the orchestrator does.
func Test{{.Camel}}AnswersThroughTheRegistry(t *testing.T) {
	handlers, err := {{.Package}}.Build(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := tools.Load({{.Package}}.FS, handlers)
	if err != nil {
		t.Fatalf("the built-in tools do not load:\n%v", err)
	}
	tool, ok := reg.Lookup("{{.Name}}")
	if !ok {
		t.Fatal("{{.Name}} is not registered")
	}
	args := json.RawMessage(` + "`" + `{"text": "hello"}` + "`" + `)
	if err := tool.ValidateArgs(args); err != nil {
		t.Fatalf("valid arguments refused: %v", err)
	}
	if err := tool.ValidateArgs(json.RawMessage(` + "`" + `{}` + "`" + `)); err == nil {
		t.Error("arguments without text accepted")
	}
	env := tool.Handler.Handle(context.Background(), tools.Call{ID: "c1", Mode: tools.ModeText, Args: args})
	data, _ := env.Data.(map[string]any)
	if !env.OK || data["text"] != "hello" {
		t.Errorf("{{.Name}}(hello) = %+v", env)
	}
}
`))
