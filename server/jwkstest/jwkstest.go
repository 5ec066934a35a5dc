// Package jwkstest is an identity provider's side of JWT auth for tests: a
// JSON Web Key Set served over HTTP on loopback whose keys can rotate, and
// tokens signed with those keys.
package jwkstest

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"
)

// Provider serves a key set at URL(). It starts at once (New) or when
// Start is called (Unstarted), so that a gateway can be started while the
// provider is unreachable.
type Provider struct {
	t   testing.TB
	url string
	ln  net.Listener

	mu     sync.Mutex
	keys   map[string]key // kid → key, served or not
	served []string       // kids in the set

	down     atomic.Bool
	fetches  atomic.Int32 // answered with the set
	requests atomic.Int32 // all, failed ones included
	srv      *http.Server
}

type key struct {
	alg    string
	signer crypto.Signer
	method jwt.SigningMethod
}

// New starts a provider with an empty key set on a free loopback port.
func New(t testing.TB) *Provider {
	t.Helper()
	p := Unstarted(t)
	p.Start()
	return p
}

// Unstarted returns a provider whose address is chosen but not listened
// on: fetches fail with "connection refused" until Start.
func Unstarted(t testing.TB) *Provider {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return &Provider{t: t, url: "http://" + addr + "/.well-known/jwks.json", keys: map[string]key{}}
}

// Start listens on the provider's address and serves the key set until
// the test ends.
func (p *Provider) Start() {
	p.t.Helper()
	addr := p.url[len("http://") : len(p.url)-len("/.well-known/jwks.json")]
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		p.t.Fatalf("jwkstest: listen on %s: %v", addr, err)
	}
	p.ln = ln
	p.srv = &http.Server{Handler: http.HandlerFunc(p.serveHTTP)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = p.srv.Serve(ln)
	}()
	p.t.Cleanup(func() {
		_ = p.srv.Close()
		<-done
	})
}

// URL is the key set's address.
func (p *Provider) URL() string { return p.url }

// Fetches counts the requests for the key set answered so far.
func (p *Provider) Fetches() int { return int(p.fetches.Load()) }

// Requests counts every request for the key set, those answered 503 included.
func (p *Provider) Requests() int { return int(p.requests.Load()) }

// SetDown makes the provider answer 503 (true) or the key set (false).
func (p *Provider) SetDown(down bool) { p.down.Store(down) }

// AddKey makes a key of alg (RS256, ES256 or EdDSA) named kid, not yet
// served.
func (p *Provider) AddKey(kid, alg string) {
	p.t.Helper()
	var k key
	var err error
	switch alg {
	case "RS256":
		var rk *rsa.PrivateKey
		rk, err = rsa.GenerateKey(rand.Reader, 2048)
		k = key{alg: alg, signer: rk, method: jwt.SigningMethodRS256}
	case "ES256":
		var ek *ecdsa.PrivateKey
		ek, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		k = key{alg: alg, signer: ek, method: jwt.SigningMethodES256}
	case "EdDSA":
		var ed ed25519.PrivateKey
		_, ed, err = ed25519.GenerateKey(rand.Reader)
		k = key{alg: alg, signer: ed, method: jwt.SigningMethodEdDSA}
	default:
		p.t.Fatalf("jwkstest: unsupported alg %s", alg)
	}
	if err != nil {
		p.t.Fatal(err)
	}
	p.mu.Lock()
	p.keys[kid] = k
	p.mu.Unlock()
}

// Serve makes the set exactly the keys named (a rotation drops the others).
func (p *Provider) Serve(kids ...string) {
	p.mu.Lock()
	p.served = append([]string(nil), kids...)
	p.mu.Unlock()
}

// Sign returns a token signed with key kid, its header naming the kid.
func (p *Provider) Sign(kid string, claims jwt.MapClaims) string {
	p.t.Helper()
	p.mu.Lock()
	k, ok := p.keys[kid]
	p.mu.Unlock()
	if !ok {
		p.t.Fatalf("jwkstest: no key %q", kid)
	}
	tok := jwt.NewWithClaims(k.method, claims)
	tok.Header["kid"] = kid
	s, err := tok.SignedString(k.signer)
	if err != nil {
		p.t.Fatal(err)
	}
	return s
}

func (p *Provider) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/.well-known/jwks.json" {
		http.NotFound(w, r)
		return
	}
	p.requests.Add(1)
	if p.down.Load() {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	p.mu.Lock()
	set := jwkset.NewMemoryStorage()
	for _, kid := range p.served {
		k := p.keys[kid]
		jwk, err := jwkset.NewJWKFromKey(k.signer.Public(), jwkset.JWKOptions{
			Metadata: jwkset.JWKMetadataOptions{KID: kid, ALG: jwkset.ALG(k.alg), USE: jwkset.UseSig},
		})
		if err == nil {
			err = set.KeyWrite(r.Context(), jwk)
		}
		if err != nil {
			p.mu.Unlock()
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
	}
	p.mu.Unlock()
	raw, err := set.JSONPublic(context.WithoutCancel(r.Context()))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	p.fetches.Add(1)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(raw)
}
