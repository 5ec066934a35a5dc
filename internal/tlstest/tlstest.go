// Package tlstest makes self-signed certificates for 127.0.0.1 and
// localhost, and writes them the way an operator rotates them, for the
// tests of the gateway's TLS.
package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Cert is a certificate with its key, both PEM.
type Cert struct {
	CertPEM, KeyPEM []byte
	Leaf            *x509.Certificate
}

// New makes a self-signed ECDSA P-256 certificate named cn, valid for a day
// for 127.0.0.1, ::1 and localhost.
func New(t testing.TB, cn string) Cert {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return Cert{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
		Leaf:    leaf,
	}
}

// SPKIHash is the base64 SHA-256 of the certificate's public key, the form
// Chromium's --ignore-certificate-errors-spki-list takes.
func (c Cert) SPKIHash() string {
	sum := sha256.Sum256(c.Leaf.RawSubjectPublicKeyInfo)
	return base64.StdEncoding.EncodeToString(sum[:])
}

// Pair is c as a tls.Certificate, for a server in the test's process.
func (c Cert) Pair(t testing.TB) tls.Certificate {
	t.Helper()
	pair, err := tls.X509KeyPair(c.CertPEM, c.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return pair
}

// Pool is a certificate pool holding only c.
func (c Cert) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(c.Leaf)
	return p
}

// Install writes c to certFile and keyFile as a rotation does: each to a
// new file in the same folder, renamed over the old one, key first.
func (c Cert) Install(t testing.TB, certFile, keyFile string) {
	t.Helper()
	for _, f := range []struct {
		path string
		data []byte
	}{{keyFile, c.KeyPEM}, {certFile, c.CertPEM}} {
		tmp, err := os.CreateTemp(filepath.Dir(f.path), ".rotate-*")
		if err != nil {
			t.Fatal(err)
		}
		_, werr := tmp.Write(f.data)
		if err := tmp.Close(); werr != nil || err != nil {
			t.Fatal(werr, err)
		}
		if err := os.Rename(tmp.Name(), f.path); err != nil {
			t.Fatal(err)
		}
	}
}

// Files installs c in dir as tls.crt and tls.key and returns their paths.
func (c Cert) Files(t testing.TB, dir string) (certFile, keyFile string) {
	t.Helper()
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	c.Install(t, certFile, keyFile)
	return certFile, keyFile
}
