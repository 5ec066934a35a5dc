// Package redistest runs a real redis-server for tests, on a free loopback
// port, so that code using Redis is tested against the real thing and not
// only against miniredis.
package redistest

import (
	"bufio"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// startTimeout bounds how long a server may take to answer its first PING.
const startTimeout = 10 * time.Second

// Start runs a redis-server with no persistence on a free 127.0.0.1 port,
// waits until it answers PING and returns its address. The server is killed
// when the test ends. It fails the test when redis-server is not installed.
func Start(t testing.TB) (addr string) {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redistest: redis-server not found on PATH: install it (apt-get install redis-server) or run `make test`, which installs it")
	}
	// Another process can take the free port between our probe and the
	// server's bind; a few attempts make that race harmless.
	var lastErr error
	for range 3 {
		a, err := start(t, bin)
		if err == nil {
			return a
		}
		lastErr = err
	}
	t.Fatalf("redistest: %v", lastErr)
	return ""
}

// start makes one attempt at running a server; on failure nothing is left
// running.
func start(t testing.TB, bin string) (string, error) {
	port, err := freePort()
	if err != nil {
		return "", err
	}
	dir := t.TempDir()
	logPath := filepath.Join(dir, "redis.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return "", err
	}
	defer logFile.Close()

	cmd := exec.Command(bin,
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", dir,
		"--daemonize", "no")
	// A file, not a buffer, so that exec starts no copying goroutines.
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return "", err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	deadline := time.Now().Add(startTimeout)
	for {
		if ping(addr) == nil {
			t.Cleanup(func() {
				_ = cmd.Process.Kill()
				<-exited
			})
			return addr, nil
		}
		select {
		case err := <-exited:
			out, _ := os.ReadFile(logPath)
			return "", errors.New("redis-server exited (" + errString(err) + "): " + string(out))
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-exited
			out, _ := os.ReadFile(logPath)
			return "", errors.New("redis-server did not answer PING within " + startTimeout.String() + ": " + string(out))
		}
	}
}

func errString(err error) string {
	if err == nil {
		return "status 0"
	}
	return err.Error()
}

// freePort asks the kernel for an unused loopback port.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// ping sends an inline PING and expects +PONG.
func ping(addr string) error {
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(500 * time.Millisecond)); err != nil {
		return err
	}
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "+PONG\r\n" {
		return errors.New("unexpected PING answer " + strconv.Quote(line))
	}
	return nil
}
