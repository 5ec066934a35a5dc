package settings

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

type part struct {
	N int
	D time.Duration
	F float64
	B bool
}

type whole struct {
	Name string
	Part part
}

func TestLiftedRowsFillTheirPartOfTheWhole(t *testing.T) {
	rows := Lift([]Setting[part]{
		Int("X_N", 3, "n", 1, 10, func(p *part) *int { return &p.N }),
		Duration("X_D", "1s", "d", time.Second, func(p *part) *time.Duration { return &p.D }),
		Float("X_F", "0.5", "f", 0.1, func(p *part) *float64 { return &p.F }),
		{Env: "X_B", Def: "false", Apply: Bool(func(p *part) *bool { return &p.B })},
	}, func(w *whole) *part { return &w.Part })
	var w whole
	for _, r := range rows {
		if err := r.Apply(&w, map[string]string{"X_N": "7", "X_D": "2m", "X_F": "1.5", "X_B": "true"}[r.Env]); err != nil {
			t.Fatalf("%s: %v", r.Env, err)
		}
	}
	if want := (part{N: 7, D: 2 * time.Minute, F: 1.5, B: true}); w.Part != want {
		t.Errorf("part = %+v, want %+v", w.Part, want)
	}
	if rows[0].Def != "3" || rows[0].Usage != "n (between 1 and 10)" || rows[1].Usage != "d (Go duration such as 500ms, 5s, 1m30s)" {
		t.Errorf("rows lost their default or usage: %+v %+v", rows[0], rows[1])
	}
}

func TestOutOfBoundsValuesAreRefusedNamingTheBound(t *testing.T) {
	var p part
	for _, tc := range []struct {
		row  Setting[part]
		v    string
		want string
	}{
		{Int("N", 0, "", 0, -1, func(p *part) *int { return &p.N }), "-1", "must be at least 0"},
		{Int("N", 0, "", 1, 5, func(p *part) *int { return &p.N }), "6", "must be between 1 and 5"},
		{Int("N", 0, "", 1, 5, func(p *part) *int { return &p.N }), "two", "not a whole number"},
		{Duration("D", "", "", time.Nanosecond, func(p *part) *time.Duration { return &p.D }), "0s", "must be greater than 0"},
		{Duration("D", "", "", 0, func(p *part) *time.Duration { return &p.D }), "-1s", "must not be negative"},
		{Duration("D", "", "", time.Minute, func(p *part) *time.Duration { return &p.D }), "5s", "must be at least 1m0s"},
		{Duration("D", "", "", 0, func(p *part) *time.Duration { return &p.D }), "5", "not a duration (use a unit: 500ms, 5s, 1m30s)"},
		{Float("F", "", "", 1, func(p *part) *float64 { return &p.F }), "NaN", "not a number"},
		{Float("F", "", "", 1, func(p *part) *float64 { return &p.F }), "0.5", "must be at least 1"},
		{Setting[part]{Apply: Bool(func(p *part) *bool { return &p.B })}, "yes", "must be true or false"},
		{Setting[part]{Apply: OptionalInt(1, func(p *part) *int { return &p.N })}, "0", "must be at least 1"},
	} {
		if err := tc.row.Apply(&p, tc.v); err == nil || err.Error() != tc.want {
			t.Errorf("%s=%q: err %v, want %q", tc.row.Env, tc.v, err, tc.want)
		}
	}
	if p != (part{}) {
		t.Errorf("a refused value was stored: %+v", p)
	}
}

func TestFolderAndFileChecksSayWhatIsWrong(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")
	for _, tc := range []struct {
		err  error
		want string // "" = no error
	}{
		{Folder(dir), ""},
		{Folder(file), "is not a directory"},
		{Folder(missing), "cannot use folder: "},
		{RegularFile(file, ""), ""},
		{RegularFile(dir, "policy file"), "is not a regular file"},
		{RegularFile(missing, "policy file"), "cannot use policy file: "},
		{RegularFile(missing, ""), "cannot use file: "},
	} {
		switch {
		case tc.want == "" && tc.err != nil:
			t.Errorf("unexpected error %v", tc.err)
		case tc.want != "" && (tc.err == nil || !strings.HasPrefix(tc.err.Error(), tc.want)):
			t.Errorf("err %v, want one starting %q", tc.err, tc.want)
		}
	}
}

