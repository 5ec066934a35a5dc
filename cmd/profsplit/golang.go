package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"strings"
	"time"
)

// splitGo reads a Go CPU profile through `go tool pprof -traces`, which
// prints every distinct stack (leaf first) with its sampled time; profiles
// from /debug/pprof are symbolized, so no binary is needed.
func splitGo(path string) (*split, error) {
	var out, errb bytes.Buffer
	cmd := exec.Command("go", "tool", "pprof", "-traces", path)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("go tool pprof -traces %s: %v: %s", path, err, errb.String())
	}
	return parseTraces(&out)
}

var (
	durationLine = regexp.MustCompile(`^Duration: ([0-9.]+\w+)`)
	sampleLine   = regexp.MustCompile(`^\s*([0-9.]+)(ns|us|µs|ms|s)\s+(\S.*)$`)
)

// parseTraces parses pprof's -traces text: a header with the duration, then
// blocks divided by "-----------+---…" lines, each a time and a stack whose
// first line is the leaf.
func parseTraces(r io.Reader) (*split, error) {
	s := newSplit()
	var d time.Duration
	var stack []string
	flush := func() {
		if len(stack) > 0 {
			s.add(classifyGo(stack), d)
		}
		stack = stack[:0]
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		// Each regexp runs once a line, in the order of the cases below.
		dm := durationLine.FindStringSubmatch(line)
		var sm []string
		if dm == nil && len(stack) == 0 {
			sm = sampleLine.FindStringSubmatch(line)
		}
		switch {
		case strings.HasPrefix(line, "-----------+"):
			flush()
		case dm != nil:
			if v, err := time.ParseDuration(dm[1]); err == nil {
				s.duration = v
			}
		case sm != nil:
			m := sm
			v, err := time.ParseDuration(m[1] + m[2])
			if err != nil {
				return nil, fmt.Errorf("bad sample time in %q", line)
			}
			d = v
			stack = append(stack, frameName(m[3]))
		case len(stack) > 0 && strings.TrimSpace(line) != "":
			stack = append(stack, frameName(line))
		}
	}
	flush()
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if s.total == 0 {
		return nil, fmt.Errorf("no samples in the profile")
	}
	return s, nil
}

// frameName is a stack line's function, without the inlining mark.
func frameName(line string) string {
	f := strings.TrimSpace(line)
	f = strings.TrimSuffix(f, " (inline)")
	return f
}
