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
