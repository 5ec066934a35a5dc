package gateway_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// docAnchors are the anchors a Markdown file offers: its headings as GitHub
// slugs them, and explicit <a id="…"> tags.
func docAnchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		if h, ok := strings.CutPrefix(strings.TrimLeft(line, "#"), " "); ok && strings.HasPrefix(line, "#") {
			var slug strings.Builder
			for _, r := range strings.ToLower(strings.TrimSpace(h)) {
				switch {
				case r == ' ':
					slug.WriteRune('-')
				case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
					slug.WriteRune(r)
				}
			}
			out[slug.String()] = true
		}
	}
	for _, m := range regexp.MustCompile(`<a id="([^"]+)">`).FindAllStringSubmatch(string(b), -1) {
		out[m[1]] = true
	}
	return out
}

// The README links docs/spec-deviations.md, and every relative link in it
// leads to a file and, when it names one, a heading that exist.
func TestSpecDeviationsIsLinkedFromTheReadmeAndItsLinksResolve(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "(docs/spec-deviations.md)") {
		t.Fatal("README.md does not link docs/spec-deviations.md")
	}
	const doc = "../docs/spec-deviations.md"
	b, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	links := regexp.MustCompile(`\]\(([^)#:]*)(#[^)]*)?\)`).FindAllStringSubmatch(string(b), -1)
	if len(links) == 0 {
		t.Fatal("docs/spec-deviations.md links nothing")
	}
	for _, l := range links {
		target := filepath.Join(filepath.Dir(doc), l[1])
		if l[1] == "" {
			target = doc
		}
		if _, err := os.Stat(target); err != nil {
			t.Errorf("link %s%s: %v", l[1], l[2], err)
			continue
		}
		if a := strings.TrimPrefix(l[2], "#"); a != "" && !docAnchors(t, target)[a] {
			t.Errorf("link %s%s: %s has no such heading", l[1], l[2], target)
		}
	}
}
