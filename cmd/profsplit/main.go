// Command profsplit splits a relay's CPU profile into the parts issue 23
// asks about — runtime scheduling, WebSocket framing and masking, base64,
// JSON, syscalls, garbage collection, the relay's own code — for a Go
// profile (the gateway's /debug/pprof/profile) and a V8 profile (Node's
// .cpuprofile, as `node --cpu-prof` writes) alike, so that the two relays
// are compared part by part:
//
//	go run ./cmd/profsplit -sessions 200 turnstile-n200.pprof noderelay-n200.cpuprofile
//
// Every sample goes to exactly one part. A sample is first placed by what
// its stack is doing (a collection, the scheduler, a system call), then by
// the code its leaf belongs to, looking through shared helpers (memmove,
// bufio, io) to the code that called them. The rules are in rules.go.
//
// With -sessions N each part is also given in CPU milliseconds per
// session-second (the profile's sampled time / N / the profile's
// duration), relaybench's unit.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

func main() {
	sessions := flag.Int("sessions", 0, "sessions under load while profiled: adds CPU ms per session-second")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: profsplit [-sessions N] PROFILE... (Go pprof, or V8 .cpuprofile)")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	for _, path := range flag.Args() {
		s, err := load(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, "profsplit:", err)
			os.Exit(1)
		}
		s.write(os.Stdout, path, *sessions)
	}
}

// split is one profile's sampled CPU time by part.
type split struct {
	parts    map[string]time.Duration
	total    time.Duration
	duration time.Duration // the profile's wall-clock span
}

func newSplit() *split { return &split{parts: map[string]time.Duration{}} }

func (s *split) add(part string, d time.Duration) {
	s.parts[part] += d
	s.total += d
}

func load(path string) (*split, error) {
	if strings.HasSuffix(path, ".cpuprofile") {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		return splitV8(f)
	}
	return splitGo(path)
}

func (s *split) write(w io.Writer, name string, sessions int) {
	fmt.Fprintf(w, "%s: %.2f s of CPU sampled over %.1f s (%.2f cores)\n", name, s.total.Seconds(),
		s.duration.Seconds(), s.total.Seconds()/max(s.duration.Seconds(), 1e-9))
	names := make([]string, 0, len(s.parts))
	for p := range s.parts {
		names = append(names, p)
	}
	sort.Slice(names, func(i, j int) bool { return s.parts[names[i]] > s.parts[names[j]] })
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "part\tshare\tCPU s\t"
	if sessions > 0 {
		head += "ms/sess-s\t"
	}
	fmt.Fprintln(tw, head)
	for _, p := range names {
		d := s.parts[p]
		line := fmt.Sprintf("%s\t%.1f %%\t%.2f\t", p, 100*d.Seconds()/s.total.Seconds(), d.Seconds())
		if sessions > 0 {
			line += fmt.Sprintf("%.3f\t", perSessionSecond(d, sessions, s.duration))
		}
		fmt.Fprintln(tw, line)
	}
	_ = tw.Flush()
	fmt.Fprintln(w)
}

// perSessionSecond is CPU milliseconds per session-second.
func perSessionSecond(d time.Duration, sessions int, over time.Duration) float64 {
	if over <= 0 {
		return 0
	}
	return 1000 * d.Seconds() / (float64(sessions) * over.Seconds())
}
