package tools

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/turnstile-gw/turnstile/protocol"
)

// Policy is an operator's policy file (TURNSTILE_POLICY): per-turn budgets
// by session mode and overrides of tools' orchestration metadata. It is
// immutable once loaded.
//
// Precedence: for tool metadata, the policy beats the tool's schema.json;
// for budgets, the policy beats TURNSTILE_*_MAX_* (environment or flags),
// which beat the built-in defaults. A mode the policy leaves out keeps the
// lower layers' budget.
type Policy struct {
	// File is the path the policy was loaded from; errors name it.
	File    string
	Budgets map[protocol.Mode]Budget // by mode: "text", "voice"
	Tools   map[string]ToolOverride  // by tool name

	lines map[string]int // key path → line in File, for errors found later
}

// Budget is the per-turn gate of one session mode.
type Budget struct {
	MaxRetrieval int `json:"maxRetrieval"` // retrieval calls per turn
	MaxCalls     int `json:"maxCalls"`     // calls of any kind per turn, retrieval included
}

// Check says what is wrong with a budget, nil when nothing: a number below
// 0 or above the largest a budget may set, or more retrieval calls than
// calls. Policy files and assistant profiles both check theirs with it.
func (b Budget) Check() error {
	for _, f := range []struct {
		name string
		n    int
	}{{"maxRetrieval", b.MaxRetrieval}, {"maxCalls", b.MaxCalls}} {
		if f.n < 0 || f.n > maxBudget {
			return fmt.Errorf("%s (%d) must be from 0 to %d", f.name, f.n, maxBudget)
		}
	}
	if b.MaxRetrieval > b.MaxCalls {
		return fmt.Errorf("maxRetrieval (%d) must not exceed maxCalls (%d): retrieval calls count toward the call budget",
			b.MaxRetrieval, b.MaxCalls)
	}
	return nil
}

// ToolOverride replaces a tool's manifest metadata; a nil field keeps the
// manifest's value.
type ToolOverride struct {
	Modes                []protocol.Mode `json:"modes,omitempty"`
	RequiresConfirmation *bool           `json:"requiresConfirmation,omitempty"`
	Terminal             *bool           `json:"terminal,omitempty"`
	Sensitive            *bool           `json:"sensitive,omitempty"`
	SoftLatencyMs        *int            `json:"softLatencyMs,omitempty"`
	TimeoutMs            *int            `json:"timeoutMs,omitempty"`
	Category             *Category       `json:"category,omitempty"`
	// Redact replaces the tool's allow-lists: a nil list keeps the
	// manifest's, an empty one shows nothing. It is how an operator lets
	// the browser and logs see some arguments or results of a tool whose
	// manifest they do not write (MCP tools show nothing by default).
	Redact *RedactOverride `json:"redact,omitempty"`
}

// RedactOverride is the redact block of a policy's tool entry.
type RedactOverride struct {
	Args   []string `json:"args,omitempty"`
	Result []string `json:"result,omitempty"`
}

// PolicyError is one problem of a policy file, naming the file, the line
// when known (0 otherwise) and the key path (e.g. "tools.kb_search.modes").
type PolicyError struct {
	File string
	Line int
	Key  string
	Err  error
}

func (e *PolicyError) Error() string {
	where := e.File
	if e.Line > 0 {
		where = fmt.Sprintf("%s:%d", e.File, e.Line)
	}
	if e.Key == "" {
		return fmt.Sprintf("%s: %v", where, e.Err)
	}
	return fmt.Sprintf("%s: %s: %v", where, e.Key, e.Err)
}

func (e *PolicyError) Unwrap() error { return e.Err }

// maxPolicyBytes bounds what LoadPolicy reads; a real policy is a few KiB.
const maxPolicyBytes = 1 << 20

// Limits shared with manifest.schema.json.
const (
	minLatencyMs = 1
	maxLatencyMs = 600000
)

// Budget returns the policy's budget for a mode, if it sets one.
func (p *Policy) Budget(mode protocol.Mode) (Budget, bool) {
	if p == nil {
		return Budget{}, false
	}
	b, ok := p.Budgets[mode]
	return b, ok
}

// LoadPolicy reads and validates a policy file: YAML for .yaml and .yml,
// JSON for .json (any other extension is refused). Unknown keys, duplicate
// keys, unknown modes or categories, wrong types, out-of-range numbers and
// maxRetrieval above maxCalls are errors; all of them are reported at once,
// joined, each a *PolicyError. Tool names are checked later, against a
// registry, by Registry.WithPolicy.
func LoadPolicy(path string) (*Policy, error) {
	p, errs := readPolicy(path)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return p, nil
}

