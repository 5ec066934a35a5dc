package server

import (
	"crypto/tls"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/turnstile-gw/turnstile/internal/tlstest"
)

// served is the common name of the certificate f gives a handshake.
func served(t *testing.T, f *CertFiles) string {
	t.Helper()
	c, err := f.GetCertificate(&tls.ClientHelloInfo{})
	if err != nil || c == nil || c.Leaf == nil {
		t.Fatalf("GetCertificate: %v, %v", c, err)
	}
	return c.Leaf.Subject.CommonName
}

func TestRotatedCertificateIsServedWithoutRestart(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := tlstest.New(t, "first").Files(t, dir)
	f, err := LoadCertFiles(certFile, keyFile, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if got := served(t, f); got != "first" {
		t.Fatalf("served %q, want first", got)
	}

	tlstest.New(t, "second").Install(t, certFile, keyFile)
	if got := served(t, f); got != "second" {
		t.Fatalf("after a rotation served %q, want second", got)
	}

	// Half a rotation: a new certificate whose key is not there yet. The
	// last good pair stays in use, and the full pair is taken once the key
	// arrives.
	third := tlstest.New(t, "third")
	if err := os.WriteFile(certFile, third.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if got := served(t, f); got != "second" {
		t.Fatalf("with a mismatched key served %q, want the last good one (second)", got)
	}
	if err := os.WriteFile(keyFile, third.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if got := served(t, f); got != "third" {
		t.Fatalf("with the key written served %q, want third", got)
	}

	// A file gone for a moment: the certificate in memory is still served.
	if err := os.Remove(keyFile); err != nil {
		t.Fatal(err)
	}
	if got := served(t, f); got != "third" {
		t.Fatalf("with the key gone served %q, want third", got)
	}
}

func TestCertificateFilesThatDoNotLoadAreRefused(t *testing.T) {
	dir := t.TempDir()
	a, b := tlstest.New(t, "a"), tlstest.New(t, "b")
	certFile, keyFile := a.Files(t, dir)
	otherKey := filepath.Join(dir, "other.key")
	if err := os.WriteFile(otherKey, b.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	for name, files := range map[string][2]string{
		"mismatched key": {certFile, otherKey},
		"missing cert":   {filepath.Join(dir, "nope.crt"), keyFile},
		"key as cert":    {keyFile, keyFile},
	} {
		if err := CheckCertFiles(files[0], files[1]); err == nil {
			t.Errorf("%s: accepted", name)
		}
		if _, err := LoadCertFiles(files[0], files[1], slog.New(slog.DiscardHandler)); err == nil {
			t.Errorf("%s: loaded", name)
		}
	}
	if err := CheckCertFiles(certFile, keyFile); err != nil {
		t.Errorf("a good pair: %v", err)
	}
}
