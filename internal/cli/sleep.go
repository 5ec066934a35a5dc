package cli

import (
	"fmt"
	"io"
	"time"

	"github.com/turnstile-gw/turnstile/internal/clock"
)

// maxPreStopSleep bounds `gateway sleep`: a preStop hook longer than this
// is a typo, and the kubelet kills the pod at its grace period anyway.
const maxPreStopSleep = 10 * time.Minute

// Sleep is `gateway sleep DURATION`: waits, then exits 0. It is the
// preStop hook of Kubernetes clusters without the `sleep` lifecycle action
// (before 1.30): the image is distroless and has no sleep binary of its
// own. See deploy/README.md.
func Sleep(args []string, stderr io.Writer) int {
	if len(args) != 1 {
		fmt.Fprintln(stderr, "usage: gateway sleep DURATION (e.g. 5s): waits, for a Kubernetes preStop hook")
		return 2
	}
	d, err := time.ParseDuration(args[0])
	if err != nil || d < 0 || d > maxPreStopSleep {
		fmt.Fprintf(stderr, "gateway sleep: %q: want a Go duration from 0s to %s, e.g. 5s\n", args[0], maxPreStopSleep)
		return 2
	}
	clock.Wall.Sleep(d)
	return 0
}