// readPolicy returns the policy as far as it is valid (nil when the file
// cannot be read or parsed) and every problem found.
func readPolicy(path string) (*Policy, []error) {
	fail := func(err error) (*Policy, []error) {
		return nil, []error{&PolicyError{File: path, Err: err}}
	}
	var decode func([]byte) (*pnode, error)
	switch strings.ToLower(filepath.Ext(path)) {
	case ".yaml", ".yml":
		decode = decodeYAMLPolicy
	case ".json":
		decode = decodeJSONPolicy
	default:
		return fail(errors.New("unknown format: the file name must end in .yaml, .yml or .json"))
	}
	f, err := os.Open(path)
	if err != nil {
		return fail(fmt.Errorf("read: %w", err))
	}
	defer func() { _ = f.Close() }()
	data, err := io.ReadAll(io.LimitReader(f, maxPolicyBytes+1))
	if err != nil {
		return fail(fmt.Errorf("read: %w", err))
	}
	if len(data) > maxPolicyBytes {
		return fail(fmt.Errorf("larger than %d bytes", maxPolicyBytes))
	}
	root, err := decode(data)
	if err != nil {
		return fail(fmt.Errorf("parse: %w", err))
	}
	if root == nil || root.kind == pNull {
		return fail(errors.New("the policy is empty; set budgets or tools (or unset TURNSTILE_POLICY)"))
	}
	pc := &policyChecker{p: &Policy{File: path, lines: map[string]int{}}}
	pc.document(root)
	return pc.p, pc.errs
}

// policyChecker walks a decoded policy, filling p and collecting errors.
type policyChecker struct {
	p    *Policy
	errs []error
}

func (pc *policyChecker) fail(n *pnode, key, format string, args ...any) {
	pc.errs = append(pc.errs, &PolicyError{File: pc.p.File, Line: n.line, Key: key, Err: fmt.Errorf(format, args...)})
}

// mapping checks that n is a mapping with only allowed keys and calls each
// for every allowed key, in document order.
func (pc *policyChecker) mapping(n *pnode, key string, allowed []string, each func(k string, v *pnode)) {
	if n.kind != pMap {
		pc.fail(n, key, "must be a mapping, not %s", n.kind)
		return
	}
	for i, k := range n.keys {
		full := joinKey(key, k)
		if allowed != nil && !slices.Contains(allowed, k) {
			pc.fail(n.vals[i], full, "unknown key (allowed: %s)", strings.Join(allowed, ", "))
			continue
		}
		each(k, n.vals[i])
	}
}

func joinKey(parent, k string) string {
	if parent == "" {
		return k
	}
	return parent + "." + k
}

func (pc *policyChecker) document(root *pnode) {
	pc.mapping(root, "", []string{"budgets", "tools"}, func(k string, v *pnode) {
		if k == "budgets" {
			pc.budgets(v)
		} else {
			pc.tools(v)
		}
	})
}

func (pc *policyChecker) budgets(n *pnode) {
	pc.p.Budgets = map[protocol.Mode]Budget{}
	pc.mapping(n, "budgets", nil, func(k string, v *pnode) {
		key, mode := "budgets."+k, protocol.Mode(k)
		if !mode.Valid() {
			pc.fail(v, key, "unknown mode (use text or voice)")
			return
		}
		var b Budget
		present, bad := map[string]bool{}, false
		pc.mapping(v, key, []string{"maxRetrieval", "maxCalls"}, func(field string, fv *pnode) {
			present[field] = true
			n, ok := pc.integer(fv, key+"."+field, 0, -1)
			if !ok {
				bad = true
			} else if field == "maxRetrieval" {
				b.MaxRetrieval = n
			} else {
				b.MaxCalls = n
			}
		})
		if v.kind != pMap {
			return
		}
		for _, field := range []string{"maxRetrieval", "maxCalls"} {
			if !present[field] {
				pc.fail(v, key, "missing %s (a budget sets both maxRetrieval and maxCalls)", field)
				bad = true
			}
		}
		if bad {
			return
		}
		if err := b.Check(); err != nil {
			pc.fail(v, key, "%w", err)
			return
		}
		pc.p.Budgets[mode] = b
	})
}

// overrideKeys are the manifest fields a policy may override.
var overrideKeys = []string{"modes", "requiresConfirmation", "terminal", "sensitive", "softLatencyMs", "timeoutMs", "category", "redact"}

