package tools

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/turnstile-gw/turnstile/protocol"
)

// WithPolicy returns a registry whose tools carry the policy's metadata
// overrides; r itself is unchanged. Every override must name a registered
// tool and hold valid values; all problems are reported at once, each a
// *PolicyError naming the policy file and key. Budgets are not part of a
// registry: read them with Policy.Budget.
//
// The returned registry's version covers the effective metadata: a policy
// that changes any tool's metadata gives another version, and one that
// changes nothing (no overrides, or overrides equal to the manifests)
// keeps r's version. A nil policy returns r.
func (r *Registry) WithPolicy(p *Policy) (*Registry, error) {
	out, _, err := r.WithPolicyMissing(p, nil)
	return out, err
}

// WithPolicyMissing is WithPolicy for a registry that may lack some tools
// for now: an override naming a tool r does not hold is not an error when
// missing(name) reports true (a tool of an MCP server that cannot be
// reached yet). Such overrides come back as warnings, *PolicyErrors like
// the errors, and take effect once a registry holds the tool. A nil
// missing tolerates nothing.
func (r *Registry) WithPolicyMissing(p *Policy, missing func(name string) bool) (reg *Registry, warnings []error, err error) {
	if p == nil {
		return r, nil, nil
	}
	errs, warnings := r.unknownTools(p, missing)
	for name, o := range p.Tools {
		key := "tools." + name
		for _, err := range o.check() {
			errs = append(errs, &PolicyError{File: p.File, Line: p.lines[key], Key: key, Err: err})
		}
		if t, ok := r.byName[name]; ok && o.Redact != nil {
			for _, k := range o.Redact.Args {
				if !slices.Contains(t.properties, k) {
					errs = append(errs, &PolicyError{File: p.File, Line: p.lines[key], Key: key + ".redact.args",
						Err: fmt.Errorf("%q is not a parameter of %s (parameters: %s)", k, name, strings.Join(t.properties, ", "))})
				}
			}
		}
	}
	if len(errs) > 0 {
		sortPolicyErrors(errs)
		return nil, nil, errors.Join(errs...)
	}
	sortPolicyErrors(warnings)

	out := &Registry{tools: make([]*Tool, 0, len(r.tools)), byName: make(map[string]*Tool, len(r.tools))}
	changed := false
	for _, t := range r.tools {
		nt := *t
		nt.Modes = slices.Clone(t.Modes)
		if o, ok := p.Tools[t.Name]; ok {
			o.apply(&nt.Manifest)
			changed = changed || metadataKey(&nt) != metadataKey(t)
		}
		out.tools = append(out.tools, &nt)
		out.byName[nt.Name] = &nt
	}
	out.version = r.version
	if changed {
		out.version = policyVersion(r.version, out.tools)
	}
	return out, warnings, nil
}

// ApplyPolicyFile loads a policy file and applies it to r in one step,
// reporting the problems of both steps at once, in line order: unlike
// LoadPolicy followed by WithPolicy, a file with bad values still has its
// tool names checked against r. It is what `gateway tools check` runs.
func (r *Registry) ApplyPolicyFile(path string) (*Registry, *Policy, error) {
	out, p, _, err := r.ApplyPolicyFileMissing(path, nil)
	return out, p, err
}

// ApplyPolicyFileMissing is ApplyPolicyFile tolerating the tools missing
// reports, as WithPolicyMissing does.
func (r *Registry) ApplyPolicyFileMissing(path string, missing func(name string) bool) (*Registry, *Policy, []error, error) {
	p, errs := readPolicy(path)
	if p != nil {
		unknown, _ := r.unknownTools(p, missing)
		errs = append(errs, unknown...)
	}
	if len(errs) > 0 {
		sortPolicyErrors(errs)
		return nil, nil, nil, errors.Join(errs...)
	}
	out, warnings, err := r.WithPolicyMissing(p, missing)
	if err != nil {
		return nil, nil, nil, err
	}
	return out, p, warnings, nil
}

// unknownTools reports every tool the policy names that r does not hold,
// including those whose overrides were invalid: as errors, or as warnings
// for the names missing tolerates.
func (r *Registry) unknownTools(p *Policy, missing func(string) bool) (errs, warnings []error) {
	named := map[string]bool{}
	for name := range p.Tools {
		named[name] = true
	}
	for key := range p.lines {
		if name, ok := strings.CutPrefix(key, "tools."); ok {
			named[name] = true
		}
	}
	for name := range named {
		if _, ok := r.byName[name]; ok {
			continue
		}
		key := "tools." + name
		if missing != nil && missing(name) {
			warnings = append(warnings, &PolicyError{File: p.File, Line: p.lines[key], Key: key,
				Err: errors.New("no such tool yet (its MCP server is not reachable); the entry applies once it is")})
			continue
		}
		errs = append(errs, &PolicyError{File: p.File, Line: p.lines[key], Key: key,
			Err: fmt.Errorf("no such tool (registered: %s)", strings.Join(r.names(), ", "))})
	}
	return errs, warnings
}

