package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"syscall"
	"time"
)

// errNotLoopback refuses a target off this machine: load is only ever sent
// to 127.0.0.0/8, ::1 or localhost.
var errNotLoopback = errors.New("not a loopback address (only 127.0.0.0/8, ::1 and localhost are allowed)")

// checkLoopbackURL accepts raw when its scheme is one of schemes and its
// host is localhost or a loopback IP literal. Other names are refused
// without being resolved.
func checkLoopbackURL(raw string, schemes ...string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("parse %q: %w", raw, err)
	}
	if !slices.Contains(schemes, u.Scheme) {
		return fmt.Errorf("%q: scheme %q is not one of %s", raw, u.Scheme, strings.Join(schemes, ", "))
	}
	if err := checkLoopbackHost(u.Hostname()); err != nil {
		return fmt.Errorf("%q: %w", raw, err)
	}
	return nil
}

func checkLoopbackHost(host string) error {
	if strings.EqualFold(host, "localhost") {
		return nil
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || !ip.Unmap().IsLoopback() {
		return fmt.Errorf("host %q: %w", host, errNotLoopback)
	}
	return nil
}

// loopbackClient is an HTTP client whose every connection is checked at
// dial time, after name resolution and redirects: a connection to an
// address that is not loopback is refused before a byte is sent.
func loopbackClient() *http.Client {
	d := &net.Dialer{Timeout: 5 * time.Second, Control: refuseNonLoopback}
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return d.DialContext(ctx, network, addr)
		},
		Proxy:               nil, // never through a proxy: the target is this machine
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     10 * time.Second,
	}}
}

// refuseNonLoopback is a net.Dialer Control: it runs on the resolved
// address before the socket connects, and refuses any that is not loopback.
func refuseNonLoopback(_, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return fmt.Errorf("dial %s: %w", address, err)
	}
	if err := checkLoopbackHost(host); err != nil {
		return fmt.Errorf("dial %s: %w", address, err)
	}
	return nil
}
