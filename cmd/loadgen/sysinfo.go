package main

import (
	"os"
	"strings"
)

// loadAverage is the machine's 1, 5 and 15 minute load averages as the
// kernel reports them, or "" where /proc/loadavg does not exist.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}