func (pc *policyChecker) tools(n *pnode) {
	pc.p.Tools = map[string]ToolOverride{}
	pc.mapping(n, "tools", nil, func(name string, v *pnode) {
		key := "tools." + name
		pc.p.lines[key] = v.line
		var o ToolOverride
		bad := false
		pc.mapping(v, key, overrideKeys, func(field string, fv *pnode) {
			fkey := key + "." + field
			switch field {
			case "modes":
				modes, ok := pc.modes(fv, fkey)
				o.Modes, bad = modes, bad || !ok
			case "requiresConfirmation", "terminal", "sensitive":
				if fv.kind != pBool {
					pc.fail(fv, fkey, "must be true or false, not %s", fv.kind)
					bad = true
					return
				}
				b := fv.bool
				switch field {
				case "terminal":
					o.Terminal = &b
				case "sensitive":
					o.Sensitive = &b
				default:
					o.RequiresConfirmation = &b
				}
			case "softLatencyMs", "timeoutMs":
				ms, ok := pc.integer(fv, fkey, minLatencyMs, maxLatencyMs)
				if !ok {
					bad = true
				} else if field == "timeoutMs" {
					o.TimeoutMs = &ms
				} else {
					o.SoftLatencyMs = &ms
				}
			case "category":
				c := Category(fv.text)
				if fv.kind != pString || !validCategory(c) {
					pc.fail(fv, fkey, "must be retrieval, action or utility")
					bad = true
					return
				}
				o.Category = &c
			case "redact":
				r, ok := pc.redact(fv, fkey)
				o.Redact, bad = r, bad || !ok
			}
		})
		if !bad && v.kind == pMap {
			pc.p.Tools[name] = o
		}
	})
}

func (pc *policyChecker) modes(n *pnode, key string) ([]protocol.Mode, bool) {
	if n.kind != pList || len(n.items) == 0 {
		pc.fail(n, key, "must be a non-empty list of modes (text, voice)")
		return nil, false
	}
	var out []protocol.Mode
	for i, item := range n.items {
		ikey := fmt.Sprintf("%s[%d]", key, i)
		mode := protocol.Mode(item.text)
		switch {
		case item.kind != pString || !mode.Valid():
			pc.fail(item, ikey, "unknown mode (use text or voice)")
			return nil, false
		case slices.Contains(out, mode):
			pc.fail(item, ikey, "%s is listed twice", item.text)
			return nil, false
		}
		out = append(out, mode)
	}
	return out, true
}

// redact checks a redact override: a mapping with args and/or result, each
// a list of distinct non-empty keys (possibly empty).
func (pc *policyChecker) redact(n *pnode, key string) (*RedactOverride, bool) {
	out, ok := &RedactOverride{}, true
	pc.mapping(n, key, []string{"args", "result"}, func(field string, v *pnode) {
		fkey := key + "." + field
		if v.kind != pList {
			pc.fail(v, fkey, "must be a list of keys (may be empty: nothing shown)")
			ok = false
			return
		}
		list := []string{}
		for i, item := range v.items {
			ikey := fmt.Sprintf("%s[%d]", fkey, i)
			switch {
			case item.kind != pString || item.text == "":
				pc.fail(item, ikey, "must be a non-empty string")
				ok = false
				return
			case slices.Contains(list, item.text):
				pc.fail(item, ikey, "%s is listed twice", item.text)
				ok = false
				return
			}
			list = append(list, item.text)
		}
		if field == "args" {
			out.Args = list
		} else {
			out.Result = list
		}
	})
	return out, ok && n.kind == pMap
}

// integer checks a whole number in [lo, hi] (hi < 0: no upper bound).
func (pc *policyChecker) integer(n *pnode, key string, lo, hi int) (int, bool) {
	if n.kind != pInt {
		pc.fail(n, key, "must be a whole number, not %s", n.kind)
		return 0, false
	}
	switch {
	case n.num < 0 && lo >= 0:
		pc.fail(n, key, "must not be negative")
	case n.num < int64(lo):
		pc.fail(n, key, "must be at least %d", lo)
	case hi >= 0 && n.num > int64(hi):
		pc.fail(n, key, "must be at most %d", hi)
	case n.num > int64(maxBudget):
		pc.fail(n, key, "must be at most %d", maxBudget)
	default:
		return int(n.num), true
	}
	return 0, false
}

// maxBudget keeps every number a policy sets well inside int on any platform.
const maxBudget = 1 << 30

func validCategory(c Category) bool {
	return c == CategoryRetrieval || c == CategoryAction || c == CategoryUtility
}
