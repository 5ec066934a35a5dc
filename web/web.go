// Package web serves the demo chat page and the browser client package it is
// built on: plain HTML, CSS and ES-module JavaScript embedded in the binary,
// with no build step and no third-party code. The page (static/) is a UI on
// top of the client package (clients/js, served at /client/), which speaks
// browser protocol v1 (docs/protocol.md) in text and in voice (microphone
// and speaker through AudioWorklets, loaded as modules from /client/).
//
// The /client/ files may be loaded by pages on other origins (CORS: any
// origin may read them; they hold no secrets), so that a web developer can
// embed the client straight from the gateway. The demo page itself keeps a
// strict Content-Security-Policy and cannot be framed.
//
// For browser tests, the page exposes live counters as window.__turnstile
// when its URL has ?debug=1 (frames and bytes sent, audio received and
// played, transcripts, mode, microphone and playback states), and the mic
// button (#mic), mode switch (#voice-mode) and speaking indicator
// (#speaker) carry data-state attributes.
package web

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"

	jsclient "github.com/turnstile-gw/turnstile/clients/js"
)

//go:embed static
var static embed.FS

// contentSecurityPolicy allows the page to load only its own files and to
// open WebSockets to its own origin. Nothing inline, no eval, no frames.
// ws: and wss: are listed because older browsers do not count a WebSocket
// to the page's own host as 'self'.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; " +
	"img-src 'self'; connect-src 'self' ws: wss:; base-uri 'none'; form-action 'none'; " +
	"frame-ancestors 'none'"

// contentTypes names the type of every file extension the page and the
// client package ship; a file with any other extension is not served (a
// test keeps the two in step). Type declarations (.d.ts) are served as text.
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".svg":  "image/svg+xml",
	".ts":   "text/plain; charset=utf-8",
	".json": "application/json",
}

// ClientPrefix is where the client package is served.
const ClientPrefix = "/client/"

type file struct {
	body        []byte
	contentType string
	etag        string
	shared      bool // readable from any origin (the client package)
}

type handler struct {
	files map[string]file // by path without the leading slash
}

// Handler serves the demo page (index.html at "/" and the other files at
// their names) and the client package under /client/. Every response
// carries a strict Content-Security-Policy; files are sent with
// Cache-Control: no-cache and an ETag, so a browser revalidates cheaply and
// never runs a stale app.js against a newer gateway. /client/ files also
// carry Access-Control-Allow-Origin: * so that pages on other origins can
// import them as modules. Only GET and HEAD are allowed; unknown paths get
// 404.
//
// Handler reads the embedded files once; it panics only if the embedded file
// system is unreadable, which a correctly built binary rules out.
func Handler() http.Handler {
	files := make(map[string]file)
	page, err := fs.Sub(static, "static")
	if err == nil {
		err = load(page, "", false, files)
	}
	if err == nil {
		err = load(jsclient.FS(), strings.TrimPrefix(ClientPrefix, "/"), true, files)
	}
	if err != nil {
		panic(fmt.Sprintf("web: %v", err))
	}
	return &handler{files: files}
}

// load adds the servable files of root to files, at prefix + their path.
func load(root fs.FS, prefix string, shared bool, files map[string]file) error {
	err := fs.WalkDir(root, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		ctype, ok := contentTypes[path.Ext(name)]
		if !ok {
			return nil
		}
		body, err := fs.ReadFile(root, name)
		if err != nil {
			return fmt.Errorf("read %s: %w", name, err)
		}
		sum := sha256.Sum256(body)
		files[prefix+name] = file{body: body, contentType: ctype, etag: `"` + hex.EncodeToString(sum[:12]) + `"`, shared: shared}
		return nil
	})
	if err != nil {
		return fmt.Errorf("walk %q: %w", prefix, err)
	}
	return nil
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hdr := w.Header()
	hdr.Set("Content-Security-Policy", contentSecurityPolicy)
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("X-Frame-Options", "DENY")
	// The page URL may carry ?access_token=; never leak it in a Referer.
	hdr.Set("Referrer-Policy", "no-referrer")

	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		hdr.Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	name := strings.TrimPrefix(r.URL.Path, "/")
	if name == "" {
		name = "index.html"
	}
	f, ok := h.files[name]
	if !ok {
		http.NotFound(w, r)
		return
	}
	if f.shared {
		// Modules and AudioWorklets load in CORS mode; the package holds
		// nothing private, and no credentials are involved.
		hdr.Set("Access-Control-Allow-Origin", "*")
		hdr.Set("Cross-Origin-Resource-Policy", "cross-origin")
	}
	hdr.Set("Content-Type", f.contentType)
	hdr.Set("Cache-Control", "no-cache")
	hdr.Set("ETag", f.etag)
	// ServeContent answers If-None-Match with 304 and handles HEAD and Range.
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(f.body))
}
