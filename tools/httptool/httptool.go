// Package httptool runs manifest-only HTTP tools: a tool folder whose
// schema.json has an "http" block needs no Go code. A call sends the
// validated arguments to the block's URL as a JSON body (GET: as query
// parameters), and the JSON response becomes the tool's result; an error
// status becomes an error of the matching type. Everything else (argument
// validation, confirmation, the timeout, result shaping, redaction) is the
// orchestrator's, exactly as for Go tools.
//
// Unless its manifest says "identity": false, a request tells the service
// who it is for (tools.Identity: Turnstile-User, Turnstile-Session,
// Turnstile-Call, Idempotency-Key, Turnstile-Claim-<name>) and, with a
// signing secret, proves that the gateway sent it (Turnstile-Signature,
// package internal/signature).
package httptool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/turnstile-gw/turnstile/internal/clock"
	"github.com/turnstile-gw/turnstile/internal/signature"
	"github.com/turnstile-gw/turnstile/tools"
	"github.com/turnstile-gw/turnstile/tracing"
)

// DefaultMaxResponseBytes bounds the response body a call reads.
const DefaultMaxResponseBytes = 1 << 20

// Options are what HTTP tools are built with.
type Options struct {
	// LookupEnv resolves ${NAME} references in header values; nil means
	// os.LookupEnv is not consulted and every reference is missing.
	LookupEnv func(name string) (string, bool)
	// Client sends the requests; nil gives a client that does not follow
	// redirects (a 3xx answer is an error). Calls are bounded by the
	// tool's timeout through their context, not by the client.
	Client *http.Client
	// MaxResponseBytes bounds the body read per call; 0 means
	// DefaultMaxResponseBytes.
	MaxResponseBytes int64
	// SigningSecret, when set, signs every request that carries the
	// identity headers (TURNSTILE_TOOLS_SIGNING_SECRET). It is copied.
	SigningSecret []byte
	// Now is the clock of the signatures' timestamps; nil is the system clock.
	Now func() time.Time
}

// Load reads every tool folder of fsys (TURNSTILE_TOOLS_DIR) as an HTTP
// tool. A folder without an "http" block, a header that references an
// unset environment variable, or any manifest problem is an error; all are
// reported at once, each a *tools.LoadError. origin names the folder in
// messages.
func Load(fsys fs.FS, origin string, opts Options) (*tools.Registry, error) {
	return tools.LoadWith(fsys, tools.LoadOptions{
		Origin:     origin,
		HandlerFor: func(t *tools.Tool) (tools.Handler, error) { return New(t, opts) },
	})
}

