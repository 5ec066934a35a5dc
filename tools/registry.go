package tools

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io/fs"
	"path"
	"sort"
	"strings"

	"github.com/turnstile-gw/turnstile/protocol"
)

// Registry is the validated set of tools. It is immutable once loaded and
// safe for concurrent use.
type Registry struct {
	tools   []*Tool // sorted by name
	byName  map[string]*Tool
	version string
}

// LoadError is one problem found while loading a registry. File is empty
// when the problem is not in one file (e.g. a handler without a manifest).
type LoadError struct {
	Tool string
	File string
	Err  error
}

func (e *LoadError) Error() string {
	if e.File == "" {
		return fmt.Sprintf("tool %s: %v", e.Tool, e.Err)
	}
	return fmt.Sprintf("tool %s: %s: %v", e.Tool, e.File, e.Err)
}

func (e *LoadError) Unwrap() error { return e.Err }

// Sentinel causes a caller may branch on with errors.Is.
var (
	ErrNoHandler  = errors.New("manifest has no handler")
	ErrNoManifest = errors.New("handler has no manifest folder")
)

// Load reads every top-level folder of fsys as a tool (folders whose name
// starts with "." or "_" and plain files are skipped) and pairs each with
// the handler of the same name. It reports every problem at once, joined
// with errors.Join, each a *LoadError naming the tool and file.
func Load(fsys fs.FS, handlers map[string]Handler) (*Registry, error) {
	return LoadWith(fsys, LoadOptions{Handlers: handlers})
}

// LoadOptions say where LoadWith's tools come from and how they get their
// handlers.
type LoadOptions struct {
	// Origin names the folder in messages (Tool.Origin), e.g.
	// "built-in tools" or "TURNSTILE_TOOLS_DIR /etc/turnstile/tools".
	Origin string
	// Handlers pairs folders with handlers by name. A handler without a
	// folder is an error (ErrNoManifest).
	Handlers map[string]Handler
	// HandlerFor, when set, builds the handler of each tool that Handlers
	// does not hold, from its loaded manifest (package httptool builds
	// HTTP tools this way). Its error is reported as the tool's, in
	// schema.json. When nil, a folder without a handler is an error
	// (ErrNoHandler).
	HandlerFor func(*Tool) (Handler, error)
}

// LoadWith reads every top-level folder of fsys as Load does, taking
// handlers from opts.
func LoadWith(fsys fs.FS, opts LoadOptions) (*Registry, error) {
	checker, err := newManifestChecker()
	if err != nil {
		return nil, fmt.Errorf("tools: load: %w", err)
	}
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, fmt.Errorf("tools: load: %w", err)
	}

	var errs []error
	var loaded []*Tool
	folders := make(map[string]bool)
	for _, e := range entries {
		name := e.Name()
		if !e.IsDir() || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
			continue
		}
		folders[name] = true
		t, toolErrs := loadTool(fsys, checker, name)
		errs = append(errs, toolErrs...)
		h, ok := opts.Handlers[name]
		switch {
		case !ok && opts.HandlerFor != nil:
			if t == nil {
				continue // the manifest's own problems are reported already
			}
			if h, err = opts.HandlerFor(t); err != nil {
				errs = append(errs, &LoadError{Tool: name, File: SchemaFile, Err: err})
				continue
			}
		case !ok:
			errs = append(errs, &LoadError{Tool: name, Err: ErrNoHandler})
		case h == nil:
			errs = append(errs, &LoadError{Tool: name, Err: errors.New("handler is nil")})
		}
		if t != nil && len(toolErrs) == 0 && h != nil {
			t.Handler = h
			t.origin = opts.Origin
			loaded = append(loaded, t)
		}
	}
	var orphans []string
	for name := range opts.Handlers {
		if !folders[name] {
			orphans = append(orphans, name)
		}
	}
	sort.Strings(orphans)
	for _, name := range orphans {
		errs = append(errs, &LoadError{Tool: name, Err: ErrNoManifest})
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return newRegistry(loaded), nil
}

