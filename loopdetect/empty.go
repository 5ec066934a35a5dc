package loopdetect

import (
	"encoding/json"
	"strings"
)

// resultsLikeKeys are member names that hold a result set by convention;
// an object whose result sets are all empty is an empty result whatever
// metadata sits beside them (a count, the query, a cursor).
var resultsLikeKeys = map[string]bool{
	"results": true, "items": true, "hits": true, "matches": true, "documents": true, "docs": true,
	"records": true, "entries": true, "rows": true, "data": true,
}

// maxEmptyDepth bounds the walk into nested values, so a self-referencing
// map cannot hang the caller; anything deeper counts as not empty.
const maxEmptyDepth = 32

// IsEmptyResult reports whether a tool result has nothing in it, the
// condition the EmptyResults rule counts. The rule, applied to the value as
// it would be encoded in JSON:
//   - null, and strings that are empty or only whitespace, are empty;
//   - numbers and booleans (including 0 and false) are never empty;
//   - an array is empty when every element is empty ([] and [null, ""]);
//   - an object is empty when every member is empty ({} and {"title": ""}),
//     or when it has a results-like member (results, items, hits, matches,
//     documents, docs, records, entries, rows, data; names compared
//     case-insensitively) and all of those are empty, whatever else it
//     holds: {"results": [], "total": 0, "query": "x"} is empty, while
//     {"id": "a", "tags": []} is not.
//
// Values that are not plain JSON (structs, typed slices and maps,
// json.RawMessage) are judged by their JSON encoding; a value that cannot be
// encoded is not empty.
func IsEmptyResult(data any) bool {
	return isEmpty(data, 0)
}

func isEmpty(v any, depth int) bool {
	if depth > maxEmptyDepth {
		return false
	}
	switch v := v.(type) {
	case nil:
		return true
	case string:
		return strings.TrimSpace(v) == ""
	case bool, json.Number, float64, float32, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return false
	case []any:
		for _, e := range v {
			if !isEmpty(e, depth+1) {
				return false
			}
		}
		return true
	case map[string]any:
		allEmpty, hasResults, resultsEmpty := true, false, true
		for k, e := range v {
			empty := isEmpty(e, depth+1)
			allEmpty = allEmpty && empty
			if resultsLikeKeys[strings.ToLower(k)] {
				hasResults = true
				resultsEmpty = resultsEmpty && empty
			}
		}
		return allEmpty || (hasResults && resultsEmpty)
	case json.RawMessage:
		return isEmptyJSON(v, depth)
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return false
		}
		return isEmptyJSON(b, depth)
	}
}

func isEmptyJSON(b []byte, depth int) bool {
	var generic any
	if err := json.Unmarshal(b, &generic); err != nil {
		return false
	}
	return isEmpty(generic, depth)
}
