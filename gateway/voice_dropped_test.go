package gateway_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/turnstile-gw/turnstile/fake/fakegemini"
	"github.com/turnstile-gw/turnstile/intents"
	"github.com/turnstile-gw/turnstile/tools"
)

// The Live model goes on speaking after a SUPPRESS_AUDIO intent or a
// terminal tool's answer (a blocking call's answer always asks it to), and
// Google bills that speech; the gateway does not play it and counts it on
// /metrics, in seconds of 24 kHz PCM16, by reason. Audio played before
// is not counted.
func TestVoiceAudioTheGatewayDropsIsCountedInSeconds(t *testing.T) {
	for name, tc := range map[string]struct {
		tool   *tools.Tool
		reason string
	}{
		"suppress_audio": {testTool(t, "quiet", nil, nil, okTool("ok", intents.Intent{Type: intents.SuppressAudio})), "suppress_audio"},
		"terminal":       {testTool(t, "hang_up", nil, func(m *tools.Manifest) { m.Terminal = true }, okTool("Goodbye!")), "terminal"},
	} {
		t.Run(name, func(t *testing.T) {
			g, script := startVoiceWithTools(t, defaultTestConfig(t), nil, tc.tool)
			c, _, u := startInVoice(t, g, script)
			must(t, u.SendAudio(pcm(1, 4800))) // 0.1 s, played
			c.recvAudio(4800)
			_, err := u.SendToolCall(fakegemini.Call{ID: "x1", Name: tc.tool.Name, Args: map[string]any{}})
			must(t, err)
			u.waitResponses(1)
			must(t, u.SendAudio(pcm(2, 24000))) // 0.5 s the model speaks anyway
			must(t, u.SendAudio(pcm(3, 48000))) // and 1 s more
			must(t, u.SendTurnComplete(nil))
			if fs := c.recvUntil("turn.done"); len(audioOf(fs)) != 0 {
				t.Fatalf("the browser got %d bytes of audio after the tool", len(audioOf(fs)))
			}
			_, body := get(t, g.adminURL+"/metrics")
			for _, r := range []string{"suppress_audio", "terminal", "interrupted"} {
				want := 0.0
				if r == tc.reason {
					want = 1.5
				}
				line := fmt.Sprintf(`turnstile_voice_audio_dropped_seconds_total{channel="browser",reason="%s"} %g`, r, want)
				if !strings.Contains(body, line+"\n") {
					t.Errorf("/metrics lacks %q", line)
				}
			}
		})
	}
}
