package gateway

import (
	"strings"
	"testing"
)

func TestLiveVoiceSettingsAreCheckedAtStart(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want string // "" valid
	}{
		{map[string]string{"TURNSTILE_LIVE_VOICE": "Kore"}, ""},
		{map[string]string{"TURNSTILE_LIVE_VOICE": "Brian"}, "TURNSTILE_LIVE_VOICE"},
		{map[string]string{"TURNSTILE_LIVE_VOICES": "Kore,Puck", "TURNSTILE_LIVE_VOICE": "Puck"}, ""},
		{map[string]string{"TURNSTILE_LIVE_VOICES": "Kore,Puck", "TURNSTILE_LIVE_VOICE": "Zephyr"}, "TURNSTILE_LIVE_VOICE"},
		{map[string]string{"TURNSTILE_LIVE_VOICES": "Kore,Kore"}, "listed twice"},
		{map[string]string{"TURNSTILE_LIVE_VOICES": "Ko re"}, "TURNSTILE_LIVE_VOICES"},
		{map[string]string{"TURNSTILE_CONTEXT_CLAIMS": "tenant,plan"}, ""},
		{map[string]string{"TURNSTILE_CONTEXT_CLAIMS": "ten ant"}, "TURNSTILE_CONTEXT_CLAIMS"},
	} {
		_, err := LoadConfig(nil, configEnv(tc.env))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%v: %v", tc.env, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%v: %v, want an error naming %s", tc.env, err, tc.want)
		}
	}
	cfg, err := LoadConfig(nil, configEnv(map[string]string{"TURNSTILE_LIVE_VOICES": "none"}))
	if err != nil || len(cfg.LiveVoices) != 0 {
		t.Errorf("none: %v %v, want no voices", cfg.LiveVoices, err)
	}
}
