// Package web serves the browser chat client: plain HTML, CSS and ES-module
// JavaScript embedded in the binary, with no build step and no third-party
// code. The client speaks browser protocol v1 (docs/protocol.md), in text
// and in voice (microphone and speaker through AudioWorklets, which load as
// modules under the same script-src 'self').
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

// contentTypes names the type of every file extension the client ships; a
// file with any other extension is not served (a test keeps the two in step).
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".svg":  "image/svg+xml",
}

type file struct {
	body        []byte
	contentType string
	etag        string
}

type handler struct {
	files map[string]file // by path without the leading slash
}

// Handler serves the client: index.html at "/" and the other files at their
// names. Every response carries a strict Content-Security-Policy; files are
// sent with Cache-Control: no-cache and an ETag, so a browser revalidates
// cheaply and never runs a stale app.js against a newer gateway. Only GET
// and HEAD are allowed; unknown paths get 404.
//
// Handler reads the embedded files once; it panics only if the embedded file
// system is unreadable, which a correctly built binary rules out.
func Handler() http.Handler {
	files, err := load(static)
	if err != nil {
		panic(fmt.Sprintf("web: %v", err))
	}
	return &handler{files: files}
}

func load(fsys fs.FS) (map[string]file, error) {
	root, err := fs.Sub(fsys, "static")
	if err != nil {
		return nil, fmt.Errorf("open static: %w", err)
	}
	files := make(map[string]file)
	err = fs.WalkDir(root, ".", func(name string, d fs.DirEntry, err error) error {
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
		files[name] = file{body: body, contentType: ctype, etag: `"` + hex.EncodeToString(sum[:12]) + `"`}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("walk static: %w", err)
	}
	return files, nil
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
	hdr.Set("Content-Type", f.contentType)
	hdr.Set("Cache-Control", "no-cache")
	hdr.Set("ETag", f.etag)
	// ServeContent answers If-None-Match with 304 and handles HEAD and Range.
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(f.body))
}
