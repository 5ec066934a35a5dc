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
	"encoding/json"
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

	mu     sync.Mutex
	keys   map[string]key // kid → key, served or not
	served []string       // kids in the set

	started   atomic.Bool
	down      atomic.Bool
	body      atomic.Pointer[string] // answered with 200 instead of the set
	malformed sync.Map               // kid → struct{}: served with broken key material
	fetches   atomic.Int32           // answered with the set
	requests  atomic.Int32           // all, failed ones included
	srv       *http.Server
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

// Unstarted returns a provider that holds its loopback port but drops
// every connection unanswered until Start (a provider not up yet). It
// keeps the port rather than freeing it: a freed port can be taken in the
// meantime, by the gateway's own connection to it among others.
func Unstarted(t testing.TB) *Provider {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Provider{t: t, url: "http://" + ln.Addr().String() + "/.well-known/jwks.json", keys: map[string]key{}}
	p.srv = &http.Server{Handler: http.HandlerFunc(p.serveHTTP)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = p.srv.Serve(ln)
	}()
	t.Cleanup(func() {
		_ = p.srv.Close()
		<-done
	})
	return p
}

// Start makes the provider answer.
func (p *Provider) Start() { p.started.Store(true) }

// URL is the key set's address.
func (p *Provider) URL() string { return p.url }

// Fetches counts the requests for the key set answered so far.
func (p *Provider) Fetches() int { return int(p.fetches.Load()) }

// Requests counts every request for the key set, those answered 503 included.
func (p *Provider) Requests() int { return int(p.requests.Load()) }

// SetDown makes the provider answer 503 (true) or the key set (false).
func (p *Provider) SetDown(down bool) { p.down.Store(down) }

// Answer makes the provider answer 200 with body instead of the key set
// (a provider's `{}` or garbage); Answer("") serves the set again.
func (p *Provider) Answer(body string) {
	if body == "" {
		p.body.Store(nil)
		return
	}
	p.body.Store(&body)
}

// Malformed serves key kid with key material that does not decode (true)
// or as it is (false).
func (p *Provider) Malformed(kid string, broken bool) {
	if broken {
		p.malformed.Store(kid, struct{}{})
	} else {
		p.malformed.Delete(kid)
	}
}

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
	if !p.started.Load() {
		if hj, ok := w.(http.Hijacker); ok {
			if c, _, err := hj.Hijack(); err == nil {
				_ = c.Close()
			}
		}
		return
	}
	p.requests.Add(1)
	if p.down.Load() {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	if body := p.body.Load(); body != nil {
		p.fetches.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(*body))
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
	if err == nil {
		raw, err = p.breakKeys(raw)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	p.fetches.Add(1)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(raw)
}

// breakKeys replaces the key material (RSA n, EC and OKP x) of the
// malformed kids in a JSON key set with text that is not base64url.
func (p *Provider) breakKeys(raw []byte) ([]byte, error) {
	var set struct {
		Keys []map[string]any `json:"keys"`
	}
	if err := json.Unmarshal(raw, &set); err != nil {
		return nil, err
	}
	for _, k := range set.Keys {
		if _, broken := p.malformed.Load(k["kid"]); !broken {
			continue
		}
		for _, field := range []string{"n", "x"} {
			if _, ok := k[field]; ok {
				k[field] = "not*base64url!"
			}
		}
	}
	return json.Marshal(set)
}
