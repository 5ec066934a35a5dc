package server

import (
	"bytes"
	"embed"
	"html/template"
	"net/http"
	"time"
)

// The admin pages: html/template escapes everything a user or a model
// said, and the pages load nothing from elsewhere.

//go:embed admin/*.html
var adminPages embed.FS

var (
	adminTemplates = template.Must(template.New("").Funcs(template.FuncMap{
		"when": func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05.000") },
		"ms":   func(a, b time.Time) int64 { return b.Sub(a).Milliseconds() },
	}).ParseFS(adminPages, "admin/*.html"))
	listPage    = adminTemplates.Lookup("list.html")
	sessionPage = adminTemplates.Lookup("session.html")
)

// renderHTML writes a page, or a 500 when the template fails (nothing is
// half-written).
func renderHTML(w http.ResponseWriter, t *template.Template, data any) {
	var buf bytes.Buffer
	if err := t.Execute(&buf, data); err != nil {
		http.Error(w, "cannot render the page", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
	_, _ = w.Write(buf.Bytes())
}
