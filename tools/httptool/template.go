package httptool

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/turnstile-gw/turnstile/tools"
)

// urlTemplate is an HTTP tool's URL with {name} placeholders in its path
// (tools.URLPlaceholders), filled per call from the arguments.
type urlTemplate struct {
	raw   string
	names []string // the placeholders' parameter names; none: a fixed URL
}

func newURLTemplate(raw string) (urlTemplate, error) {
	names, err := tools.URLPlaceholders(raw)
	if err != nil {
		return urlTemplate{}, fmt.Errorf("http.url: %w", err)
	}
	return urlTemplate{raw: raw, names: names}, nil
}

// fill puts the arguments its placeholders name into the URL, each
// path-escaped as one segment's text (a "/" becomes %2F, so an argument
// cannot add or climb path segments), and returns the URL and the
// arguments without those (they are sent once, in the path). A fixed URL
// returns args untouched, byte for byte.
func (t urlTemplate) fill(args json.RawMessage) (string, json.RawMessage, error) {
	if len(t.names) == 0 {
		return t.raw, args, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(args, &obj); err != nil {
		return "", nil, errors.New("arguments are not a JSON object")
	}
	pairs := make([]string, 0, 2*len(t.names))
	for _, name := range t.names {
		v, err := segment(name, obj[name])
		if err != nil {
			return "", nil, err
		}
		pairs = append(pairs, "{"+name+"}", url.PathEscape(v))
		delete(obj, name)
	}
	rest, err := json.Marshal(obj)
	if err != nil {
		return "", nil, err
	}
	return strings.NewReplacer(pairs...).Replace(t.raw), rest, nil
}

// segment is the text of an argument in the URL path.
func segment(name string, raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return "", fmt.Errorf("the URL needs the argument %s, which the call did not give", name)
	}
	var v string
	switch raw[0] {
	case '"':
		if err := json.Unmarshal(raw, &v); err != nil {
			return "", err
		}
	case '{', '[':
		return "", fmt.Errorf("the argument %s stands in the URL, so it must be a string, number or boolean", name)
	default: // a number or a boolean: its JSON text
		v = string(raw)
	}
	if v == "" || v == "." || v == ".." {
		return "", fmt.Errorf("the argument %s stands in the URL path and may not be empty, \".\" or \"..\"", name)
	}
	return v, nil
}
