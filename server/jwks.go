package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/time/rate"

	"github.com/turnstile-gw/turnstile/internal/clock"
	"github.com/turnstile-gw/turnstile/internal/throttle"
	"github.com/turnstile-gw/turnstile/metrics"
)

// Timings of the key set. A fetch that has never succeeded is retried
// with backoff from jwksRetryMin to jwksRetryMax, so that a gateway started
// before its identity provider becomes ready soon after it; a degraded set
// (the last fetch failed) is fetched again every jwksUnknownKIDEvery.
const (
	defaultJWKSRefresh = 15 * time.Minute
	// jwksUnknownKIDEvery bounds the fetches a token signed with an
	// unknown key triggers (a key rotated in at the provider): a stream of
	// forged kids costs the provider one fetch per this.
	jwksUnknownKIDEvery = 10 * time.Second
	jwksHTTPTimeout     = 5 * time.Second
	jwksRetryMin        = 250 * time.Millisecond
	jwksRetryMax        = 30 * time.Second
	// jwksMaxBytes bounds a key set's body; real ones are a few KiB.
	jwksMaxBytes = 1 << 20
)

// jwks is a JSON Web Key Set fetched from a URL, refreshed periodically
// and when a token names a key it does not have; keyfunc picks a token's
// key from it. A fetch that answers no usable key, or fails, leaves the
// keys fetched before in use and marks the set degraded until a clean
// fetch. Until the first usable fetch it has no keys, and key refuses
// every token.
type jwks struct {
	url       string
	refresh   time.Duration
	log       *slog.Logger
	client    *http.Client
	transport *http.Transport
	throttle  *throttle.Keyed
	now       func() time.Time
	failed    func(reason string) // counts a failed fetch

	// unknownKID bounds the fetches tokens with unknown kids trigger; it
	// is read with now, so a test's clock drives it.
	unknownKID *rate.Limiter
	fetchMu    sync.Mutex // one fetch at a time; held while replacing the keys
	keys       *jwkset.MemoryJWKSet
	kf         keyfunc.Keyfunc
	fetchedOK  atomic.Bool            // a usable set was fetched once
	degraded   atomic.Pointer[string] // the last fetch's failure reason; nil while it was clean

	cancel context.CancelFunc // ends the fetch loop
	done   chan struct{}
	once   sync.Once
}

// CheckJWKSURL refuses what the gateway would not fetch keys from: anything
// but https, or http on a host other than loopback (keys fetched in the
// clear could be replaced on the way).
func CheckJWKSURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return errors.New("not a valid URL")
	}
	if u.Host == "" || u.User != nil {
		return errors.New("must be an absolute URL with a host and no credentials")
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		if isLoopbackHost(u.Hostname()) {
			return nil
		}
		return errors.New("http:// is only allowed for a loopback host (127.0.0.1, ::1, localhost); use https://")
	}
	return errors.New("must be an https:// URL")
}

// startJWKS starts fetching the key set at rawURL in the background. now
// is the clock of the unknown-kid limit; failed, when not nil, counts
// each failed fetch by reason.
func startJWKS(rawURL string, refresh time.Duration, log *slog.Logger, now func() time.Time, failed func(string)) (*jwks, error) {
	if err := CheckJWKSURL(rawURL); err != nil {
		return nil, fmt.Errorf("auth: JWKS URL: %w", err)
	}
	if refresh <= 0 {
		refresh = defaultJWKSRefresh
	}
	if failed == nil {
		failed = func(string) {}
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	j := &jwks{
		url: rawURL, refresh: refresh, log: log, transport: tr, now: now, failed: failed,
		client: &http.Client{
			Timeout:       jwksHTTPTimeout,
			Transport:     limitedBodies{tr},
			CheckRedirect: checkJWKSRedirect,
		},
		throttle:   &throttle.Keyed{Every: logEvery},
		unknownKID: rate.NewLimiter(rate.Every(jwksUnknownKIDEvery), 1),
		keys:       jwkset.NewMemoryStorage(),
		done:       make(chan struct{}),
	}
	ctx, cancel := context.WithCancel(context.Background())
	j.cancel = cancel
	kf, err := keyfunc.New(keyfunc.Options{Ctx: ctx, Storage: refreshingKeys{j.keys, j, ctx}})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("auth: JWKS: %w", err)
	}
	j.kf = kf
	go j.run(ctx)
	return j, nil
}

