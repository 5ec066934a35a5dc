package gateway_test

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/turnstile-gw/turnstile/internal/testwait"
)

// The gateway binary, built once per test run for the tests that need a
// real process (one to kill, one to start and read the log of).
var (
	binaryOnce sync.Once
	binaryDir  string
	binaryPath string
	binaryErr  error
)

// gatewayBinary builds cmd/gateway into a temporary folder, once; TestMain
// removes the folder.
func gatewayBinary(t *testing.T) string {
	t.Helper()
	binaryOnce.Do(func() {
		if binaryDir, binaryErr = os.MkdirTemp("", "turnstile-gateway-bin-"); binaryErr != nil {
			return
		}
		binaryPath = filepath.Join(binaryDir, "gateway")
		out, err := exec.Command("go", "build", "-o", binaryPath, "../cmd/gateway").CombinedOutput()
		if err != nil {
			binaryErr = &buildError{err: err, out: string(out)}
		}
	})
	if binaryErr != nil {
		t.Fatalf("build the gateway: %v", binaryErr)
	}
	return binaryPath
}

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return e.err.Error() + "\n" + e.out }

// procGateway is the gateway binary running as its own process, offline.
type procGateway struct {
	t       *testing.T
	cmd     *exec.Cmd
	url     string
	logPath string
	exited  chan error
}

// freeAddr is a loopback address nothing listens on (for a process that
// must be told its port).
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startProcess runs the gateway binary with env (KEY=value) on a free
// port and waits until its public /readyz answers 200. The port is free
// when chosen but may be taken before the gateway binds it (another test's
// outgoing connection can get it as its ephemeral port): a start that
// failed on that alone is tried again on another port, twice at most.
func startProcess(t *testing.T, env ...string) *procGateway {
	t.Helper()
	for attempt := 1; ; attempt++ {
		if p := launchProcess(t, attempt < 3, env...); p != nil {
			return p
		}
	}
}

// launchProcess is one attempt of startProcess: nil when retry allows
// another attempt and the gateway found its port taken.
func launchProcess(t *testing.T, retry bool, env ...string) *procGateway {
	t.Helper()
	bin := gatewayBinary(t)
	addr := freeAddr(t)
	logPath := filepath.Join(t.TempDir(), "gateway.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"),
		"TURNSTILE_ADDR=" + addr, "TURNSTILE_ADMIN_ADDR=127.0.0.1:0"}, env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	_ = logFile.Close()
	p := &procGateway{t: t, cmd: cmd, url: "http://" + addr, logPath: logPath, exited: make(chan error, 1)}
	go func() { p.exited <- cmd.Wait() }()
	taken := false
	t.Cleanup(func() {
		p.stop()
		if t.Failed() && !taken {
			t.Logf("gateway log:\n%s", p.log())
		}
	})
	// Whatever holds the port may accept and never answer: each probe is bounded.
	probe := &http.Client{Timeout: 2 * time.Second}
	// Its log is shown when the wait fails (the cleanup above).
	testwait.ForNil(t, "the gateway to be ready", func() error {
		select {
		case err := <-p.exited:
			p.exited <- err
			if retry && strings.Contains(p.log(), "listen tcp "+addr+": bind: address already in use") {
				taken = true
				return nil
			}
			t.Fatalf("the gateway exited (%v):\n%s", err, p.log())
		default:
		}
		resp, err := probe.Get(p.url + "/readyz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/readyz answered %d", resp.StatusCode)
		}
		return nil
	})
	if taken {
		t.Logf("port %s was taken before the gateway bound it; trying another", addr)
		return nil
	}
	return p
}

func (p *procGateway) log() string {
	b, _ := os.ReadFile(p.logPath)
	return string(b)
}

// kill ends the process at once: no drain, no lease released.
func (p *procGateway) kill() {
	_ = p.cmd.Process.Kill()
	err := <-p.exited
	p.exited <- err
}

// stop ends the process with SIGTERM (a drain) and waits for it.
func (p *procGateway) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.exited:
		p.exited <- err
	case <-time.After(15 * time.Second):
		p.kill()
		p.t.Error("the gateway did not stop within 15 s of SIGTERM")
	}
}

// logHas reports whether the process's log contains every string.
func (p *procGateway) logHas(all ...string) bool {
	l := p.log()
	for _, s := range all {
		if !strings.Contains(l, s) {
			return false
		}
	}
	return true
}

// freeAddrHeld is a loopback address held by a listener until the test ends.
func freeAddrHeld(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	return ln.Addr().String()
}
