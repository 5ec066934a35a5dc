package web

import (
	"io/fs"
	"net/http"
	"net/http/httptest"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"

	jsclient "github.com/turnstile-gw/turnstile/clients/js"
)

func serve(t *testing.T, method, target string, header http.Header) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, target, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	rec := httptest.NewRecorder()
	Handler().ServeHTTP(rec, req)
	return rec
}

// staticFile reads one file of the page, failing the test when it is missing.
func staticFile(t *testing.T, name string) string {
	t.Helper()
	b, err := fs.ReadFile(static, "static/"+name)
	if err != nil {
		t.Fatalf("read %s: %v", name, err)
	}
	return string(b)
}

// shippedFile reads the embedded file served at urlPath: the page's, or the
// client package's under /client/.
func shippedFile(t *testing.T, urlPath string) string {
	t.Helper()
	if name, ok := strings.CutPrefix(urlPath, ClientPrefix); ok {
		b, err := fs.ReadFile(jsclient.FS(), name)
		if err != nil {
			t.Fatalf("read client %s: %v", name, err)
		}
		return string(b)
	}
	return staticFile(t, strings.TrimPrefix(urlPath, "/"))
}

func cspDirectives(t *testing.T, policy string) map[string]string {
	t.Helper()
	out := make(map[string]string)
	for _, part := range strings.Split(policy, ";") {
		fields := strings.Fields(part)
		if len(fields) == 0 {
			continue
		}
		out[fields[0]] = strings.Join(fields[1:], " ")
	}
	return out
}

func TestRootServesTheChatPageWithAStrictPolicy(t *testing.T) {
	rec := serve(t, http.MethodGet, "/", nil)
	if rec.Code != http.StatusOK {
		t.Fatalf("GET / = %d, want 200", rec.Code)
	}
	h := rec.Header()
	if got := h.Get("Content-Type"); got != "text/html; charset=utf-8" {
		t.Errorf("Content-Type = %q", got)
	}
	if got := h.Get("Cache-Control"); got != "no-cache" {
		t.Errorf("Cache-Control = %q, want no-cache", got)
	}
	if got := h.Get("X-Content-Type-Options"); got != "nosniff" {
		t.Errorf("X-Content-Type-Options = %q, want nosniff", got)
	}
	if got := h.Get("Referrer-Policy"); got != "no-referrer" {
		t.Errorf("Referrer-Policy = %q, want no-referrer (the page URL may hold a token)", got)
	}
	policy := h.Get("Content-Security-Policy")
	if strings.Contains(policy, "unsafe-") || strings.Contains(policy, "*") {
		t.Errorf("CSP allows unsafe sources: %q", policy)
	}
	want := map[string]string{
		"default-src":     "'none'",
		"script-src":      "'self'",
		"style-src":       "'self'",
		"connect-src":     "'self' ws: wss:",
		"frame-ancestors": "'none'",
	}
	got := cspDirectives(t, policy)
	for directive, sources := range want {
		if got[directive] != sources {
			t.Errorf("CSP %s = %q, want %q (policy %q)", directive, got[directive], sources, policy)
		}
	}
	if !strings.Contains(rec.Body.String(), `<script type="module" src="app.js">`) {
		t.Errorf("GET / body is not the chat page:\n%s", rec.Body.String())
	}
}

func TestFilesAreServedWithTheirContentTypes(t *testing.T) {
	cases := []struct{ path, contentType string }{
		{"/index.html", "text/html; charset=utf-8"},
		{"/app.js", "text/javascript; charset=utf-8"},
		{"/ui.js", "text/javascript; charset=utf-8"},
		{"/dom.js", "text/javascript; charset=utf-8"},
		{"/format.js", "text/javascript; charset=utf-8"},
		{"/timeline.js", "text/javascript; charset=utf-8"},
		{"/dialog.js", "text/javascript; charset=utf-8"},
		{"/approvals.js", "text/javascript; charset=utf-8"},
		{"/voiceui.js", "text/javascript; charset=utf-8"},
		{"/mic.svg", "image/svg+xml"},
		{"/client/index.js", "text/javascript; charset=utf-8"},
		{"/client/client.js", "text/javascript; charset=utf-8"},
		{"/client/mic-worklet.js", "text/javascript; charset=utf-8"},
		{"/client/player-worklet.js", "text/javascript; charset=utf-8"},
		{"/client/react.js", "text/javascript; charset=utf-8"},
		{"/client/index.d.ts", "text/plain; charset=utf-8"},
		{"/client/package.json", "application/json"},
		{"/style.css", "text/css; charset=utf-8"},
		{"/favicon.svg", "image/svg+xml"},
	}
	for _, tc := range cases {
		t.Run(tc.path, func(t *testing.T) {
			rec := serve(t, http.MethodGet, tc.path, nil)
			if rec.Code != http.StatusOK {
				t.Fatalf("GET %s = %d, want 200", tc.path, rec.Code)
			}
			if got := rec.Header().Get("Content-Type"); got != tc.contentType {
				t.Errorf("Content-Type = %q, want %q", got, tc.contentType)
			}
			if rec.Header().Get("Content-Security-Policy") == "" || rec.Header().Get("X-Content-Type-Options") != "nosniff" {
				t.Errorf("security headers missing: %v", rec.Header())
			}
			if want := shippedFile(t, tc.path); rec.Body.String() != want {
				t.Errorf("body differs from the embedded file")
			}
		})
	}
}

