package settings

// The checks of values that several settings share. Each error leaves the
// value out: the caller names the setting and shows the value (or not, for
// a secret).

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"unicode"
)

// Folder checks that path is an existing directory.
func Folder(path string) error {
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		return fmt.Errorf("cannot use folder: %w", err)
	case !fi.IsDir():
		return errors.New("is not a directory")
	}
	return nil
}

// RegularFile checks that path is an existing regular file; what names it
// in the error ("policy file"; "" is "file").
func RegularFile(path, what string) error {
	if what == "" {
		what = "file"
	}
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		return fmt.Errorf("cannot use %s: %w", what, err)
	case !fi.Mode().IsRegular():
		return errors.New("is not a regular file")
	}
	return nil
}

// PlainString checks that v has no control characters and no surrounding
// blanks (a name, a key: a stray newline or space would be kept).
func PlainString(v string) error {
	if strings.ContainsFunc(v, unicode.IsControl) || strings.TrimSpace(v) != v {
		return errors.New("has control characters or surrounding blanks")
	}
	return nil
}

// ErrURLScheme is AbsoluteURL's error for a URL of another scheme (or
// none), for a caller that adds an example.
var ErrURLScheme = errors.New("not of an accepted scheme")

// AbsoluteURL parses v as an absolute URL of one of schemes (lower case)
// with a host. Its errors never quote v: a URL may carry a password.
func AbsoluteURL(v string, schemes ...string) (*url.URL, error) {
	u, err := url.Parse(v)
	if err != nil {
		return nil, errors.New("not a valid URL")
	}
	ok := false
	for _, s := range schemes {
		ok = ok || u.Scheme == s
	}
	if !ok {
		return nil, &schemeError{schemes}
	}
	if u.Host == "" {
		return nil, errors.New("has no host")
	}
	return u, nil
}

// schemeError says which schemes a URL may have: "must be an absolute
// http or https URL".
type schemeError struct{ schemes []string }

func (e *schemeError) Error() string {
	list := e.schemes[0]
	if n := len(e.schemes); n > 1 {
		list = strings.Join(e.schemes[:n-1], ", ") + " or " + e.schemes[n-1]
	}
	return "must be an absolute " + list + " URL"
}

func (e *schemeError) Is(target error) bool { return target == ErrURLScheme }

// OptionalFolder takes the path of an existing directory into a field; an
// empty value leaves it "" (the caller's default: an embedded sample, no
// profiles, no HTTP tools).
func OptionalFolder[C any](field func(*C) *string) func(*C, string) error {
	return func(c *C, v string) error {
		if v == "" {
			return nil
		}
		if err := Folder(v); err != nil {
			return err
		}
		*field(c) = v
		return nil
	}
}

// OptionalFile takes the path of an existing regular file into a field;
// what names it in the error (as RegularFile's). An empty value leaves the
// field "" (the caller's default: no policy, no MCP servers, plain HTTP).
func OptionalFile[C any](what string, field func(*C) *string) func(*C, string) error {
	return func(c *C, v string) error {
		if v == "" {
			return nil
		}
		if err := RegularFile(v, what); err != nil {
			return err
		}
		*field(c) = v
		return nil
	}
}

// Plain takes a value PlainString accepts into a field (a token claim to
// compare with, a stream key).
func Plain[C any](field func(*C) *string) func(*C, string) error {
	return func(c *C, v string) error {
		if err := PlainString(v); err != nil {
			return err
		}
		*field(c) = v
		return nil
	}
}

// Key takes an API key or token into a field: no whitespace or control
// characters (a pasted newline would otherwise fail far from its cause).
func Key[C any](field func(*C) *Secret) func(*C, string) error {
	return func(c *C, v string) error {
		if strings.ContainsFunc(v, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) {
			return errors.New("contains whitespace or control characters")
		}
		*field(c) = Secret(v)
		return nil
	}
}