// run fetches the key set: until a fetch succeeds with backoff from
// jwksRetryMin to jwksRetryMax, then every refresh, and while degraded
// every jwksUnknownKIDEvery (or refresh if shorter), until ctx ends.
func (j *jwks) run(ctx context.Context) {
	defer close(j.done)
	backoff := jwksRetryMin
	for {
		j.fetch(ctx)
		if ctx.Err() != nil {
			return
		}
		wait := j.refresh
		switch {
		case !j.ready():
			wait, backoff = backoff, min(2*backoff, jwksRetryMax)
		case j.degraded.Load() != nil:
			// Soon: a kid whose key was malformed (or is new) verifies
			// within this of the provider's fix, as an unknown kid would.
			wait = min(j.refresh, jwksUnknownKIDEvery)
		}
		t := clock.Wall.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// fetch fetches the key set once and keeps what it can use: a failed
// fetch (no usable key among them) leaves the keys as they were; a
// malformed key keeps the version of its kid fetched before, if any. Each
// failure is counted, logged (throttled per reason) and marks the set
// degraded; a clean fetch clears that.
func (j *jwks) fetch(ctx context.Context) {
	j.fetchMu.Lock()
	defer j.fetchMu.Unlock()
	f, err := j.get(ctx)
	if ctx.Err() != nil {
		return
	}
	if err != nil {
		var fe *fetchError
		reason := metrics.JWKSDecode
		if errors.As(err, &fe) {
			reason = fe.reason
		}
		j.fail(reason, err)
		return
	}
	keys := f.keys
	for _, b := range f.malformed {
		if old, err := j.keys.KeyRead(ctx, b.kid); err == nil {
			keys = append(keys, old)
		}
	}
	_ = j.keys.KeyReplaceAll(ctx, keys) // the memory storage does not fail
	first := j.fetchedOK.CompareAndSwap(false, true)
	if len(f.malformed) > 0 {
		j.fail(metrics.JWKSMalformedKey, fmt.Errorf("skipped %s", f.malformedText()))
		return
	}
	if recovered := j.degraded.Swap(nil) != nil; first || recovered {
		j.log.Info("JWKS fetched: tokens signed with its keys are accepted", "url", j.url, "keys", len(keys))
	}
}

// fail records a failed fetch: counted, marked degraded, logged at most
// once per logEvery per reason.
func (j *jwks) fail(reason string, err error) {
	j.failed(reason)
	j.degraded.Store(&reason)
	count, ok := j.throttle.Note(reason, clock.Wall.Now(), 1)
	if !ok {
		return
	}
	switch {
	case !j.ready():
		j.log.Warn("JWKS not fetched: its tokens are refused and /readyz fails until it answers a usable key set",
			"url", j.url, "reason", reason, "err", err, "failures", count)
	case reason == metrics.JWKSUnreachable:
		j.log.Warn("JWKS refresh failed; the keys fetched before stay in use", "url", j.url, "reason", reason,
			"err", err, "failures", count)
	default:
		j.log.Error("JWKS answered a key set that cannot be used in full; the keys fetched before stay in use, /readyz says degraded",
			"url", j.url, "reason", reason, "err", err, "failures", count)
	}
}

// refreshingKeys is the key storage keyfunc reads: a kid it does not
// have triggers a fetch, at most one per jwksUnknownKIDEvery (a stream
// of forged kids costs the provider no more); a token that finds the
// limit spent waits for a fetch under way, if any, rather than none.
type refreshingKeys struct {
	*jwkset.MemoryJWKSet
	j   *jwks
	ctx context.Context // the fetch loop's
}

func (r refreshingKeys) KeyRead(ctx context.Context, kid string) (jwkset.JWK, error) {
	k, err := r.MemoryJWKSet.KeyRead(ctx, kid)
	if !errors.Is(err, jwkset.ErrKeyNotFound) {
		return k, err
	}
	if r.j.unknownKID.AllowN(r.j.now(), 1) {
		r.j.fetch(r.ctx)
	} else {
		r.j.awaitFetch()
	}
	return r.MemoryJWKSet.KeyRead(ctx, kid)
}

// awaitFetch returns once no fetch is under way.
func (j *jwks) awaitFetch() {
	j.fetchMu.Lock()
	defer j.fetchMu.Unlock()
}

func (j *jwks) ready() bool { return j.fetchedOK.Load() }

// degradedReason is why the last fetch was not used in full
// (metrics.JWKSRefreshFailureReasons), "" when it was.
func (j *jwks) degradedReason() string {
	if d := j.degraded.Load(); d != nil {
		return *d
	}
	return ""
}

// key is the jwt.Keyfunc of tokens verified with the key set.
func (j *jwks) key(t *jwt.Token) (any, error) {
	if !j.ready() {
		return nil, errors.New("the JWKS has not been fetched yet")
	}
	return j.kf.Keyfunc(t)
}

// close stops fetching and waits for the fetch loop.
func (j *jwks) close() {
	j.once.Do(func() {
		j.cancel()
		<-j.done
		j.transport.CloseIdleConnections()
	})
}

// checkJWKSRedirect follows at most 3 redirects, never to a URL the
// gateway would not fetch keys from in the first place.
func checkJWKSRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= 3 {
		return errors.New("too many redirects")
	}
	return CheckJWKSURL(req.URL.String())
}

// limitedBodies cuts response bodies at jwksMaxBytes: a key set larger
// than that fails to decode instead of filling memory.
type limitedBodies struct{ rt http.RoundTripper }

func (l limitedBodies) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := l.rt.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.LimitReader(resp.Body, jwksMaxBytes), resp.Body}
	return resp, nil
}

// isLoopbackHost reports whether a host name (no port, no brackets) is
// this machine: localhost, 127.0.0.0/8 or ::1.
func isLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
