package tools

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// placeholder is a {name} of an HTTP tool's URL template; name is a
// parameter name (manifest.schema.json's propertyNames).
var placeholder = regexp.MustCompile(`\{([^{}]*)\}`)

// paramName is what a parameter may be called.
var paramName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)

// URLPlaceholders returns the parameter names of the {name} placeholders
// of an HTTP tool's URL, in order, each once. Placeholders may stand only
// in the URL's path (after the host, before any ? or #), so that an
// argument can change neither where a request goes nor its fixed query;
// a brace anywhere else, or one that is not a whole {name}, is an error.
func URLPlaceholders(raw string) ([]string, error) {
	rest, ok := strings.CutPrefix(raw, "https://")
	if !ok {
		rest, _ = strings.CutPrefix(raw, "http://")
	}
	slash := strings.IndexByte(rest, '/')
	if slash < 0 {
		slash = len(rest)
	}
	host, path := rest[:slash], rest[slash:]
	tail := ""
	if i := strings.IndexAny(path, "?#"); i >= 0 {
		path, tail = path[:i], path[i:]
	}
	if strings.ContainsAny(host, "{}") {
		return nil, fmt.Errorf("a {placeholder} may only stand in the path, not in the host")
	}
	if strings.ContainsAny(tail, "{}") {
		return nil, fmt.Errorf("a {placeholder} may only stand in the path, not in the query or fragment")
	}
	var names []string
	for _, m := range placeholder.FindAllStringSubmatch(path, -1) {
		if !paramName.MatchString(m[1]) {
			return nil, fmt.Errorf("%q is not a placeholder: use {name}, name a parameter", Clip(m[0], 70))
		}
		if !slices.Contains(names, m[1]) {
			names = append(names, m[1])
		}
	}
	if strings.ContainsAny(placeholder.ReplaceAllString(path, ""), "{}") {
		return nil, fmt.Errorf("an unmatched { or } in the path")
	}
	return names, nil
}

// checkURLTemplate checks the placeholders of an HTTP tool's URL against
// its parameters (props, sorted): each must name one.
func checkURLTemplate(raw string, props []string) []error {
	names, err := URLPlaceholders(raw)
	if err != nil {
		return []error{fmt.Errorf("http.url: %w", err)}
	}
	var errs []error
	for _, n := range names {
		if !slices.Contains(props, n) {
			errs = append(errs, fmt.Errorf("http.url: {%s} names no parameter: declare %q in parameters.properties", n, n))
		}
	}
	return errs
}
