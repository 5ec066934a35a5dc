package intents

import (
	"testing"
	"time"
)

func TestValidateAcceptsWellFormedIntentsAndRefusesOthers(t *testing.T) {
	cases := []struct {
		in Intent
		ok bool
	}{
		{Intent{Type: EndVoiceSession}, true},
		{Intent{Type: SuppressAudio}, true},
		{Intent{Type: SuppressTranscript}, true},
		{Intent{Type: StartVoiceSession}, true},
		{Intent{Type: SetPendingMessage, Message: "Remind the user about their order."}, true},
		{Intent{Type: SetPendingMessage}, false},
		{Intent{Type: BlockUser, Duration: time.Minute, Reason: "abuse"}, true},
		{Intent{Type: BlockUser}, false},
		{Intent{Type: BlockUser, Duration: -time.Second}, false},
		{Intent{Type: "REBOOT_SERVER"}, false},
		{Intent{}, false},
	}
	for _, c := range cases {
		if err := c.in.Validate(); (err == nil) != c.ok {
			t.Errorf("Validate(%+v) = %v, want ok=%v", c.in, err, c.ok)
		}
	}
}