// Combine returns one registry holding every given tool, whatever loaded
// it: built-in tools, HTTP tools, MCP tools. Two tools with one name are
// an error naming both origins. Its version is the content hash of all the
// tools, so combining one registry's tools alone keeps that registry's
// version. Policies apply to the combined registry (WithPolicy).
func Combine(parts ...[]*Tool) (*Registry, error) {
	byName := map[string]*Tool{}
	var all []*Tool
	var errs []error
	for _, part := range parts {
		for _, t := range part {
			if prev, dup := byName[t.Name]; dup {
				errs = append(errs, &LoadError{Tool: t.Name, Err: fmt.Errorf("defined twice: by %s and by %s",
					originOrUnknown(prev), originOrUnknown(t))})
				continue
			}
			byName[t.Name] = t
			all = append(all, t)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return newRegistry(all), nil
}

func originOrUnknown(t *Tool) string {
	if t.origin == "" {
		return "a tool folder"
	}
	return t.origin
}

// newRegistry indexes tools (whose names are unique) and computes the
// content version.
func newRegistry(ts []*Tool) *Registry {
	reg := &Registry{tools: append([]*Tool(nil), ts...), byName: make(map[string]*Tool, len(ts))}
	sort.Slice(reg.tools, func(i, j int) bool { return reg.tools[i].Name < reg.tools[j].Name })
	for _, t := range reg.tools {
		reg.byName[t.Name] = t
	}
	reg.version = contentVersion(reg.tools)
	return reg
}

// loadTool reads and checks one tool folder.
func loadTool(fsys fs.FS, checker *manifestChecker, name string) (*Tool, []error) {
	var errs []error
	fail := func(file string, err error) {
		errs = append(errs, &LoadError{Tool: name, File: file, Err: err})
	}

	rawSchema, err := fs.ReadFile(fsys, path.Join(name, SchemaFile))
	var pm *parsedManifest
	if err != nil {
		fail(SchemaFile, fmt.Errorf("read: %w", err))
	} else {
		var problems []error
		pm, problems = checker.parse(name, rawSchema)
		for _, p := range problems {
			fail(SchemaFile, p)
		}
	}

	rawGuide, err := fs.ReadFile(fsys, path.Join(name, GuideFile))
	var summary string
	if err != nil {
		fail(GuideFile, fmt.Errorf("read: %w", err))
	} else if summary = guideSummary(rawGuide); summary == "" {
		fail(GuideFile, errors.New("no summary: the guide needs a non-heading line of text"))
	}

	if len(errs) > 0 {
		return nil, errs
	}
	m := pm.Manifest
	m.Description = summary
	m.Guide = string(rawGuide)
	return &Tool{
		Manifest:   m,
		args:       pm.args,
		properties: pm.properties,
		rawSchema:  rawSchema,
		rawGuide:   rawGuide,
	}, nil
}

// contentVersion hashes the tools' files in name order, each length-prefixed
// so that moving bytes between files changes the hash.
func contentVersion(tools []*Tool) string {
	h := sha256.New()
	for _, t := range tools {
		writeField(h, []byte(t.Name))
		writeField(h, t.rawSchema)
		writeField(h, t.rawGuide)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

func writeField(h hash.Hash, b []byte) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(b)))
	h.Write(n[:])
	h.Write(b)
}

// Lookup returns the tool with the given name.
func (r *Registry) Lookup(name string) (*Tool, bool) {
	t, ok := r.byName[name]
	return t, ok
}

// Tools returns all tools sorted by name. The slice is the caller's.
func (r *Registry) Tools() []*Tool {
	return append([]*Tool(nil), r.tools...)
}

// ForMode returns the tools declared in the given mode, sorted by name.
func (r *Registry) ForMode(mode protocol.Mode) []*Tool {
	var out []*Tool
	for _, t := range r.tools {
		if t.AllowedIn(mode) {
			out = append(out, t)
		}
	}
	return out
}

// Version is a content hash of the registry (16 hex characters): the same
// files give the same version, any change to a schema.json or guide.md, or
// adding or removing a tool, gives another.
func (r *Registry) Version() string {
	return r.version
}
