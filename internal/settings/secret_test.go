package settings

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

// A secret or a URL's password never reaches fmt (any verb), slog or
// JSON: an operator's log or a debug dump of the configuration.
func TestSecretAndURLPasswordNeverPrinted(t *testing.T) {
	cfg := struct {
		Key   Secret
		Empty Secret
		URL   SecretURL
	}{Key: "hunter2-key", URL: "redis://u:hunter2-pw@h:6379?password=hunter2-q&addr=h2:6379"}
	var logged bytes.Buffer
	slog.New(slog.NewTextHandler(&logged, nil)).Info("cfg", "key", cfg.Key, "url", cfg.URL)
	js, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, out := range []string{fmt.Sprintf("%v %+v %#v %s %q", cfg, cfg, cfg, cfg.Key, cfg.URL), logged.String(), string(js)} {
		if strings.Contains(out, "hunter2") {
			t.Errorf("a secret was printed: %s", out)
		}
		if !strings.Contains(out, "h2:6379") {
			t.Errorf("the URL's server list was hidden too: %s", out)
		}
	}
	if got := fmt.Sprint(cfg.Key, " ", cfg.Empty); got != "set unset" {
		t.Errorf("secrets print as %q, want \"set unset\"", got)
	}
	if got := RedactURL("redis://%zz"); strings.Contains(got, "zz") {
		t.Errorf("an unparseable URL was shown: %q", got)
	}
}
