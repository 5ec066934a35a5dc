//go:build unix

package main

import (
	"fmt"
	"syscall"
)

// fileMargin is the files besides the sessions' sockets a run may hold
// (the metrics scrapes, the runtime's own).
const fileMargin = 256

// checkFileLimit reports an error when this process may not hold a socket
// for each of sessions (an idle run holds one per session) plus a margin.
// The Go runtime has raised the soft open-file limit to the hard one at
// start, so the hard limit is what counts.
func checkFileLimit(sessions uint64) error {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return fmt.Errorf("read the open-file limit: %w", err)
	}
	if want := sessions + fileMargin; uint64(rl.Cur) < want {
		return fmt.Errorf("the open-file limit is %d; %d sessions need %d: raise the hard limit (ulimit -Hn, as root)",
			rl.Cur, sessions, want)
	}
	return nil
}