func TestUnknownPathsAreNotFound(t *testing.T) {
	for _, p := range []string{"/nope.js", "/static/app.js", "/web.go", "/../web.go", "/%2e%2e/web.go", "/app.js/", "/css/", "//app.js",
		"/client/", "/client/jsclient.go", "/client/test/client.test.js", "/client/node_modules/ws/index.js", "/client/README.md", "/client/app.js"} {
		rec := serve(t, http.MethodGet, p, nil)
		if rec.Code != http.StatusNotFound {
			t.Errorf("GET %s = %d, want 404", p, rec.Code)
		}
		if rec.Header().Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: 404 without nosniff", p)
		}
	}
}

func TestOnlyGetAndHeadAreAllowed(t *testing.T) {
	rec := serve(t, http.MethodPost, "/", nil)
	if rec.Code != http.StatusMethodNotAllowed {
		t.Fatalf("POST / = %d, want 405", rec.Code)
	}
	if got := rec.Header().Get("Allow"); got != "GET, HEAD" {
		t.Errorf("Allow = %q", got)
	}
	head := serve(t, http.MethodHead, "/app.js", nil)
	if head.Code != http.StatusOK || head.Body.Len() != 0 {
		t.Errorf("HEAD /app.js = %d with %d body bytes, want 200 and none", head.Code, head.Body.Len())
	}
}

func TestRevalidationWithETagAnswersNotModified(t *testing.T) {
	first := serve(t, http.MethodGet, "/app.js", nil)
	etag := first.Header().Get("ETag")
	if etag == "" {
		t.Fatal("no ETag")
	}
	again := serve(t, http.MethodGet, "/app.js", http.Header{"If-None-Match": {etag}})
	if again.Code != http.StatusNotModified {
		t.Errorf("GET with If-None-Match = %d, want 304", again.Code)
	}
	other := serve(t, http.MethodGet, "/style.css", nil).Header().Get("ETag")
	if other == etag {
		t.Errorf("app.js and style.css share ETag %s", etag)
	}
}

