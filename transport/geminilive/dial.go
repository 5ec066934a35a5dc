package geminilive

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"google.golang.org/genai"
)

// endpoint is where and how a Live connection is dialled: the URL and the
// handshake headers, built from a genai client's configuration exactly as
// the SDK's Live.Connect builds them.
type endpoint struct {
	url    string
	header http.Header
}

// newEndpoint follows (*genai.Live).Connect for the Gemini API backend: a
// ws or wss base URL keeps its scheme (anything else becomes wss), the base
// path is kept and the query dropped, the API key goes in x-goog-api-key
// (an ephemeral auth_tokens/ key in Authorization, on v1alpha only), and
// the client's HTTPOptions.Headers go along.
func newEndpoint(cc genai.ClientConfig) (endpoint, error) {
	if cc.Backend == genai.BackendVertexAI {
		return endpoint{}, errors.New("the Vertex AI backend is not supported; use the Gemini API")
	}
	opts := cc.HTTPOptions
	if opts.APIVersion == "" {
		return endpoint{}, errors.New("the client has no API version")
	}
	if cc.APIKey == "" {
		return endpoint{}, errors.New("the client has no API key")
	}
	base, err := url.Parse(opts.BaseURL)
	if err != nil {
		return endpoint{}, fmt.Errorf("base URL: %w", err)
	}
	scheme := base.Scheme
	if scheme != "ws" && scheme != "wss" {
		scheme = "wss"
	}
	header := http.Header{}
	for k, vs := range opts.Headers {
		for _, v := range vs {
			header.Add(k, v)
		}
	}
	method := "BidiGenerateContent"
	if strings.HasPrefix(cc.APIKey, "auth_tokens/") {
		if opts.APIVersion != "v1alpha" {
			return endpoint{}, errors.New("ephemeral tokens need API version v1alpha")
		}
		header.Set("Authorization", "Token "+cc.APIKey)
		method = "BidiGenerateContentConstrained"
	} else {
		header.Set("x-goog-api-key", cc.APIKey)
	}
	u := url.URL{Scheme: scheme, Host: base.Host,
		Path: path.Join(base.Path, "ws/google.ai.generativelanguage."+opts.APIVersion+".GenerativeService."+method)}
	return endpoint{url: u.String(), header: header}, nil
}

// dialTimeout bounds the TCP connect (Connect's context bounds the whole
// handshake too).
const dialTimeout = 10 * time.Second

// newHTTPClient is the client WebSocket handshakes go through. Every
// connection it dials sets a write deadline of writeTimeout before each
// write, which bounds every frame written (data, pong, close) without a
// context per write. Connections are never pooled: each is upgraded and
// then owned by its session.
func newHTTPClient(writeTimeout time.Duration) *http.Client {
	d := &net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}
	return &http.Client{Transport: &http.Transport{
		Proxy: http.ProxyFromEnvironment,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &deadlineConn{Conn: c, timeout: writeTimeout}, nil
		},
		TLSHandshakeTimeout: dialTimeout,
		DisableKeepAlives:   true,
	}}
}

// deadlineConn bounds every write by its own timeout: a write the peer
// does not take within it fails with os.ErrDeadlineExceeded.
type deadlineConn struct {
	net.Conn
	timeout time.Duration
}

func (c *deadlineConn) Write(p []byte) (int, error) {
	if err := c.Conn.SetWriteDeadline(time.Now().Add(c.timeout)); err != nil {
		return 0, err
	}
	return c.Conn.Write(p)
}
