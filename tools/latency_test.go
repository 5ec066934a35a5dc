package tools_test

import (
	"testing"
	"time"

	"github.com/turnstile-gw/turnstile/tools"
)

// The soft latency budget per mode: the manifest can set it for every mode
// or per mode, but in voice it can only tighten the gateway's default; the
// policy file can set anything; retrieval tools fall back to the mode's
// default, other tools to 1 s in voice and none in text.
func TestSoftLatencyPerModeWithVoiceDefaultProtected(t *testing.T) {
	ms := time.Millisecond
	cases := []struct {
		name        string
		category    string
		manifest    string // softLatencyMs member, "" for none
		policy      int    // policy softLatencyMs, 0 for none
		text, voice time.Duration
	}{
		{"retrieval without a value", "retrieval", "", 0, 2000 * ms, 800 * ms},
		{"utility without a value", "utility", "", 0, 0, 1000 * ms},
		{"action without a value", "action", "", 0, 0, 1000 * ms},
		{"action tightening voice", "action", `"softLatencyMs": {"voice": 400},`, 0, 0, 400 * ms},
		{"one number loosening voice is capped there", "retrieval", `"softLatencyMs": 2000,`, 0, 2000 * ms, 800 * ms},
		{"one number tightening voice applies", "retrieval", `"softLatencyMs": 300,`, 0, 300 * ms, 300 * ms},
		{"per mode values", "action", `"softLatencyMs": {"text": 1500, "voice": 500},`, 0, 1500 * ms, 500 * ms},
		{"per mode value above the voice default", "action", `"softLatencyMs": {"voice": 5000},`, 0, 0, 1000 * ms},
		{"policy may loosen voice", "retrieval", `"softLatencyMs": 300,`, 3000, 3000 * ms, 3000 * ms},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			schema := echoWith(`"category": "utility",`, `"category": "`+tc.category+`", `+tc.manifest)
			reg, err := tools.Load(toolFS(map[string][2]string{"echo": {schema, echoGuide}}),
				map[string]tools.Handler{"echo": noop})
			if err != nil {
				t.Fatal(err)
			}
			if tc.policy > 0 {
				p := &tools.Policy{Tools: map[string]tools.ToolOverride{"echo": {SoftLatencyMs: &tc.policy}}}
				if reg, err = reg.WithPolicy(p); err != nil {
					t.Fatal(err)
				}
			}
			tool, _ := reg.Lookup("echo")
			if got := tool.SoftLatencyIn("text"); got != tc.text {
				t.Errorf("text: %v, want %v", got, tc.text)
			}
			if got := tool.SoftLatencyIn("voice"); got != tc.voice {
				t.Errorf("voice: %v, want %v", got, tc.voice)
			}
		})
	}
}

func TestManifestRefusesABadSoftLatency(t *testing.T) {
	for _, bad := range []string{`"softLatencyMs": {"audio": 5},`, `"softLatencyMs": {},`, `"softLatencyMs": "fast",`,
		`"softLatencyMs": {"voice": 0},`} {
		schema := echoWith(`"category": "utility",`, `"category": "utility", `+bad)
		_, err := tools.Load(toolFS(map[string][2]string{"echo": {schema, echoGuide}}), map[string]tools.Handler{"echo": noop})
		if err == nil {
			t.Errorf("%s: loaded", bad)
		}
	}
}