func TestEveryShippedFileIsServed(t *testing.T) {
	for _, root := range []struct {
		fsys fs.FS
		dir  string
	}{{static, "static"}, {jsclient.FS(), "."}} {
		err := fs.WalkDir(root.fsys, root.dir, func(name string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			if _, ok := contentTypes[path.Ext(name)]; !ok {
				t.Errorf("%s has no content type, so it is never served", name)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// A page on another origin imports the client's modules (and the browser
// loads its worklets) in CORS mode: /client/ answers any origin. The page
// itself is not shared.
func TestClientPackageIsLoadableFromAnyOriginAndThePageIsNot(t *testing.T) {
	origin := http.Header{"Origin": {"https://shop.example"}}
	for _, p := range []string{"/client/index.js", "/client/mic-worklet.js", "/client/player-worklet.js", "/client/index.d.ts"} {
		rec := serve(t, http.MethodGet, p, origin)
		if rec.Code != http.StatusOK {
			t.Fatalf("GET %s = %d", p, rec.Code)
		}
		if got := rec.Header().Get("Access-Control-Allow-Origin"); got != "*" {
			t.Errorf("GET %s: Access-Control-Allow-Origin %q, want *", p, got)
		}
		if got := rec.Header().Get("Cross-Origin-Resource-Policy"); got != "cross-origin" {
			t.Errorf("GET %s: Cross-Origin-Resource-Policy %q, want cross-origin", p, got)
		}
		if rec.Header().Get("Access-Control-Allow-Credentials") != "" {
			t.Errorf("GET %s allows credentials", p)
		}
	}
	etag := serve(t, http.MethodGet, "/client/index.js", nil).Header().Get("ETag")
	notModified := serve(t, http.MethodGet, "/client/index.js", http.Header{"Origin": {"https://shop.example"}, "If-None-Match": {etag}})
	if notModified.Code != http.StatusNotModified || notModified.Header().Get("Access-Control-Allow-Origin") != "*" {
		t.Errorf("revalidation: %d with ACAO %q, want 304 with *", notModified.Code, notModified.Header().Get("Access-Control-Allow-Origin"))
	}
	for _, p := range []string{"/", "/app.js", "/style.css"} {
		rec := serve(t, http.MethodGet, p, origin)
		if got := rec.Header().Get("Access-Control-Allow-Origin"); got != "" {
			t.Errorf("GET %s: Access-Control-Allow-Origin %q; only /client/ is shared", p, got)
		}
		if got := rec.Header().Get("X-Frame-Options"); got != "DENY" {
			t.Errorf("GET %s: X-Frame-Options %q, want DENY", p, got)
		}
	}
}

var (
	attrRef   = regexp.MustCompile(`\s(?:src|href)="([^"]+)"`)
	importRef = regexp.MustCompile(`(?m)^\s*import\b[^"']*["']([^"']+)["']`)
	// Worklet modules: new URL("./mic-worklet.js", import.meta.url).
	moduleURLRef = regexp.MustCompile(`new URL\(\s*"([^"]+)",\s*import\.meta\.url\s*\)`)
	cssURLRef    = regexp.MustCompile(`url\(\s*["']?([^"')]+)["']?\s*\)`)
)

func TestEverythingThePageLoadsExists(t *testing.T) {
	var refs []string
	for _, m := range attrRef.FindAllStringSubmatch(staticFile(t, "index.html"), -1) {
		refs = append(refs, m[1])
	}
	for _, js := range jsFiles(t) {
		dir := "/"
		if js.client() {
			dir = ClientPrefix
		}
		for _, m := range importRef.FindAllStringSubmatch(js.body, -1) {
			ref := m[1]
			switch {
			case js.name == "client/react.js" && ref == "react":
				continue // the optional peer dependency, never loaded by the page
			case js.client() && !strings.HasPrefix(ref, "./"):
				t.Errorf("%s imports %q: the package imports only its own files, relatively", js.name, ref)
			case !js.client() && !strings.HasPrefix(ref, "./") && !strings.HasPrefix(ref, ClientPrefix):
				t.Errorf("%s imports %q: the page imports its own files or the client package at %s", js.name, ref, ClientPrefix)
			}
			refs = append(refs, resolve(dir, ref))
		}
		for _, m := range moduleURLRef.FindAllStringSubmatch(js.body, -1) {
			refs = append(refs, resolve(dir, m[1]))
		}
	}
	for _, m := range cssURLRef.FindAllStringSubmatch(staticFile(t, "style.css"), -1) {
		refs = append(refs, m[1])
	}
	for _, want := range []string{"/client/mic-worklet.js", "/client/player-worklet.js", "/client/index.js", "mic.svg"} {
		if !slices.Contains(refs, want) {
			t.Errorf("found no reference to %s; the reference patterns no longer match the page", want)
		}
	}
	if len(refs) < 4 {
		t.Fatalf("found only %v; the reference patterns no longer match the page", refs)
	}
	for _, ref := range refs {
		if strings.Contains(ref, "://") || strings.HasPrefix(ref, "//") {
			t.Errorf("the page loads %q from elsewhere; the gateway may be offline", ref)
			continue
		}
		p := resolve("/", ref)
		if rec := serve(t, http.MethodGet, p, nil); rec.Code != http.StatusOK {
			t.Errorf("the page loads %s, which answers %d", p, rec.Code)
		}
	}
}

// resolve is the URL path of ref as seen from a module in dir.
func resolve(dir, ref string) string {
	if strings.HasPrefix(ref, "/") {
		return ref
	}
	return path.Join(dir, ref)
}

func TestPageHasNothingInlineThePolicyWouldBlock(t *testing.T) {
	page := staticFile(t, "index.html")
	forbidden := map[string]*regexp.Regexp{
		"inline script":  regexp.MustCompile(`<script(?:\s[^>]*)?>\s*[^<\s]`),
		"script w/o src": regexp.MustCompile(`<script(?:\s(?:[^s>]|s[^r>])*)?>`),
		"style element":  regexp.MustCompile(`<style`),
		"style attr":     regexp.MustCompile(`\sstyle=`),
		"event handler":  regexp.MustCompile(`\son[a-z]+=`),
		"javascript url": regexp.MustCompile(`javascript:`),
	}
	for what, re := range forbidden {
		if loc := re.FindStringIndex(page); loc != nil {
			t.Errorf("index.html has an %s (blocked by the CSP): %q", what, page[loc[0]:min(loc[1]+40, len(page))])
		}
	}
}

func TestClientNeverRendersTextAsHTML(t *testing.T) {
	sinks := []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function", "createContextualFragment"}
	for _, js := range jsFiles(t) {
		for _, sink := range sinks {
			if strings.Contains(js.body, sink) {
				t.Errorf("%s uses %s; render text with textContent", js.name, sink)
			}
		}
	}
}
