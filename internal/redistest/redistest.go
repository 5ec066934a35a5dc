// Package redistest runs a real redis-server for tests, on a free loopback
// port, so that code using Redis is tested against the real thing and not
// only against miniredis.
package redistest

import (
	"bufio"
	"errors"
	"net"
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
	bin := lookPath(t, "redis-server", "redis-server")
	// Another process can take the free port between our probe and the
	// server's bind; a few attempts make that race harmless.
	err := retry(func() error {
		port, err := freePort()
		if err != nil {
			return err
		}
		addr = loopback(port)
		dir := t.TempDir()
		return launch(t, bin, serverArgs(port, dir), addr, dir)
	})
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	return addr
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
