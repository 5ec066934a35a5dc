package kb

import (
	"context"
	"fmt"
	"math"
	"strings"

	"github.com/blevesearch/bleve/v2"
)

// Search limits.
const (
	DefaultLimit = 5
	MaxLimit     = 50
)

// Hit is one search result.
type Hit struct {
	ID      string
	Title   string
	Snippet string // plain text around the best match, at most ~240 characters
	Score   float64
}

// Search returns up to limit documents matching query, best first. A limit
// of 0 or less means DefaultLimit; more than MaxLimit is capped. A query
// with no matching words (including an empty or stop-word-only query) gives
// an empty, non-nil slice. It honours ctx.
func (x *Index) Search(ctx context.Context, query string, limit int) ([]Hit, error) {
	if limit <= 0 {
		limit = DefaultLimit
	}
	limit = min(limit, MaxLimit)
	hits := []Hit{}
	if strings.TrimSpace(query) == "" {
		return hits, nil
	}

	title := bleve.NewMatchQuery(query)
	title.SetField(fieldTitle)
	title.SetBoost(titleBoost)
	body := bleve.NewMatchQuery(query)
	body.SetField(fieldBody)
	req := bleve.NewSearchRequestOptions(bleve.NewDisjunctionQuery(title, body), limit, 0, false)
	req.IncludeLocations = true

	res, err := x.index.SearchInContext(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("kb: search: %w", err)
	}
	for _, m := range res.Hits {
		d, ok := x.docs[m.ID]
		if !ok {
			continue
		}
		var spans []span
		for term, locs := range m.Locations[fieldBody] {
			for _, l := range locs {
				spans = append(spans, span{start: int(l.Start), end: int(l.End), term: term})
			}
		}
		hits = append(hits, Hit{
			ID:      d.ID,
			Title:   d.Title,
			Snippet: snippet(d.plain, spans, snippetLen),
			Score:   math.Round(m.Score*1000) / 1000,
		})
	}
	return hits, nil
}
