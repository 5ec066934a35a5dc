package main

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// series maps a Prometheus series, written as the text exposition writes
// it ("name" or `name{label="value",...}`), to its value.
type series map[string]float64

// Process figures the Go client exports for every process.
const (
	metricCPU        = "process_cpu_seconds_total"
	metricRSS        = "process_resident_memory_bytes"
	metricGoroutines = "go_goroutines"
	metricSessions   = "turnstile_sessions_active"
)

// parsePromText reads the Prometheus text exposition format: one sample a
// line, "# " lines and blank lines skipped, an optional timestamp after the
// value ignored. Label values may hold spaces, braces and escaped quotes.
func parsePromText(r io.Reader) (series, error) {
	out := series{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest, err := splitSeries(line)
		if err != nil {
			return nil, fmt.Errorf("metrics line %d: %w", n, err)
		}
		fields := strings.Fields(rest)
		if len(fields) < 1 || len(fields) > 2 {
			return nil, fmt.Errorf("metrics line %d: want a value and an optional timestamp after %q", n, name)
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return nil, fmt.Errorf("metrics line %d: value of %s: %w", n, name, err)
		}
		out[name] = v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read metrics: %w", err)
	}
	return out, nil
}

// splitSeries cuts a sample line after its series name and labels.
func splitSeries(line string) (name, rest string, err error) {
	i := strings.IndexAny(line, "{ \t")
	if i <= 0 {
		return "", "", fmt.Errorf("no value in %q", line)
	}
	if line[i] != '{' {
		return line[:i], line[i:], nil
	}
	inQuote := false
	for j := i + 1; j < len(line); j++ {
		switch c := line[j]; {
		case inQuote && c == '\\':
			j++ // the escaped character
		case c == '"':
			inQuote = !inQuote
		case !inQuote && c == '}':
			return line[:j+1], line[j+1:], nil
		}
	}
	return "", "", fmt.Errorf("unterminated labels in %q", line)
}

// sum adds up every series of the metric name, labelled or not.
func (s series) sum(name string) float64 {
	var total float64
	for k, v := range s {
		if k == name || (strings.HasPrefix(k, name) && k[len(name)] == '{') {
			total += v
		}
	}
	return total
}
