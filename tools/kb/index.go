package kb

import (
	"fmt"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/analysis/lang/en"
	"github.com/blevesearch/bleve/v2/mapping"
)

// Indexed field names.
const (
	fieldTitle = "title"
	fieldBody  = "body"
)

// titleBoost weighs a match in the title over the same match in the body,
// so that the document *about* a topic outranks ones that mention it.
const titleBoost = 3.0

// buildIndex indexes every document's title and plain body in memory with
// the English analyzer (stemming, stop words), keeping term vectors so that
// hits carry the match locations snippets are cut around.
func buildIndex(docs map[string]doc) (bleve.Index, error) {
	im := bleve.NewIndexMapping()
	im.DefaultAnalyzer = en.AnalyzerName
	dm := bleve.NewDocumentStaticMapping()
	dm.AddFieldMappingsAt(fieldTitle, textField())
	dm.AddFieldMappingsAt(fieldBody, textField())
	im.DefaultMapping = dm

	idx, err := bleve.NewMemOnly(im)
	if err != nil {
		return nil, fmt.Errorf("kb: create index: %w", err)
	}
	batch := idx.NewBatch()
	for id, d := range docs {
		if err := batch.Index(id, map[string]any{fieldTitle: d.Title, fieldBody: d.plain}); err != nil {
			_ = idx.Close()
			return nil, fmt.Errorf("kb: index %s: %w", id, err)
		}
	}
	if err := idx.Batch(batch); err != nil {
		_ = idx.Close()
		return nil, fmt.Errorf("kb: index: %w", err)
	}
	return idx, nil
}

func textField() *mapping.FieldMapping {
	f := bleve.NewTextFieldMapping()
	f.Analyzer = en.AnalyzerName
	f.Store = false // documents are kept in Index.docs
	f.IncludeTermVectors = true
	f.IncludeInAll = false
	return f
}
