package script

import (
	"encoding/xml"
	"fmt"
	"io"
	"strings"
	"time"
)

// Report is how one script went.
type Report struct {
	Script  *Script
	Turns   []TurnReport
	Err     error // the run stopped before the end (nil: every turn was played)
	Elapsed time.Duration
}

// TurnReport is how one turn went.
type TurnReport struct {
	N        int
	Title    string
	Failures []Failure
	Err      error // the turn could not be played or checked through
	Skipped  bool  // not played: the run had stopped
	Events   []Event
	Elapsed  time.Duration
}

// Failure is one expectation that did not hold.
type Failure struct {
	Where, Expected, Got string
}

func (t *TurnReport) fail(where, expected, got string) {
	t.Failures = append(t.Failures, Failure{Where: where, Expected: expected, Got: got})
}

// Passed reports whether every turn was played and met its expectations.
func (r *Report) Passed() bool {
	if r.Err != nil {
		return false
	}
	for _, t := range r.Turns {
		if len(t.Failures) > 0 {
			return false
		}
	}
	return true
}

// Failures counts the turns that did not meet their expectations or could
// not be played.
func (r *Report) Failures() int {
	n := 0
	for _, t := range r.Turns {
		if len(t.Failures) > 0 || t.Err != nil {
			n++
		}
	}
	if r.Err != nil && len(r.Turns) == 0 {
		n++
	}
	return n
}

// WriteText writes the report for a person: a line per turn, and under a
// failed one each mismatch as expected (-) against got (+), naming the
// step.
func (r *Report) WriteText(w io.Writer) {
	verdict := "PASS"
	if !r.Passed() {
		verdict = "FAIL"
	}
	fmt.Fprintf(w, "%s %s (%d turns, %.2fs)\n", verdict, r.Script.Name, len(r.Script.Turns), r.Elapsed.Seconds())
	if r.Err != nil && len(r.Turns) == 0 {
		fmt.Fprintf(w, "    error: %v\n", r.Err)
	}
	for _, t := range r.Turns {
		switch {
		case t.Skipped:
			fmt.Fprintf(w, "  skip %s: not played, the run had stopped\n", t.Title)
			continue
		case len(t.Failures) == 0 && t.Err == nil:
			fmt.Fprintf(w, "  ok   %s\n", t.Title)
			continue
		}
		fmt.Fprintf(w, "  FAIL %s\n", t.Title)
		for _, f := range t.Failures {
			fmt.Fprintf(w, "    %s:\n      - expected: %s\n      + got:      %s\n", f.Where, f.Expected, f.Got)
		}
		if t.Err != nil {
			fmt.Fprintf(w, "    error: %v\n", t.Err)
		}
		if len(t.Events) > 0 {
			fmt.Fprintf(w, "    events: %s\n", eventTypes(t.Events))
		}
	}
}

func eventTypes(evs []Event) string {
	types := make([]string, len(evs))
	for i, e := range evs {
		types[i] = e.Type()
	}
	return strings.Join(types, ", ")
}

// The JUnit XML schema the CI systems read (Jenkins, GitLab, GitHub
// reporters): a suite per script, a test case per turn.
type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name     string      `xml:"name,attr"`
	File     string      `xml:"file,attr,omitempty"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Errors   int         `xml:"errors,attr"`
	Skipped  int         `xml:"skipped,attr"`
	Time     string      `xml:"time,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitProblem `xml:"failure,omitempty"`
	Error     *junitProblem `xml:"error,omitempty"`
	Skipped   *struct{}     `xml:"skipped,omitempty"`
}

type junitProblem struct {
	Message string `xml:"message,attr"`
	Text    string `xml:",chardata"`
}

// WriteJUnit writes the reports as JUnit XML: a test suite per script, a
// test case per turn (failure: its mismatches; error: why it could not be
// played; skipped: not played).
func WriteJUnit(w io.Writer, reports []*Report) error {
	var out junitSuites
	for _, r := range reports {
		s := junitSuite{Name: r.Script.Name, File: r.Script.File(), Time: seconds(r.Elapsed)}
		if r.Err != nil && len(r.Turns) == 0 {
			s.Cases = append(s.Cases, junitCase{Name: "start", Classname: r.Script.Name, Time: "0",
				Error: &junitProblem{Message: r.Err.Error(), Text: r.Err.Error()}})
			s.Errors++
		}
		for _, t := range r.Turns {
			c := junitCase{Name: t.Title, Classname: r.Script.Name, Time: seconds(t.Elapsed)}
			switch {
			case t.Skipped:
				c.Skipped = &struct{}{}
				s.Skipped++
			case len(t.Failures) > 0:
				var b strings.Builder
				for _, f := range t.Failures {
					fmt.Fprintf(&b, "%s:\n  - expected: %s\n  + got:      %s\n", f.Where, f.Expected, f.Got)
				}
				c.Failure = &junitProblem{Message: fmt.Sprintf("%d expectations did not hold", len(t.Failures)), Text: b.String()}
				s.Failures++
			case t.Err != nil:
				c.Error = &junitProblem{Message: t.Err.Error(), Text: t.Err.Error()}
				s.Errors++
			}
			s.Cases = append(s.Cases, c)
		}
		s.Tests = len(s.Cases)
		out.Tests += s.Tests
		out.Failures += s.Failures
		out.Errors += s.Errors
		out.Suites = append(out.Suites, s)
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(out); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.3f", d.Seconds()) }
