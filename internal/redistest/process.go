package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// readyTimeout bounds how long a cluster or a sentinel set may take to
// become usable once its processes answer PING.
const readyTimeout = 20 * time.Second

// launch runs bin with args, expecting it to answer PING at addr, and kills
// it when the test ends. Its output goes to a file in dir, quoted in errors.
// On failure nothing is left running.
func launch(t testing.TB, bin string, args []string, addr, dir string) error {
	logPath := filepath.Join(dir, filepath.Base(bin)+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logFile.Close()
	cmd := exec.Command(bin, args...)
	// A file, not a buffer, so that exec starts no copying goroutines.
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(startTimeout)
	for {
		if ping(addr) == nil {
			t.Cleanup(func() {
				_ = cmd.Process.Kill()
				<-exited
			})
			return nil
		}
		select {
		case err := <-exited:
			out, _ := os.ReadFile(logPath)
			return fmt.Errorf("%s exited (%s): %s", filepath.Base(bin), errString(err), out)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-exited
			out, _ := os.ReadFile(logPath)
			return fmt.Errorf("%s did not answer PING at %s within %v: %s", filepath.Base(bin), addr, startTimeout, out)
		}
	}
}

// lookPath finds a Redis binary or fails the test saying how to install it.
func lookPath(t testing.TB, name, pkg string) string {
	t.Helper()
	bin, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("redistest: %s not found on PATH: install it (apt-get install %s) or run `make test`, which installs it", name, pkg)
	}
	return bin
}

// retry makes up to three attempts at fn: another process can take a free
// port between our probe and the server's bind.
func retry(fn func() error) error {
	var err error
	for range 3 {
		if err = fn(); err == nil {
			return nil
		}
	}
	return err
}

func loopback(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// serverArgs are the options of every test redis-server: loopback only, no
// persistence, in the foreground, files in dir.
func serverArgs(port int, dir string, extra ...string) []string {
	return append([]string{
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", dir,
		"--daemonize", "no",
	}, extra...)
}

// poll calls cond every 20 ms until it returns nil, or fails after
// readyTimeout with its last error.
func poll(what string, cond func(ctx context.Context) error) error {
	deadline := time.Now().Add(readyTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := cond(ctx)
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not within %v: %w", what, readyTimeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// with runs fn on a short-lived client of one server.
func with(addr string, fn func(c *redis.Client) error) error {
	c := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: time.Second, ReadTimeout: time.Second,
		WriteTimeout: time.Second, MaxRetries: -1, PoolSize: 1})
	defer c.Close()
	return fn(c)
}

var errNotYet = errors.New("not yet")
