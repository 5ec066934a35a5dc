package gateway_test

// The demo page in a real headless Chromium over the gateway's own TLS:
// the browser trusts only the certificate the gateway rotates to, so the
// page and its wss:// WebSocket work only once the rotated certificate is
// served, without a restart.

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/turnstile-gw/turnstile/internal/testwait"
	"github.com/turnstile-gw/turnstile/internal/tlstest"
)

func TestBrowserConnectsOverWSSToARotatedCertificate(t *testing.T) {
	chromium := findChromium(t)
	untrusted, rotated := tlstest.New(t, "turnstile-before"), tlstest.New(t, "turnstile-rotated")
	certFile, keyFile := untrusted.Files(t, t.TempDir())
	g := startTLSGateway(t, certFile, keyFile)
	addr := strings.TrimPrefix(g.url, "https://")

	wav := filepath.Join(t.TempDir(), "speech.wav")
	if err := writeSpeechWAV(wav); err != nil {
		t.Fatal(err)
	}
	// Chromium accepts a certificate with this public key in place of one
	// from a known CA (an SPKI pin, not --ignore-certificate-errors: every
	// other certificate is still refused).
	b := startBrowser(t, chromium, wav, chromedp.Flag("ignore-certificate-errors-spki-list", rotated.SPKIHash()))
	ctx, cancel := context.WithTimeout(b.ctx, browserConversationTimeout)
	defer cancel()

	// Before the rotation the browser refuses the gateway's certificate.
	if _, err := chromedp.Run(ctx, chromedp.Navigate(g.url+"/?debug=1")); err == nil || !strings.Contains(err.Error(), "ERR_CERT") {
		b.fail(fmt.Sprintf("opening the page with an unpinned certificate: %v, want a certificate error", err))
	}

	rotated.Install(t, certFile, keyFile)
	testwait.For(t, "the gateway to serve the rotated certificate", func() bool {
		cn, _ := servedCert(t, addr)
		return cn == "turnstile-rotated"
	})

	b.do(ctx, "open the page over https", chromedp.Navigate(g.url+"/?debug=1"))
	b.waitFor(ctx, "the page to connect over wss", `window.__turnstile?.connected === true &&
		document.getElementById("status").dataset.state === "connected" && location.protocol === "https:"`)
	if err := chromedp.Do(ctx, chromedp.SendKeys("#message", "How long does shipping take?"), chromedp.Click("#send")); err != nil {
		b.fail(fmt.Sprintf("send a message: %v", err))
	}
	b.waitFor(ctx, "the demo model's answer",
		`[...document.querySelectorAll("#transcript .msg.model")].some((m) => m.textContent.includes("Shipping"))`)
	if got := g.counterSum("turnstile_sessions_refused_total"); got != 0 {
		b.fail(fmt.Sprintf("%v sessions refused", got))
	}
}
