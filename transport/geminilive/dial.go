package geminilive

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"strings"

	"cloud.google.com/go/auth"
	"google.golang.org/genai"

	"github.com/turnstile-gw/turnstile/internal/wsbuf"
)

// endpoint is where and how a Live connection is dialled: the URL, the
// handshake headers and the model's resource name in setup, built from a
// genai client's configuration exactly as the SDK's Live.Connect builds
// them.
type endpoint struct {
	url    string
	header http.Header
	model  string // the model's resource name, as setup carries it
	// token, when set (Vertex AI), supplies the OAuth access token sent as
	// "Authorization: Bearer" on every connect. Application default
	// credentials cache their token and refresh it shortly before it
	// expires, so asking on each connect costs nothing while it is fresh,
	// and a session outliving its token reconnects with a new one.
	token tokenSource
}

// tokenSource is what the adapter needs of the client's credentials
// (*auth.Credentials).
type tokenSource interface {
	Token(ctx context.Context) (*auth.Token, error)
}

// handshakeHeader is the header of one connect: the endpoint's, plus a
// bearer token asked for now when the endpoint has a token source.
func (e endpoint) handshakeHeader(ctx context.Context) (http.Header, error) {
	if e.token == nil {
		return e.header, nil
	}
	tok, err := e.token.Token(ctx)
	if err != nil {
		return nil, fmt.Errorf("access token: %w", err)
	}
	if tok == nil || tok.Value == "" {
		return nil, errors.New("access token: the credentials gave an empty token")
	}
	h := e.header.Clone()
	h.Set("Authorization", "Bearer "+tok.Value)
	return h, nil
}

// newEndpoint follows (*genai.Live).Connect: a ws or wss base URL keeps its
// scheme (anything else becomes wss), the base path is kept and the query
// dropped, and the client's HTTPOptions.Headers go along. The model name
// is the one the SDK writes into setup for that backend.
func newEndpoint(cc genai.ClientConfig, model string) (endpoint, error) {
	opts := cc.HTTPOptions
	if opts.APIVersion == "" {
		return endpoint{}, errors.New("the client has no API version")
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
	if cc.Backend == genai.BackendVertexAI {
		return vertexEndpoint(cc, model, scheme, base, header)
	}
	if cc.APIKey == "" {
		return endpoint{}, errors.New("the client has no API key")
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
	return endpoint{url: u.String(), header: header, model: geminiModelName(model)}, nil
}

// vertexEndpoint is the Vertex AI case of newEndpoint: the LlmBidiService
// path, a bearer token from the client's credentials on every connect, and
// the model's full resource name. It needs what the SDK's standard Vertex
// set-up has: a project, a location and credentials (application default
// credentials, or ones given to the client). Express mode (an API key
// instead of credentials) and a proxy base URL without project and
// location, which the SDK also accepts, are not supported.
func vertexEndpoint(cc genai.ClientConfig, model, scheme string, base *url.URL, header http.Header) (endpoint, error) {
	if cc.Project == "" || cc.Location == "" {
		return endpoint{}, errors.New("the Vertex AI client has no project or no location")
	}
	if cc.Credentials == nil {
		return endpoint{}, errors.New("the Vertex AI client has no credentials (an API key, Vertex express mode, is not supported for Live)")
	}
	u := url.URL{Scheme: scheme, Host: base.Host,
		Path: path.Join(base.Path, "ws/google.cloud.aiplatform."+cc.HTTPOptions.APIVersion+".LlmBidiService/BidiGenerateContent")}
	return endpoint{url: u.String(), header: header, model: vertexModelName(cc.Project, cc.Location, model),
		token: cc.Credentials}, nil
}

// geminiModelName is the model's resource name as the SDK writes it into
// setup on the Gemini API: "models/<id>" unless the name already is one.
func geminiModelName(name string) string {
	if strings.HasPrefix(name, "models/") || strings.HasPrefix(name, "tunedModels/") {
		return name
	}
	return "models/" + name
}

// vertexModelName is the model's full resource name as the SDK writes it
// into setup on Vertex AI: "projects/P/locations/L/publishers/google/models/<id>"
// for a model id, "publishers/<pub>/models/<id>" for "<pub>/<id>", and a
// name that already starts with "projects/" as it is.
func vertexModelName(project, location, name string) string {
	switch {
	case strings.HasPrefix(name, "projects/"):
		return name
	case strings.HasPrefix(name, "models/"):
		name = "publishers/google/" + name
	case strings.HasPrefix(name, "publishers/"):
	case strings.Contains(name, "/"):
		pub, id, _ := strings.Cut(name, "/")
		name = "publishers/" + pub + "/models/" + id
	default:
		name = "publishers/google/models/" + name
	}
	return "projects/" + project + "/locations/" + location + "/" + name
}

// dialOptions are how every connection is dialled: through the proxy the
// environment names (HTTPS_PROXY for wss, HTTP_PROXY for ws, NO_PROXY), TLS
// with the system's roots, every write bounded by the write timeout (see
// wsbuf.Client), and messages up to the read limit. A session waiting for
// its next message holds no buffer of the connection's (wsbuf: reads wait
// on the socket holding none, a frame is written from a pooled chunk).
func dialOptions(opts Options) wsbuf.DialOptions {
	return wsbuf.DialOptions{WriteTimeout: opts.WriteTimeout, ReadLimit: opts.ReadLimit,
		Proxy: http.ProxyFromEnvironment}
}