// sortPolicyErrors orders problems by line, then key, so that reports read
// top to bottom and do not depend on map order.
func sortPolicyErrors(errs []error) {
	sort.SliceStable(errs, func(i, j int) bool {
		a, okA := errs[i].(*PolicyError)
		b, okB := errs[j].(*PolicyError)
		if !okA || !okB {
			return okA && !okB
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Key < b.Key
	})
}

func (r *Registry) names() []string {
	out := make([]string, len(r.tools))
	for i, t := range r.tools {
		out[i] = t.Name
	}
	return out
}

// check validates an override built by hand, with the rules LoadPolicy
// applies to a file.
func (o ToolOverride) check() []error {
	var errs []error
	if o.Modes != nil {
		if len(o.Modes) == 0 {
			errs = append(errs, errors.New("modes: must be a non-empty list of modes (text, voice)"))
		}
		for i, m := range o.Modes {
			if !m.Valid() || slices.Index(o.Modes, m) != i {
				errs = append(errs, fmt.Errorf("modes[%d]: %q is not a mode or is listed twice (use text, voice)", i, m))
			}
		}
	}
	for _, f := range []struct {
		name string
		v    *int
	}{{"softLatencyMs", o.SoftLatencyMs}, {"timeoutMs", o.TimeoutMs}} {
		if f.v != nil && (*f.v < minLatencyMs || *f.v > maxLatencyMs) {
			errs = append(errs, fmt.Errorf("%s: must be between %d and %d", f.name, minLatencyMs, maxLatencyMs))
		}
	}
	if o.Category != nil && !validCategory(*o.Category) {
		errs = append(errs, errors.New("category: must be retrieval, action or utility"))
	}
	return errs
}

func (o ToolOverride) apply(m *Manifest) {
	if o.Modes != nil {
		m.Modes = slices.Clone(o.Modes)
	}
	if o.RequiresConfirmation != nil {
		m.RequiresConfirmation = *o.RequiresConfirmation
	}
	if o.Terminal != nil {
		m.Terminal = *o.Terminal
	}
	if o.Sensitive != nil {
		b := *o.Sensitive
		m.Sensitive = &b
	}
	if o.SoftLatencyMs != nil {
		m.SoftLatencyMs = LatencyMs{Text: *o.SoftLatencyMs, Voice: *o.SoftLatencyMs, Explicit: true}
	}
	if o.TimeoutMs != nil {
		m.TimeoutMs = *o.TimeoutMs
	}
	if o.Category != nil {
		m.Category = *o.Category
	}
	if o.Redact != nil && o.Redact.Args != nil {
		m.Redact.Args = slices.Clone(o.Redact.Args)
	}
	if o.Redact != nil && o.Redact.Result != nil {
		m.Redact.Result = slices.Clone(o.Redact.Result)
	}
}

// effectiveMetadata is what the orchestrator acts on, normalised so that
// equal behaviour gives equal bytes (mode order does not matter; a latency
// left to its default equals that default written out).
type effectiveMetadata struct {
	Name                 string           `json:"name"`
	Category             Category         `json:"category"`
	Modes                []protocol.Mode  `json:"modes"`
	RequiresConfirmation bool             `json:"requiresConfirmation"`
	Terminal             bool             `json:"terminal"`
	SoftLatencyMs        map[string]int64 `json:"softLatencyMs"`
	TimeoutMs            int64            `json:"timeoutMs"`
	Redact               Redact           `json:"redact"`
	// Sensitive is left out when it is the default, so that registries
	// that never set it keep their version.
	Sensitive *bool `json:"sensitive,omitempty"`
}

func metadataOf(t *Tool) effectiveMetadata {
	modes := slices.Clone(t.Modes)
	slices.Sort(modes)
	return effectiveMetadata{
		Name:                 t.Name,
		Category:             t.Category,
		Modes:                modes,
		RequiresConfirmation: t.RequiresConfirmation,
		Terminal:             t.Terminal,
		SoftLatencyMs:        t.softLatencyDoc(),
		TimeoutMs:            t.Timeout().Milliseconds(),
		Redact:               Redact{Args: sortedNonNil(t.Redact.Args), Result: sortedNonNil(t.Redact.Result)},
		Sensitive:            t.Sensitive,
	}
}

// sortedNonNil normalises an allow-list: order does not matter, and an
// empty list equals a missing one.
func sortedNonNil(s []string) []string {
	out := append([]string{}, s...)
	sort.Strings(out)
	return out
}

func metadataKey(t *Tool) string {
	b, _ := json.Marshal(metadataOf(t)) // plain strings, bools and numbers: cannot fail
	return string(b)
}

// policyVersion hashes the files' version with every tool's effective
// metadata, length-prefixed like contentVersion.
func policyVersion(base string, tools []*Tool) string {
	h := sha256.New()
	writeField(h, []byte("policy"))
	writeField(h, []byte(base))
	for _, t := range tools {
		writeField(h, []byte(metadataKey(t)))
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}
