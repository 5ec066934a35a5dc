// Package settings is the table a package declares its settings in: one row
// per setting — its environment variable (the flag twin derives from it),
// its default, its help line, and how a value is checked into a field of
// the package's own configuration — and the checks several settings share
// (numbers with bounds, durations, folders, files, URLs), written once.
//
// The gateway joins the packages' tables into one (Lift), reads flags and
// the environment against it, and prints it as -help.
package settings

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Setting is one row of a table that fills a C.
type Setting[C any] struct {
	Env    string // the environment variable; the flag is FlagName(Env)
	Def    string // the default; "" = unset
	DefDoc string // how the default is shown in -help, when Def alone says too little
	Usage  string
	Secret bool // never echo the value
	// Apply checks v (the resolved value, possibly "") into c. Its error
	// must not repeat v: the caller names the setting and its value.
	Apply func(c *C, v string) error
}

// Warning is what Apply returns when it took a value adjusted instead of
// refusing it (a number below its minimum taken as the minimum): the field
// is set, and the caller logs the warning at start. Unlike an error's, its
// text names the setting and the value.
type Warning string

func (w Warning) Error() string { return string(w) }

// Lift makes rows that fill a part of C (a package's configuration inside
// the gateway's) into rows that fill C.
func Lift[P, C any](rows []Setting[P], part func(*C) *P) []Setting[C] {
	out := make([]Setting[C], len(rows))
	for i, r := range rows {
		apply := r.Apply
		out[i] = Setting[C]{Env: r.Env, Def: r.Def, DefDoc: r.DefDoc, Usage: r.Usage, Secret: r.Secret,
			Apply: func(c *C, v string) error { return apply(part(c), v) }}
	}
	return out
}

// Read fills c from getenv by rows (a row's default where a variable is
// empty), for a command that takes a few of a package's settings from the
// environment only. Each failure names the variable (never the value: it
// may be a secret or a URL with a password), all at once. A Warning is
// not a failure: the adjusted value is kept.
func Read[C any](c *C, rows []Setting[C], getenv func(string) string) error {
	var errs []error
	for _, r := range rows {
		v := getenv(r.Env)
		if v == "" {
			v = r.Def
		}
		var w Warning
		if err := r.Apply(c, v); err != nil && !errors.As(err, &w) {
			errs = append(errs, fmt.Errorf("%s: %w", r.Env, err))
		}
	}
	return errors.Join(errs...)
}

// FlagName derives a setting's flag from its variable: TURNSTILE_MAX_CALLS → max-calls.
func FlagName(env string) string {
	return strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(env, "TURNSTILE_")), "_", "-")
}

// Int is a whole number between lo and hi (hi < 0: no upper bound); the
// bound is added to the usage.
func Int[C any](env string, def int, usage string, lo, hi int, field func(*C) *int) Setting[C] {
	bound := fmt.Sprintf("at least %d", lo)
	if hi >= 0 {
		bound = fmt.Sprintf("between %d and %d", lo, hi)
	}
	return Setting[C]{Env: env, Def: strconv.Itoa(def), Usage: fmt.Sprintf("%s (%s)", usage, bound),
		Apply: func(c *C, v string) error {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			switch {
			case err != nil:
				return errors.New("not a whole number")
			case n < lo || (hi >= 0 && n > hi):
				return fmt.Errorf("must be %s", bound)
			}
			*field(c) = n
			return nil
		}}
}

// OptionalInt parses a whole number of at least lo; an empty value leaves
// the field at 0, for a default derived from other settings.
func OptionalInt[C any](lo int, field func(*C) *int) func(*C, string) error {
	return func(c *C, v string) error {
		if v == "" {
			return nil
		}
		n, err := strconv.Atoi(strings.TrimSpace(v))
		switch {
		case err != nil:
			return errors.New("not a whole number")
		case n < lo:
			return fmt.Errorf("must be at least %d", lo)
		}
		*field(c) = n
		return nil
	}
}

// Float is a number that may be fractional, at least lo.
func Float[C any](env, def, usage string, lo float64, field func(*C) *float64) Setting[C] {
	bound := "at least " + strconv.FormatFloat(lo, 'f', -1, 64)
	return Setting[C]{Env: env, Def: def, Usage: fmt.Sprintf("%s (%s)", usage, bound),
		Apply: func(c *C, v string) error {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			switch {
			case err != nil || math.IsNaN(f) || math.IsInf(f, 0):
				return errors.New("not a number")
			case f < lo:
				return errors.New("must be " + bound)
			}
			*field(c) = f
			return nil
		}}
}

// Duration is a Go duration of at least lo (time.Nanosecond: greater than
// 0; 0: not negative).
func Duration[C any](env, def, usage string, lo time.Duration, field func(*C) *time.Duration) Setting[C] {
	bound := "must be greater than 0"
	if lo == 0 {
		bound = "must not be negative"
	}
	if lo > time.Nanosecond {
		bound = "must be at least " + lo.String()
	}
	return Setting[C]{Env: env, Def: def, Usage: usage + " (Go duration such as 500ms, 5s, 1m30s)",
		Apply: func(c *C, v string) error {
			d, err := time.ParseDuration(strings.TrimSpace(v))
			switch {
			case err != nil:
				return errors.New("not a duration (use a unit: 500ms, 5s, 1m30s)")
			case d < lo:
				return errors.New(bound)
			}
			*field(c) = d
			return nil
		}}
}

// Bool parses true/false (also 1/0, as the genai SDK reads
// GOOGLE_GENAI_USE_VERTEXAI).
func Bool[C any](field func(*C) *bool) func(*C, string) error {
	return func(c *C, v string) error {
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			return errors.New("must be true or false")
		}
		*field(c) = b
		return nil
	}
}
