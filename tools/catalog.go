package tools

import (
	"errors"
	"sync"
	"sync/atomic"
)

// Catalog holds the gateway's current registry and replaces it, whole and
// atomically, when a tool source changes (an MCP server's tool list). A
// registry never changes once built, so whoever took Current keeps a
// consistent set of tools for as long as it holds it: a session pins the
// registry it started with, and only sessions started after a rebuild see
// the new one.
type Catalog struct {
	build func() (*Registry, error)
	mu    sync.Mutex // serialises builds, so that the last build wins
	cur   atomic.Pointer[Registry]
}

// NewCatalog builds the first registry with build and returns a catalog
// holding it; build's error is returned as is. Rebuild calls build again.
func NewCatalog(build func() (*Registry, error)) (*Catalog, error) {
	if build == nil {
		return nil, errors.New("tools: catalog without a build function")
	}
	reg, err := build()
	if err != nil {
		return nil, err
	}
	c := &Catalog{build: build}
	c.cur.Store(reg)
	return c, nil
}

// Current returns the current registry. It never returns nil and is safe
// for concurrent use; it costs one atomic load.
func (c *Catalog) Current() *Registry {
	return c.cur.Load()
}

// Rebuild builds the registry again. When the build fails, the current
// registry stays and the error is returned. When it succeeds with another
// version, the new registry becomes current; with the same version the
// current one is kept (so that holders compare equal). It returns the
// registry that is current afterwards and whether it changed.
func (c *Catalog) Rebuild() (reg *Registry, changed bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	next, err := c.build()
	if err != nil {
		return c.cur.Load(), false, err
	}
	if cur := c.cur.Load(); cur.Version() == next.Version() {
		return cur, false, nil
	}
	c.cur.Store(next)
	return next, true, nil
}
