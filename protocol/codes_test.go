package protocol

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// errorCodes reads every Code* string constant declared in this package, so
// that a code added here without its documentation or its TypeScript type
// fails the test below.
func errorCodes(t *testing.T) []string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "protocol.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var codes []string
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok {
			return true
		}
		for i, name := range vs.Names {
			if !strings.HasPrefix(name.Name, "Code") || i >= len(vs.Values) {
				continue
			}
			if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
				s, _ := strconv.Unquote(lit.Value)
				codes = append(codes, s)
			}
		}
		return true
	})
	if len(codes) < 10 {
		t.Fatalf("found only %d error codes in protocol.go: %v", len(codes), codes)
	}
	return codes
}

func TestEveryErrorCodeIsDocumentedAndTyped(t *testing.T) {
	doc, err := os.ReadFile("../docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	dts, err := os.ReadFile("../clients/js/index.d.ts")
	if err != nil {
		t.Fatal(err)
	}
	union := regexp.MustCompile(`(?s)export type ErrorCode =(.*?);`).FindSubmatch(dts)
	if union == nil {
		t.Fatal("index.d.ts has no ErrorCode union")
	}
	for _, code := range errorCodes(t) {
		if !strings.Contains(string(doc), "| `"+code+"` |") {
			t.Errorf("docs/protocol.md has no row for error code %q", code)
		}
		if !strings.Contains(string(union[1]), `"`+code+`"`) {
			t.Errorf("clients/js/index.d.ts ErrorCode lacks %q", code)
		}
	}
}