func TestAbsoluteURLNamesTheAcceptedSchemesAndHidesTheValue(t *testing.T) {
	for _, tc := range []struct {
		v       string
		schemes []string
		want    string // "" = accepted
	}{
		{"https://h.example/x", []string{"http", "https"}, ""},
		{"wss://h.example", []string{"http", "https", "ws", "wss"}, ""},
		{"ftp://user:pw@h.example", []string{"http", "https"}, "must be an absolute http or https URL"},
		{"h.example/x", []string{"https"}, "must be an absolute https URL"},
		{"ftp://h", []string{"http", "https", "ws", "wss"}, "must be an absolute http, https, ws or wss URL"},
		{"http://", []string{"http"}, "has no host"},
		{"http://pw@h\x7f", []string{"http"}, "not a valid URL"},
	} {
		_, err := AbsoluteURL(tc.v, tc.schemes...)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%q: %v", tc.v, err)
		case tc.want != "" && (err == nil || err.Error() != tc.want):
			t.Errorf("%q: err %v, want %q", tc.v, err, tc.want)
		case err != nil && strings.Contains(err.Error(), "pw"):
			t.Errorf("%q: the error shows the value: %v", tc.v, err)
		}
		if strings.HasPrefix(tc.want, "must be") && !errors.Is(err, ErrURLScheme) {
			t.Errorf("%q: a scheme error is not ErrURLScheme", tc.v)
		}
	}
}

func TestFlagNameDerivesFromTheVariable(t *testing.T) {
	for env, want := range map[string]string{"TURNSTILE_MAX_CALLS": "max-calls", "REDIS_URL": "redis-url"} {
		if got := FlagName(env); got != want {
			t.Errorf("FlagName(%s) = %s, want %s", env, got, want)
		}
	}
}

// The string checks shared as rows: an optional folder, a plain string, a
// key. A refused value is not stored; an empty folder is the caller's
// default.
func TestStringRowsStoreOnlyWhatTheyAccept(t *testing.T) {
	type strs struct {
		Dir, File, Name string
		Key             Secret
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	folder := OptionalFolder(func(s *strs) *string { return &s.Dir })
	policy := OptionalFile("policy file", func(s *strs) *string { return &s.File })
	plain := Plain(func(s *strs) *string { return &s.Name })
	key := Key(func(s *strs) *Secret { return &s.Key })
	for _, tc := range []struct {
		apply func(*strs, string) error
		v     string
		want  string // "" = accepted
	}{
		{folder, file, "is not a directory"},
		{folder, filepath.Join(dir, "missing"), "cannot use folder: "},
		{policy, dir, "is not a regular file"},
		{policy, filepath.Join(dir, "missing"), "cannot use policy file: "},
		{plain, " tenant", "has control characters or surrounding blanks"},
		{plain, "a\nb", "has control characters or surrounding blanks"},
		{key, "sk-1 2", "contains whitespace or control characters"},
		{key, "sk-12\n", "contains whitespace or control characters"},
	} {
		var s strs
		if err := tc.apply(&s, tc.v); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%q: err %v, want one starting %q", tc.v, err, tc.want)
		}
		if s != (strs{}) {
			t.Errorf("%q: a refused value was stored: %+v", tc.v, s)
		}
	}
	var s strs
	for _, ok := range []error{folder(&s, ""), folder(&s, dir), policy(&s, ""), policy(&s, file), plain(&s, "tenant"), key(&s, "sk-12")} {
		if ok != nil {
			t.Fatal(ok)
		}
	}
	if s != (strs{Dir: dir, File: file, Name: "tenant", Key: "sk-12"}) {
		t.Errorf("accepted values not stored: %+v", s)
	}
}

// A command reading a few settings from the environment gets the defaults
// of the unset ones, and each refusal names its variable but not the value
// (a URL may carry a password).
func TestReadFillsDefaultsAndNamesEachRefusedVariable(t *testing.T) {
	rows := []Setting[part]{
		Int("X_N", 3, "n", 1, 10, func(p *part) *int { return &p.N }),
		Duration("X_D", "1s", "d", time.Second, func(p *part) *time.Duration { return &p.D }),
		{Env: "X_B", Def: "false", Apply: Bool(func(p *part) *bool { return &p.B })},
	}
	var p part
	if err := Read(&p, rows, func(k string) string { return map[string]string{"X_B": "true"}[k] }); err != nil {
		t.Fatal(err)
	}
	if want := (part{N: 3, D: time.Second, B: true}); p != want {
		t.Errorf("read %+v, want %+v", p, want)
	}
	err := Read(&p, rows, func(k string) string { return map[string]string{"X_N": "hunter2", "X_D": "0s"}[k] })
	if err == nil || !strings.Contains(err.Error(), "X_N: not a whole number") ||
		!strings.Contains(err.Error(), "X_D: must be at least 1s") || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("err %v, want both variables named and no value shown", err)
	}
}

func TestReadKeepsAValueAdjustedWithAWarning(t *testing.T) {
	rows := []Setting[part]{{Env: "X_N", Def: "0", Apply: func(p *part, v string) error {
		p.N = 1
		return Warning("X_N=" + v + " is below 1: using 1")
	}}}
	var p part
	if err := Read(&p, rows, func(string) string { return "" }); err != nil || p.N != 1 {
		t.Errorf("read %+v, %v; want N=1 and no error", p, err)
	}
	var w Warning
	if err := rows[0].Apply(&p, "-3"); !errors.As(err, &w) || w.Error() != "X_N=-3 is below 1: using 1" {
		t.Errorf("Apply: %v, want the warning naming the setting and value", err)
	}
}
