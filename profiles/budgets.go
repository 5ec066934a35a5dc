package profiles

import (
	"fmt"

	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/tools"
)

// fields are a profile file's fields, for the error of a file that is not
// one.
const fields = "systemPrompt, tools, voice, languageCode, budgets, greeting"

// file is a profile file as written: the profile, and its budgets in a
// form that tells a number left out from a 0.
type file struct {
	*Profile
	Budgets map[protocol.Mode]fileBudget `json:"budgets"`
}

// fileBudget is one mode's budget as written; like a policy file's, it
// sets both numbers.
type fileBudget struct {
	MaxRetrieval *int `json:"maxRetrieval"`
	MaxCalls     *int `json:"maxCalls"`
}

// budgets checks the file's budgets: known modes, both numbers, within the
// bounds every budget keeps (tools.Budget.Check). Errors name the field
// (budgets.<mode>).
func (f file) budgets() (map[protocol.Mode]tools.Budget, error) {
	if len(f.Budgets) == 0 {
		return nil, nil
	}
	out := make(map[protocol.Mode]tools.Budget, len(f.Budgets))
	for mode, fb := range f.Budgets {
		key := "budgets." + string(mode)
		if !mode.Valid() {
			return nil, fmt.Errorf("%s: unknown mode (use text or voice)", key)
		}
		if fb.MaxRetrieval == nil || fb.MaxCalls == nil {
			return nil, fmt.Errorf("%s: a budget sets both maxRetrieval and maxCalls", key)
		}
		b := tools.Budget{MaxRetrieval: *fb.MaxRetrieval, MaxCalls: *fb.MaxCalls}
		if err := b.Check(); err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
		out[mode] = b
	}
	return out, nil
}
