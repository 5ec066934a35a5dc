package kb

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/fstest"

	"go.uber.org/goleak"
)

// Dependencies start process-lifetime workers in their init (bleve's
// analysis queue, opencensus under genai); only goroutines started after
// that count as leaks.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreCurrent())
}

func loadSample(t *testing.T) *Index {
	t.Helper()
	x, err := Load(Sample)
	if err != nil {
		t.Fatalf("Load(Sample): %v", err)
	}
	t.Cleanup(func() {
		if err := x.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return x
}

func TestSampleLoadsEveryDocumentWithTitle(t *testing.T) {
	x := loadSample(t)
	if x.Len() < 8 || x.Len() > 10 {
		t.Fatalf("sample has %d documents, want 8–10", x.Len())
	}
	for _, id := range x.IDs() {
		d, ok := x.Get(id)
		if !ok {
			t.Fatalf("Get(%q) not found although listed", id)
		}
		if d.Title == "" || d.Title == id || strings.HasPrefix(d.Title, "#") {
			t.Errorf("%s: title %q, want the heading text", id, d.Title)
		}
		if strings.HasPrefix(d.Body, "#") || len(d.Body) < 200 {
			t.Errorf("%s: body should be the prose after the heading, got %.60q", id, d.Body)
		}
	}
}

func TestSearchRanksTopicDocumentFirst(t *testing.T) {
	x := loadSample(t)
	cases := []struct {
		query, want string
	}{
		{"how do I return coffee I did not like and get my money back", "returns-and-refunds"},
		{"refund", "returns-and-refunds"},
		{"how long does delivery take", "shipping"},
		{"my grinder stopped working", "grinder-warranty"},
		{"when does the Camden cafe open", "store-hours-and-locations"},
		{"skip a delivery of my subscription", "subscriptions"},
		{"do you take PayPal", "payment-methods"},
		{"does the almond milk contain nuts", "allergens"},
		{"french press ratio", "brewing-guide"},
		{"do gift cards expire", "gift-cards"},
		{"I own a restaurant and want to buy beans in bulk", "wholesale"},
	}
	for _, c := range cases {
		t.Run(c.want, func(t *testing.T) {
			hits, err := x.Search(context.Background(), c.query, 5)
			if err != nil {
				t.Fatal(err)
			}
			if len(hits) == 0 || hits[0].ID != c.want {
				t.Fatalf("Search(%q) top = %v, want %s first", c.query, ids(hits), c.want)
			}
			for i := 1; i < len(hits); i++ {
				if hits[i].Score > hits[i-1].Score {
					t.Errorf("hits not sorted by score: %v", hits)
				}
			}
		})
	}
}

func TestSearchWithoutMatchIsEmptyNotNil(t *testing.T) {
	x := loadSample(t)
	for _, q := range []string{"xylophone quantum zeppelin", "", "   ", "the and of"} {
		hits, err := x.Search(context.Background(), q, 5)
		if err != nil {
			t.Fatalf("Search(%q): %v", q, err)
		}
		if hits == nil || len(hits) != 0 {
			t.Errorf("Search(%q) = %#v, want an empty non-nil slice", q, hits)
		}
	}
}

func TestSearchHonoursLimit(t *testing.T) {
	x := loadSample(t)
	hits, err := x.Search(context.Background(), "coffee", 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) != 2 {
		t.Fatalf("got %d hits, want 2", len(hits))
	}
}

func TestSearchHonoursCancelledContext(t *testing.T) {
	x := loadSample(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := x.Search(ctx, "coffee", 5); !errors.Is(err, context.Canceled) {
		t.Fatalf("Search with cancelled ctx: err = %v, want context.Canceled", err)
	}
}

func TestSnippetIsShortPlainTextAroundMatch(t *testing.T) {
	x := loadSample(t)
	hits, err := x.Search(context.Background(), "customs duties", 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) == 0 || hits[0].ID != "shipping" {
		t.Fatalf("want shipping first, got %v", ids(hits))
	}
	s := hits[0].Snippet
	if n := len([]rune(s)); n > 240 || n < 40 {
		t.Errorf("snippet has %d characters, want 40–240: %q", n, s)
	}
	if !strings.Contains(strings.ToLower(s), "customs duties") {
		t.Errorf("snippet %q does not show the match", s)
	}
	for _, bad := range []string{"<", ">", "**", "#", "\n"} {
		if strings.Contains(s, bad) {
			t.Errorf("snippet %q contains markup %q", s, bad)
		}
	}
}

func TestSnippetStripsMarkdownFromDocuments(t *testing.T) {
	fsys := fstest.MapFS{
		"faq.md": {Data: []byte("# FAQ\n\n- **Bold** claim about [espresso beans](https://x.example) and `code`.\n\n<b>tag</b> text.\n")},
	}
	x, err := Load(fsys)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	hits, err := x.Search(context.Background(), "espresso", 1)
	if err != nil || len(hits) != 1 {
		t.Fatalf("hits %v err %v", hits, err)
	}
	if want := "Bold claim about espresso beans and code. tag text."; hits[0].Snippet != want {
		t.Errorf("snippet = %q, want %q", hits[0].Snippet, want)
	}
	d, _ := x.Get("faq")
	if !strings.Contains(d.Body, "**Bold**") {
		t.Errorf("Get should return the Markdown body unchanged, got %q", d.Body)
	}
}

func TestGet(t *testing.T) {
	x := loadSample(t)
	d, ok := x.Get("returns-and-refunds")
	if !ok {
		t.Fatal("returns-and-refunds not found")
	}
	if d.ID != "returns-and-refunds" || d.Title != "Returns and refunds" || !strings.Contains(d.Body, "30 days") {
		t.Errorf("Get = %+v", d)
	}
	if _, ok := x.Get("no-such-doc"); ok {
		t.Error("Get of an unknown id reported found")
	}
}

func TestTitleFallsBackToID(t *testing.T) {
	x, err := Load(fstest.MapFS{"notes/opening-times.md": {Data: []byte("We open at nine.\n")}})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	d, ok := x.Get("opening-times")
	if !ok || d.Title != "opening-times" || d.Body != "We open at nine." {
		t.Fatalf("Get = %+v, %v", d, ok)
	}
}

func TestLoadRefusesBadFiles(t *testing.T) {
	cases := map[string]struct {
		fsys fstest.MapFS
		want []string
	}{
		"uppercase name": {fstest.MapFS{"Returns.md": {Data: []byte("# R\n")}}, []string{"Returns.md"}},
		"space in name":  {fstest.MapFS{"gift cards.md": {Data: []byte("# G\n")}}, []string{"gift cards.md"}},
		"leading dash":   {fstest.MapFS{"a/-x.md": {Data: []byte("# X\n")}}, []string{"a/-x.md"}},
		"two bad at once": {fstest.MapFS{
			"ok.md": {Data: []byte("# ok\n")}, "Bad.md": {Data: []byte("# b\n")}, "x/Y.md": {Data: []byte("# y\n")},
		}, []string{"Bad.md", "x/Y.md"}},
		"duplicate id": {fstest.MapFS{"a/faq.md": {Data: []byte("# A\n")}, "b/faq.md": {Data: []byte("# B\n")}},
			[]string{"b/faq.md", "a/faq.md"}},
		"no documents": {fstest.MapFS{"readme.txt": {Data: []byte("hi")}}, []string{"no *.md documents"}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			x, err := Load(c.fsys)
			if err == nil {
				x.Close()
				t.Fatal("Load succeeded, want an error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
		})
	}
}

func ids(hits []Hit) []string {
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = h.ID
	}
	return out
}
