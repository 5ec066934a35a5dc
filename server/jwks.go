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
	"github.com/turnstile-gw/turnstile/internal/throttle"
	"golang.org/x/time/rate"
)

// Timings of the key set. A fetch that has never succeeded is retried
// with backoff from jwksRetryMin to jwksRetryMax, so that a gateway started
// before its identity provider becomes ready soon after it.
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

// jwks is a JSON Web Key Set fetched from a URL (github.com/MicahParks/keyfunc
// over jwkset): refreshed periodically and when a token names a key it does
// not have. Until the first fetch succeeds it has no keys, and key refuses
// every token.
type jwks struct {
	url       string
	refresh   time.Duration
	log       *slog.Logger
	client    *http.Client
	transport *http.Transport
	throttle  *throttle.Keyed

	kf     atomic.Pointer[keyfunc.Keyfunc] // nil until the first fetch succeeded
	cancel context.CancelFunc              // ends the fetch loop and the library's refreshes
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

// startJWKS starts fetching the key set at rawURL in the background.
func startJWKS(rawURL string, refresh time.Duration, log *slog.Logger) (*jwks, error) {
	if err := CheckJWKSURL(rawURL); err != nil {
		return nil, fmt.Errorf("auth: JWKS URL: %w", err)
	}
	if refresh <= 0 {
		refresh = defaultJWKSRefresh
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	j := &jwks{
		url: rawURL, refresh: refresh, log: log, transport: tr,
		client: &http.Client{
			Timeout:       jwksHTTPTimeout,
			Transport:     limitedBodies{tr},
			CheckRedirect: checkJWKSRedirect,
		},
		throttle: &throttle.Keyed{Every: logEvery},
		done:     make(chan struct{}),
	}
	ctx, cancel := context.WithCancel(context.Background())
	j.cancel = cancel
	go j.run(ctx)
	return j, nil
}

// run fetches the key set until a fetch succeeds; from then on the
// library refreshes it until ctx ends.
func (j *jwks) run(ctx context.Context) {
	defer close(j.done)
	delay := jwksRetryMin
	for {
		kf, n, err := j.first(ctx)
		if err == nil {
			// The refreshes run on a context ended by close (j.cancel).
			j.kf.Store(&kf)
			j.log.Info("JWKS fetched: tokens signed with its keys are accepted", "url", j.url, "keys", n)
			return
		}
		if ctx.Err() != nil {
			return
		}
		if count, ok := j.throttle.Note("first", time.Now(), 1); ok {
			j.log.Warn("JWKS unreachable: its tokens are refused and /readyz fails until it answers",
				"url", j.url, "err", err, "retry_in", delay, "failures", count)
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		delay = min(2*delay, jwksRetryMax)
	}
}

// first makes one attempt at the first fetch; on success the storage's
// refresh goroutine runs until ctx ends. A failed attempt stops the
// refresh goroutine the library started for it.
func (j *jwks) first(ctx context.Context) (kf keyfunc.Keyfunc, keys int, err error) {
	attempt, stop := context.WithCancel(ctx)
	defer func() {
		if err != nil {
			stop()
		}
	}()
	storage, err := jwkset.NewStorageFromHTTP(j.url, jwkset.HTTPClientStorageOptions{
		Client:          j.client,
		Ctx:             attempt,
		HTTPTimeout:     jwksHTTPTimeout,
		RefreshInterval: j.refresh,
		RefreshErrorHandler: func(_ context.Context, err error) {
			if count, ok := j.throttle.Note("refresh", time.Now(), 1); ok {
				j.log.Warn("JWKS refresh failed; the keys fetched before stay in use", "url", j.url, "err", err,
					"failures", count)
			}
		},
	})
	if err != nil {
		return nil, 0, err
	}
	all, err := storage.KeyReadAll(ctx)
	if err != nil {
		return nil, 0, err
	}
	client, err := jwkset.NewHTTPClient(jwkset.HTTPClientOptions{
		HTTPURLs:          map[string]jwkset.Storage{j.url: storage},
		RefreshUnknownKID: rate.NewLimiter(rate.Every(jwksUnknownKIDEvery), 1),
		// A refused wait fails at once rather than holding the upgrade;
		// an allowed one bounds the fetch it starts.
		RateLimitWaitMax: jwksHTTPTimeout,
	})
	if err != nil {
		return nil, 0, err
	}
	kf, err = keyfunc.New(keyfunc.Options{Ctx: attempt, Storage: client})
	if err != nil {
		return nil, 0, err
	}
	return kf, len(all), nil
}

func (j *jwks) ready() bool { return j.kf.Load() != nil }

// key is the jwt.Keyfunc of tokens verified with the key set.
func (j *jwks) key(t *jwt.Token) (any, error) {
	kf := j.kf.Load()
	if kf == nil {
		return nil, errors.New("the JWKS has not been fetched yet")
	}
	return (*kf).Keyfunc(t)
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
