package tools

import "slices"

// Subset returns a registry of only the named tools of r (names it does not
// hold are ignored), with r's version: an assistant profile offering part
// of the tools. A call to a tool outside the subset is NOT_FOUND.
func (r *Registry) Subset(names []string) *Registry {
	out := &Registry{byName: map[string]*Tool{}, version: r.version}
	for _, t := range r.tools {
		if slices.Contains(names, t.Name) {
			out.tools = append(out.tools, t)
			out.byName[t.Name] = t
		}
	}
	return out
}
