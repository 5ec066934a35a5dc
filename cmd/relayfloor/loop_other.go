//go:build !linux

package main

import (
	"errors"
	"net/http"
)

// loop is the event loop of -loop, on Linux only.
type loop struct{}

func newLoop() (*loop, error) { return nil, errors.New("-loop: Linux only (epoll)") }

func (l *loop) Close() {}

func (r *relay) serveLoop(http.ResponseWriter, *http.Request) {}

// coroLoop is the event loop of -coro, on Linux only.
type coroLoop struct{}

func newCoroLoop(bool, bool) (*coroLoop, error) { return nil, errors.New("-coro: Linux only (epoll)") }

func (l *coroLoop) Close() {}

func (r *relay) serveCoro(http.ResponseWriter, *http.Request) {}
