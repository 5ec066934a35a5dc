package builtin

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/turnstile-gw/turnstile/tools"
	"github.com/turnstile-gw/turnstile/tools/kb"
)

// kbSearch answers kb_search{query, limit?} with {"results": [...]}.
type kbSearch struct {
	index *kb.Index
}

type kbSearchArgs struct {
	Query string `json:"query"`
	Limit *int   `json:"limit"`
}

// Limits of kb_search; they match its schema.json.
const (
	searchDefaultLimit = 5
	searchMaxLimit     = 10
)

func newKBSearch(d Deps) (tools.Handler, error) {
	return kbSearch{index: d.KB}, nil
}

func (h kbSearch) Handle(ctx context.Context, call tools.Call) tools.Envelope {
	if env, done := cancelled(ctx); done {
		return env
	}
	if h.index == nil {
		return noKB()
	}
	var args kbSearchArgs
	if err := json.Unmarshal(call.Args, &args); err != nil {
		return tools.Fail(tools.ErrValidation, "arguments must be an object with a string query and an optional integer limit", false, false)
	}
	if strings.TrimSpace(args.Query) == "" {
		return tools.Fail(tools.ErrValidation, "query must not be empty", false, false)
	}
	limit := searchDefaultLimit
	if args.Limit != nil {
		limit = min(max(*args.Limit, 1), searchMaxLimit)
	}
	hits, err := h.index.Search(ctx, args.Query, limit)
	if err != nil {
		if env, done := cancelled(ctx); done {
			return env
		}
		return tools.Fail(tools.ErrInternal, "the knowledge base could not be searched", false, false)
	}
	results := make([]map[string]any, 0, len(hits))
	for _, hit := range hits {
		results = append(results, map[string]any{
			"id":      hit.ID,
			"title":   hit.Title,
			"snippet": hit.Snippet,
			"score":   hit.Score,
		})
	}
	return tools.OK(map[string]any{"results": results})
}
