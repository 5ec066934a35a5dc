//go:build unix

package main

import (
	"fmt"
	"syscall"
)

// raiseFileLimit raises this process's soft open-file limit to at least
// want (never above the hard limit): an idle run holds one socket per
// session. Only the load generator's own limit changes.
func raiseFileLimit(want uint64) error {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return fmt.Errorf("read the open-file limit: %w", err)
	}
	if uint64(rl.Cur) >= want {
		return nil
	}
	if uint64(rl.Max) < want {
		return fmt.Errorf("the open-file hard limit is %d; %d sessions need %d: raise it (ulimit -Hn, as root)", rl.Max, want-256, want)
	}
	rl.Cur = rl.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return fmt.Errorf("raise the open-file limit: %w", err)
	}
	return nil
}
