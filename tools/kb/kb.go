// Package kb is the knowledge base behind the kb_search and kb_get tools: a
// folder of Markdown documents, one per file, indexed in memory for ranked
// full-text search with bleve.
package kb

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strings"

	"github.com/blevesearch/bleve/v2"
)

// Doc is one knowledge-base document.
type Doc struct {
	ID    string // file name without ".md"
	Title string // text of the first heading, or the ID
	Body  string // the Markdown after the heading
}

// Index is a loaded, searchable knowledge base. It is read-only and safe for
// concurrent use until Close.
type Index struct {
	docs  map[string]doc
	index bleve.Index
}

// doc is a Doc plus the plain text that was indexed (snippets are cut from
// it, so their offsets match the index).
type doc struct {
	Doc
	plain string
}

var idPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,127}$`)

//go:embed sample/*.md
var sampleFS embed.FS

// Sample is the embedded sample knowledge base: support documents of the
// fictional Harbor Coffee Roasters.
var Sample fs.FS = subFS(sampleFS, "sample")

func subFS(fsys fs.FS, dir string) fs.FS {
	sub, err := fs.Sub(fsys, dir)
	if err != nil {
		panic(err) // dir is a constant that the embed directive guarantees
	}
	return sub
}

// Load reads every *.md file of fsys (recursively; folders starting with "."
// are skipped) and indexes it. It reports every bad file at once: an id
// (file name without ".md") that does not match ^[a-z0-9][a-z0-9_-]{0,127}$,
// a duplicate id, an unreadable file, or a folder without documents.
func Load(fsys fs.FS) (*Index, error) {
	docs := make(map[string]doc)
	files := make(map[string]string) // id → path, to name duplicates
	var errs []error
	walkErr := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			errs = append(errs, fmt.Errorf("kb: %s: %w", p, err))
			return nil
		}
		if d.IsDir() {
			if p != "." && strings.HasPrefix(d.Name(), ".") {
				return fs.SkipDir
			}
			return nil
		}
		if path.Ext(p) != ".md" {
			return nil
		}
		id := strings.TrimSuffix(d.Name(), ".md")
		if !idPattern.MatchString(id) {
			errs = append(errs, fmt.Errorf("kb: %s: file name must be a lowercase id matching %s followed by .md", p, idPattern))
			return nil
		}
		if prev, dup := files[id]; dup {
			errs = append(errs, fmt.Errorf("kb: %s: id %q is already used by %s", p, id, prev))
			return nil
		}
		raw, err := fs.ReadFile(fsys, p)
		if err != nil {
			errs = append(errs, fmt.Errorf("kb: %s: %w", p, err))
			return nil
		}
		files[id] = p
		title, body := splitTitle(string(raw))
		if title == "" {
			title = id
		}
		docs[id] = doc{Doc: Doc{ID: id, Title: title, Body: body}, plain: plainText(body)}
		return nil
	})
	if walkErr != nil {
		errs = append(errs, fmt.Errorf("kb: walk: %w", walkErr))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if len(docs) == 0 {
		return nil, errors.New("kb: load: no *.md documents found")
	}
	idx, err := buildIndex(docs)
	if err != nil {
		return nil, err
	}
	return &Index{docs: docs, index: idx}, nil
}

// Get returns the document with the given id.
func (x *Index) Get(id string) (Doc, bool) {
	d, ok := x.docs[id]
	return d.Doc, ok
}

// Len is the number of documents.
func (x *Index) Len() int { return len(x.docs) }

// IDs returns all document ids, sorted.
func (x *Index) IDs() []string {
	ids := make([]string, 0, len(x.docs))
	for id := range x.docs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// Close releases the search index. Searches after Close fail.
func (x *Index) Close() error {
	if err := x.index.Close(); err != nil {
		return fmt.Errorf("kb: close: %w", err)
	}
	return nil
}
