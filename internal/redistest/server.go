package redistest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Server is a redis-server that a test can stop and start again on the
// same address, as an operator's restart (or a crash and a supervisor's
// restart) does. It has no persistence: it always comes back empty.
// Stop and Restart are for the test's own goroutine (they fail the test).
type Server struct {
	// Addr is the server's host:port; it stays the same across restarts.
	Addr string

	t    testing.TB
	bin  string
	port int

	mu   sync.Mutex
	proc *serverProcess // nil while stopped
}

type serverProcess struct {
	cmd    *exec.Cmd
	exited chan error
}

// StartServer runs a redis-server as Start does (no persistence, a free
// 127.0.0.1 port) and returns it as a Server that can be stopped and
// restarted. Whichever process runs at the end of the test is killed then.
func StartServer(t testing.TB) *Server {
	t.Helper()
	s := &Server{t: t, bin: lookPath(t, "redis-server", "redis-server")}
	err := retry(func() error {
		port, err := freePort()
		if err != nil {
			return err
		}
		s.port, s.Addr = port, loopback(port)
		return s.run()
	})
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	t.Cleanup(func() {
		s.mu.Lock()
		p := s.proc
		s.proc = nil
		s.mu.Unlock()
		if p != nil {
			p.kill()
		}
	})
	return s
}

// Stop kills the server (SIGKILL, as a crash: nothing is saved, and it has
// no persistence anyway) and returns once its port refuses connections.
func (s *Server) Stop() {
	s.t.Helper()
	s.mu.Lock()
	p := s.proc
	s.proc = nil
	s.mu.Unlock()
	if p == nil {
		s.t.Fatalf("redistest: Stop: the server at %s is not running", s.Addr)
	}
	p.kill()
	if ping(s.Addr) == nil {
		s.t.Fatalf("redistest: Stop: %s still answers PING after the server was killed", s.Addr)
	}
}

// Restart runs a new, empty redis-server on the stopped server's port and
// waits until it answers. It fails the test if the port cannot be had back
// within startTimeout (another process took it meanwhile).
func (s *Server) Restart() {
	s.t.Helper()
	s.mu.Lock()
	running := s.proc != nil
	s.mu.Unlock()
	if running {
		s.t.Fatalf("redistest: Restart: the server at %s is running; Stop it first", s.Addr)
	}
	deadline := time.Now().Add(startTimeout)
	for {
		err := s.run()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("redistest: Restart on %s: %v", s.Addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// run starts one redis-server on s.port, in a fresh directory, and waits
// until that very process answers (another server on the port does not
// count). On failure nothing is left running.
func (s *Server) run() error {
	dir := s.t.TempDir()
	logPath := filepath.Join(dir, "redis-server.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logFile.Close()
	cmd := exec.Command(s.bin, serverArgs(s.port, dir)...)
	// A file, not a buffer, so that exec starts no copying goroutines.
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return err
	}
	p := &serverProcess{cmd: cmd, exited: make(chan error, 1)}
	go func() { p.exited <- cmd.Wait() }()
	deadline := time.Now().Add(startTimeout)
	for {
		if ping(s.Addr) == nil && servedBy(s.Addr, cmd.Process.Pid) == nil {
			s.mu.Lock()
			s.proc = p
			s.mu.Unlock()
			return nil
		}
		select {
		case err := <-p.exited:
			out, _ := os.ReadFile(logPath)
			return fmt.Errorf("redis-server exited (%s): %s", errString(err), out)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.kill()
			out, _ := os.ReadFile(logPath)
			return fmt.Errorf("redis-server did not answer PING at %s within %v: %s", s.Addr, startTimeout, out)
		}
	}
}

func (p *serverProcess) kill() {
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// servedBy reports whether the redis-server at addr is process pid.
func servedBy(addr string, pid int) error {
	return with(addr, func(c *redis.Client) error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		info, err := c.Info(ctx, "server").Result()
		if err != nil {
			return err
		}
		for _, line := range strings.Split(info, "\r\n") {
			if v, ok := strings.CutPrefix(line, "process_id:"); ok {
				if v != strconv.Itoa(pid) {
					return fmt.Errorf("%s is served by process %s, not %d", addr, v, pid)
				}
				return nil
			}
		}
		return fmt.Errorf("%s: INFO server has no process_id", addr)
	})
}
