//go:build unix

package gateway

import "syscall"

// openFileLimit is the process's soft RLIMIT_NOFILE (Go raises it to the
// hard limit at start); 0 when it cannot be read or is unlimited.
func openFileLimit() uint64 {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0
	}
	cur := uint64(rl.Cur) // int64 on some systems
	if cur == ^uint64(0) {
		return 0
	}
	return cur
}
