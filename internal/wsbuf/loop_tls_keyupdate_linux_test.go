//go:build linux

package wsbuf

import (
	"bytes"
	"crypto/sha1"
	"crypto/tls"
	"encoding/base64"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	"github.com/gobwas/ws"
	"github.com/turnstile-gw/turnstile/internal/tlstest"
)

// sServer is `openssl s_server` over TLS 1.3, which (unlike crypto/tls's
// server) sends a KeyUpdate when told: what the client sends is printed
// on its output, with every TLS message (-msg), and what is written to
// its input goes to the client; "K" alone on a line sends a KeyUpdate
// that asks for one back.
type sServer struct {
	in   io.WriteCloser
	outs chan []byte
	out  []byte
}

func startSServer(t *testing.T) (*sServer, string, *tls.Config) {
	t.Helper()
	bin, err := exec.LookPath("openssl")
	if err != nil {
		missingTool(t, "no openssl here to send a KeyUpdate (`make test` runs scripts/install-test-deps, which installs it)")
	}
	unbuf, err := exec.LookPath("stdbuf") // its -msg output unbuffered, as it comes
	if err != nil {
		missingTool(t, "no stdbuf (coreutils) here")
	}
	cert := tlstest.New(t, "openssl")
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	cert.Install(t, certFile, keyFile)
	pool := cert.Pool()
	cmd := exec.Command(unbuf, "-o0", bin, "s_server", "-accept", "127.0.0.1:0", "-cert", certFile, "-key", keyFile,
		"-tls1_3", "-msg", "-ign_eof")
	s := &sServer{outs: make(chan []byte, 64)}
	if s.in, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	read := make(chan struct{})
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-read
		_ = cmd.Wait()
	})
	go func() {
		defer close(read)
		defer close(s.outs)
		for {
			b := make([]byte, 4096)
			n, err := out.Read(b)
			if n > 0 {
				s.outs <- b[:n]
			}
			if err != nil {
				return
			}
		}
	}()
	m := s.waitFor(t, regexp.MustCompile(`ACCEPT 127\.0\.0\.1:(\d+)`), 0)
	return s, "wss://127.0.0.1:" + string(m[1]), &tls.Config{RootCAs: pool}
}

// waitFor reads the server's output until re matches it past from; it
// returns the match.
func (s *sServer) waitFor(t *testing.T, re *regexp.Regexp, from int) [][]byte {
	t.Helper()
	var m [][]byte
	s.waitUntil(t, func(out []byte) bool {
		m = re.FindSubmatch(out[from:])
		return m != nil
	})
	return m
}

// waitUntil reads the server's output until seen says it has what it
// looks for.
func (s *sServer) waitUntil(t *testing.T, seen func(out []byte) bool) {
	t.Helper()
	for {
		if seen(s.out) {
			return
		}
		b, ok := <-s.outs
		if !ok {
			t.Fatalf("openssl s_server ended; its output:\n%s", s.out)
		}
		s.out = append(s.out, b...)
	}
}

func (s *sServer) send(t *testing.T, b []byte) {
	t.Helper()
	if _, err := s.in.Write(b); err != nil {
		t.Fatal(err)
	}
}

// A server's KeyUpdate in the middle of the stream (one that asks for
// the client's) is handled by tls.Conn on the loop's fast path: the
// messages after it, under the new keys, still reach the fast path and
// the reader in order, the client's answering KeyUpdate reaches the
// server, and the client's writes after it are read there.
func TestClientOverTLSOnALoopFollowsTheServersKeyUpdate(t *testing.T) {
	srv, url, cfg := startSServer(t)
	dialled := make(chan *Client, 1)
	go func() {
		c, err := Dial(t.Context(), url, DialOptions{TLSConfig: cfg, Loop: testLoop(t)})
		if err != nil {
			t.Error(err)
		}
		dialled <- c
	}()
	m := srv.waitFor(t, regexp.MustCompile(`(?i)Sec-WebSocket-Key: (\S+)(?s:.*?)\r\n\r\n`), 0)
	sum := sha1.Sum(append(m[1], "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"...))
	srv.send(t, append([]byte("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Accept: "+base64.StdEncoding.EncodeToString(sum[:])+"\r\n\r\n"),
		frames(frameOf(ws.OpText, true, "a1"), frameOf(ws.OpText, true, "b1"))...))
	c := <-dialled
	if c == nil {
		return
	}
	t.Cleanup(func() { _ = c.Close() })
	if !c.OnLoop() {
		t.Fatal("the client is not on the loop")
	}
	var l log
	c.SetFast(func(binary bool, p []byte) bool {
		if p[0] != 'a' {
			return false
		}
		l.add("fast:" + string(p))
		return true
	})
	read := make(chan string)
	go func() {
		defer close(read)
		for {
			m, err := readMessage(c)
			if err != nil {
				read <- "end:" + err.Error()
				return
			}
			l.add("read:" + string(m))
			read <- string(m)
		}
	}()
	if m := <-read; m != "b1" {
		t.Fatalf("read %q; want b1", m)
	}
	from := len(srv.out)
	srv.send(t, []byte("K\n")) // the reader waits: the fast path reads it
	srv.waitFor(t, regexp.MustCompile(`<<< TLS 1\.3, Handshake \[length 0005\], KeyUpdate`), from)
	srv.send(t, frames(frameOf(ws.OpText, true, "a2"), ws.NewFrame(ws.OpBinary, true, []byte("a3")), frameOf(ws.OpText, true, "b2")))
	if m := <-read; m != "b2" {
		t.Fatalf("read %q; want b2", m)
	}
	from = len(srv.out)
	if err := c.WriteText([]byte("after")); err != nil {
		t.Fatal(err)
	}
	srv.waitUntil(t, func(out []byte) bool { // the frame's header, in the clear under TLS
		return bytes.Contains(out[from:], []byte{0x81, 0x85})
	})
	if bytes.Contains(srv.out, []byte("error")) || bytes.Contains(srv.out, []byte("alert")) {
		t.Fatalf("the server reported an error:\n%s", srv.out)
	}
	want := []string{"fast:a1", "read:b1", "fast:a2", "fast:a3", "read:b2"}
	if got := l.all(); !slices.Equal(got, want) {
		t.Fatalf("got %q; want %q", got, want)
	}
	_ = c.Close()
	<-read
}

// missingTool skips the test without a tool it needs, or fails it in CI
// (CI set), where scripts/install-test-deps has installed it.
func missingTool(t *testing.T, msg string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}
