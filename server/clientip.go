package server

// The client's address behind trusted proxies (TURNSTILE_TRUSTED_PROXIES).

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// TrustedProxies are the networks whose forwarding headers are believed.
// The zero value trusts nobody: every client is its TCP peer.
type TrustedProxies []netip.Prefix

// ParseTrustedProxies reads a comma-separated list of CIDRs or single
// addresses ("10.0.0.0/8, 192.168.1.7"). It names every entry it cannot read.
func ParseTrustedProxies(s string) (TrustedProxies, error) {
	var out TrustedProxies
	var bad []string
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		var p netip.Prefix
		var err error
		if strings.Contains(f, "/") {
			p, err = netip.ParsePrefix(f)
		} else {
			var a netip.Addr
			if a, err = netip.ParseAddr(f); err == nil && a.Zone() != "" {
				err = errors.New("zoned address")
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		if err != nil {
			bad = append(bad, fmt.Sprintf("%q", f))
			continue
		}
		out = append(out, p.Masked())
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("%s: not a CIDR (10.0.0.0/8) or an IP address", strings.Join(bad, ", "))
	}
	if len(out) == 0 && strings.TrimSpace(s) != "" {
		return nil, errors.New("lists no network")
	}
	return out, nil
}

func (t TrustedProxies) trusts(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range t {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// ClientIP is the address of the client that sent r. The TCP peer, unless
// the peer is a trusted proxy: then the forwarding chain
// (X-Forwarded-For, or RFC 7239 Forwarded when there is none) is read
// from the right, past every trusted proxy, and the first address that is
// not one is the client. An entry that is not an address (a forged or
// obfuscated one) ends the walk at the last proxy that was trusted, which
// is then the best answer there is. The result is an IP without a port.
func (t TrustedProxies) ClientIP(r *http.Request) string {
	peer, ok := addrOf(r.RemoteAddr)
	if !ok {
		return r.RemoteAddr
	}
	if len(t) == 0 || !t.trusts(peer) {
		return peer.String()
	}
	chain := forwardedFor(r.Header)
	client := peer
	for i := len(chain) - 1; i >= 0; i-- {
		a, ok := addrOf(chain[i])
		if !ok {
			break
		}
		client = a
		if !t.trusts(a) {
			break
		}
	}
	return client.String()
}

// forwardedFor is the forwarding chain of h, client first: the entries of
// every X-Forwarded-For line, or else the for= parameters of Forwarded.
func forwardedFor(h http.Header) []string {
	var chain []string
	if xff := h.Values("X-Forwarded-For"); len(xff) > 0 {
		for _, line := range xff {
			for _, e := range strings.Split(line, ",") {
				chain = append(chain, strings.TrimSpace(e))
			}
		}
		return chain
	}
	for _, line := range h.Values("Forwarded") {
		for _, elem := range strings.Split(line, ",") {
			for _, pair := range strings.Split(elem, ";") {
				k, v, _ := strings.Cut(strings.TrimSpace(pair), "=")
				if strings.EqualFold(k, "for") {
					chain = append(chain, strings.Trim(v, `"`))
				}
			}
		}
	}
	return chain
}

// addrOf reads "1.2.3.4", "1.2.3.4:5", "2001:db8::1", "[2001:db8::1]:5" or
// "[2001:db8::1]" (Forwarded's forms).
func addrOf(s string) (netip.Addr, bool) {
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Unmap(), true
	}
	host := s
	if h, _, err := net.SplitHostPort(s); err == nil {
		host = h
	} else if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		host = s[1 : len(s)-1]
	}
	a, err := netip.ParseAddr(host)
	if err != nil || a.Zone() != "" {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}
