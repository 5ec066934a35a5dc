package server

// TLS on the listeners (TURNSTILE_TLS_CERT_FILE, TURNSTILE_TLS_KEY_FILE),
// with the certificate read again when its files change.

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// CertFiles serves a certificate and key, PEM files on disk, to TLS
// handshakes. Each handshake looks at the files (two stats, no goroutine
// watches them); when either changed — a new modification time, size or
// inode, as with an in-place write, a rename over it or a Kubernetes
// Secret's symlink swap — the pair is read again. A pair that does not
// load (the key not yet written beside a new certificate) leaves the last
// good one in use, and is tried again when the files change again.
type CertFiles struct {
	certFile, keyFile string
	log               *slog.Logger

	mu      sync.Mutex
	cert    *tls.Certificate
	loaded  [2]os.FileInfo // the files as they were when cert was read
	failed  [2]os.FileInfo // the files as they were when they last failed to load
	missing bool           // a file could not be found at the last look (logged once)
}

// LoadCertFiles reads the pair once; an error names the file at fault.
func LoadCertFiles(certFile, keyFile string, log *slog.Logger) (*CertFiles, error) {
	f := &CertFiles{certFile: certFile, keyFile: keyFile, log: log}
	st, err := f.stat()
	if err != nil {
		return nil, err
	}
	cert, err := f.read()
	if err != nil {
		return nil, err
	}
	f.cert, f.loaded = cert, st
	return f, nil
}

// CheckCertFiles reports whether the pair loads, for the configuration's
// start-up checks.
func CheckCertFiles(certFile, keyFile string) error {
	_, err := (&CertFiles{certFile: certFile, keyFile: keyFile}).read()
	return err
}

// TLSConfig is the listeners' configuration: TLS 1.2 and later with Go's
// default cipher suites and curves, HTTP/1.1 only (browser WebSockets are
// HTTP/1.1 upgrades), the certificate from f.
func (f *CertFiles) TLSConfig() *tls.Config {
	return &tls.Config{
		MinVersion:     tls.VersionTLS12,
		NextProtos:     []string{"http/1.1"},
		GetCertificate: f.GetCertificate,
	}
}

// GetCertificate is tls.Config.GetCertificate: the pair as it is on disk
// now, or the last one that loaded.
func (f *CertFiles) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	st, statErr := f.stat()
	f.mu.Lock()
	defer f.mu.Unlock()
	if statErr == nil {
		f.missing = false
	}
	switch {
	case statErr != nil:
		// A file missing for a moment during a rotation: keep serving.
		if !f.missing {
			f.missing = true
			f.log.Warn("TLS certificate files unreadable; the certificate loaded before stays in use", "err", statErr)
		}
	case sameFiles(st, f.loaded) || sameFiles(st, f.failed):
	default:
		cert, err := f.read()
		if err != nil {
			f.failed = st
			f.log.Warn("TLS certificate files changed but do not load; the certificate loaded before stays in use",
				"err", err)
			break
		}
		f.cert, f.loaded, f.failed = cert, st, [2]os.FileInfo{}
		f.log.Info("TLS certificate reloaded", certAttrs(cert)...)
	}
	return f.cert, nil
}

// Loaded describes the certificate in use, for the start-up log.
func (f *CertFiles) Loaded() []any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return certAttrs(f.cert)
}

func (f *CertFiles) stat() ([2]os.FileInfo, error) {
	var st [2]os.FileInfo
	for i, name := range []string{f.certFile, f.keyFile} {
		fi, err := os.Stat(name)
		if err != nil {
			return st, err
		}
		st[i] = fi
	}
	return st, nil
}

func (f *CertFiles) read() (*tls.Certificate, error) {
	certPEM, err := os.ReadFile(f.certFile)
	if err != nil {
		return nil, fmt.Errorf("certificate: %w", err)
	}
	keyPEM, err := os.ReadFile(f.keyFile)
	if err != nil {
		return nil, fmt.Errorf("key: %w", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("certificate %s and key %s: %w", f.certFile, f.keyFile, err)
	}
	return &cert, nil
}

// sameFiles reports whether both files are unchanged between a and b.
func sameFiles(a, b [2]os.FileInfo) bool {
	for i := range a {
		if a[i] == nil || b[i] == nil {
			if a[i] != b[i] {
				return false
			}
			continue
		}
		if !os.SameFile(a[i], b[i]) || !a[i].ModTime().Equal(b[i].ModTime()) || a[i].Size() != b[i].Size() {
			return false
		}
	}
	return true
}

func certAttrs(c *tls.Certificate) []any {
	leaf := c.Leaf
	if leaf == nil && len(c.Certificate) > 0 {
		leaf, _ = x509.ParseCertificate(c.Certificate[0])
	}
	if leaf == nil {
		return nil
	}
	return []any{"subject", leaf.Subject.String(), "dns_names", leaf.DNSNames,
		"not_after", leaf.NotAfter.UTC().Format(time.RFC3339)}
}