// New builds the handler of one HTTP tool from its manifest, expanding the
// ${NAME} references of its header values now. The error names the header
// and the variable, never a value.
func New(t *tools.Tool, opts Options) (tools.Handler, error) {
	spec := t.HTTP
	if spec == nil {
		return nil, errors.New(`no "http" block: a folder in the tools directory is an HTTP tool ` +
			`(schema.json needs "http": {"url": ...}); tools with Go handlers are built into the gateway`)
	}
	header := http.Header{}
	names := make([]string, 0, len(spec.Headers))
	for k := range spec.Headers {
		names = append(names, k)
	}
	sort.Strings(names)
	var errs []error
	for _, k := range names {
		v, err := expand(spec.Headers[k], opts.LookupEnv)
		if err != nil {
			errs = append(errs, fmt.Errorf("http.headers.%s: %w", k, err))
			continue
		}
		header.Set(k, v)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	header.Set("Accept", "application/json")
	if header.Get("User-Agent") == "" {
		header.Set("User-Agent", "turnstile-gateway")
	}
	method := spec.Method
	if method == "" {
		method = http.MethodPost
	}
	client := opts.Client
	if client == nil {
		client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	max := opts.MaxResponseBytes
	if max <= 0 {
		max = DefaultMaxResponseBytes
	}
	tmpl, err := newURLTemplate(spec.URL)
	if err != nil {
		return nil, err
	}
	h := &handler{tool: t.Name, method: method, url: tmpl, result: spec.Result, header: header, client: client, maxBytes: max,
		identity: spec.SendsIdentity(), now: opts.Now}
	if h.identity {
		h.secret = bytes.Clone(opts.SigningSecret)
	}
	if h.now == nil {
		h.now = clock.Wall.Now
	}
	return h, nil
}

// envRef matches ${...}; what is inside is checked separately so that a
// malformed reference is an error rather than text sent as is.
var (
	envRef  = regexp.MustCompile(`\$\{([^}]*)\}`)
	envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// expand replaces each ${NAME} in v with the variable's value.
func expand(v string, lookup func(string) (string, bool)) (string, error) {
	var errs []error
	out := envRef.ReplaceAllStringFunc(v, func(ref string) string {
		name := ref[2 : len(ref)-1]
		if !envName.MatchString(name) {
			errs = append(errs, fmt.Errorf("%q is not a valid reference (use ${NAME}, NAME made of letters, digits and _)", tools.Clip(ref, 40)))
			return ""
		}
		val, ok := "", false
		if lookup != nil {
			val, ok = lookup(name)
		}
		switch {
		case !ok || val == "":
			errs = append(errs, fmt.Errorf("environment variable %s is not set", name))
		case strings.ContainsAny(val, "\r\n\x00"):
			errs = append(errs, fmt.Errorf("environment variable %s holds a line break or NUL, which a header cannot carry", name))
		}
		return val
	})
	if len(errs) > 0 {
		return "", errors.Join(errs...)
	}
	if strings.Contains(out, "${") {
		return "", errors.New("an unterminated ${ reference")
	}
	return out, nil
}

type handler struct {
	tool     string
	method   string
	url      urlTemplate
	result   []string // http.result's JSON pointers; nil: the whole answer
	header   http.Header
	client   *http.Client
	maxBytes int64
	identity bool   // send the identity headers
	secret   []byte // sign with it; nil: unsigned
	now      func() time.Time
}

func (h *handler) Handle(ctx context.Context, call tools.Call) tools.Envelope {
	req, err := h.request(ctx, call)
	if err != nil {
		return tools.Fail(tools.ErrValidation, "the arguments could not be sent: "+err.Error(), false, false)
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return transportError(ctx, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, h.maxBytes+1))
	if err != nil {
		if ctx.Err() != nil {
			return transportError(ctx, ctx.Err())
		}
		return tools.Fail(tools.ErrTransient, "the service's answer broke off before its end", true, true)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return statusError(resp, body)
	}
	if int64(len(body)) > h.maxBytes {
		return tools.Fail(tools.ErrPermanent, fmt.Sprintf("the service answered with more than %d bytes, which were not read", h.maxBytes), false, true)
	}
	data := decodeBody(body)
	if h.result != nil {
		data = pick(data, h.result)
	}
	return tools.OK(data)
}

// request builds the HTTP request: the arguments as a JSON body, or as
// query parameters for GET; the identity headers and the signature of the
// body's exact bytes (empty for GET).
func (h *handler) request(ctx context.Context, call tools.Call) (*http.Request, error) {
	args := call.Args
	if len(bytes.TrimSpace(args)) == 0 || bytes.Equal(bytes.TrimSpace(args), []byte("null")) {
		args = json.RawMessage("{}")
	}
	target, args, err := h.url.fill(args)
	if err != nil {
		return nil, err
	}
	var body io.Reader
	if h.method == http.MethodGet {
		u, err := url.Parse(target)
		if err != nil {
			return nil, err
		}
		q, err := queryOf(args, u.Query())
		if err != nil {
			return nil, err
		}
		u.RawQuery = q.Encode()
		target = u.String()
	} else {
		body = bytes.NewReader(args)
	}
	req, err := http.NewRequestWithContext(ctx, h.method, target, body)
	if err != nil {
		return nil, err
	}
	req.Header = h.header.Clone()
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if h.identity {
		call.Identity().SetHeaders(req.Header)
		if h.secret != nil {
			var signed []byte
			if body != nil {
				signed = args
			}
			req.Header.Set(signature.Header, signature.Sign(h.secret, h.now(), signed))
		}
	}
	// The tool's server joins the call's trace (its execute_tool span).
	tracing.InjectHeader(ctx, req.Header)
	return req, nil
}

// queryOf adds the top-level arguments to q: strings as they are, numbers
// and booleans as their JSON text, arrays as one entry per item, objects as
// JSON; null is left out.
func queryOf(args json.RawMessage, q url.Values) (url.Values, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(args, &obj); err != nil {
		return nil, errors.New("arguments are not a JSON object")
	}
	for k, raw := range obj {
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			items = []json.RawMessage{raw}
		}
		for _, item := range items {
			var s string
			switch {
			case bytes.Equal(item, []byte("null")):
				continue
			case json.Unmarshal(item, &s) == nil:
				q.Add(k, s)
			default:
				var compact bytes.Buffer
				if err := json.Compact(&compact, item); err != nil {
					return nil, err
				}
				q.Add(k, compact.String())
			}
		}
	}
	return q, nil
}

// decodeBody is the result of a 2xx answer: its JSON, else its text;
// an empty body is no data ("ok" for the model).
func decodeBody(body []byte) any {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&v); err == nil && !dec.More() {
		return v
	}
	return strings.ToValidUTF8(string(body), "\uFFFD")
}

// statusError maps an error status to the envelope's error type.
func statusError(resp *http.Response, body []byte) tools.Envelope {
	code := resp.StatusCode
	var typ tools.ErrorType
	retryable, partial := false, false
	switch {
	case code == http.StatusBadRequest || code == http.StatusUnprocessableEntity:
		typ = tools.ErrValidation
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		typ = tools.ErrAuth
	case code == http.StatusNotFound:
		typ = tools.ErrNotFound
	case code == http.StatusRequestTimeout || code == http.StatusGatewayTimeout:
		typ, retryable, partial = tools.ErrTimeout, true, true
	case code == http.StatusTooManyRequests:
		typ, retryable = tools.ErrRateLimit, true
	case code >= 500 && code <= 599:
		typ, retryable, partial = tools.ErrTransient, true, true
	default:
		typ = tools.ErrPermanent
	}
	msg := fmt.Sprintf("the service answered HTTP %d %s", code, http.StatusText(code))
	if m := errorMessage(resp.Header.Get("Content-Type"), body); m != "" {
		msg += ": " + m
	}
	return tools.Fail(typ, msg, retryable, partial)
}

// maxMessage bounds the part of an error message taken from a response.
const maxMessage = 300

// errorMessage finds the error message of an error response: the first
// string among message, error, error.message, detail, title and
// error_description of a JSON body, or a short plain-text body.
func errorMessage(contentType string, body []byte) string {
	var obj map[string]any
	if json.Unmarshal(body, &obj) == nil {
		candidates := []any{obj["message"], obj["error"], nil, obj["detail"], obj["title"], obj["error_description"]}
		if e, ok := obj["error"].(map[string]any); ok {
			candidates[2] = e["message"]
		}
		for _, c := range candidates {
			if s, ok := c.(string); ok && strings.TrimSpace(s) != "" {
				return tools.Clip(strings.TrimSpace(s), maxMessage)
			}
		}
		return ""
	}
	if strings.HasPrefix(contentType, "text/plain") && utf8.Valid(body) {
		return tools.Clip(strings.TrimSpace(string(body)), maxMessage)
	}
	return ""
}

// transportError answers a request that got no response.
func transportError(ctx context.Context, err error) tools.Envelope {
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return tools.Fail(tools.ErrTimeout, "the service did not answer in time", true, true)
	case ctx.Err() != nil:
		return tools.Fail(tools.ErrTransient, "the call was cancelled", true, true)
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return tools.Fail(tools.ErrTransient, "the service could not be reached", true, false)
	}
	return tools.Fail(tools.ErrTransient, "the request to the service failed before an answer came", true, true)
}
