package intents

import (
	"fmt"
	"strings"
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
		{Intent{Type: HandOff, Reason: "refund over the limit", Message: "wants 300 EUR back"}, true},
		{Intent{Type: HandOff, Message: "no reason given"}, false},
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

// target records what Apply asked of it; voice says whether it is a voice
// session.
type target struct {
	voice bool
	got   []string
}

func (t *target) BlockUser(d time.Duration, reason string) bool {
	t.got = append(t.got, "block "+d.String()+" "+reason)
	return true
}
func (t *target) SetPendingMessage(msg string) bool {
	t.got = append(t.got, "pending "+msg)
	return true
}
func (t *target) StartVoiceSession() bool  { t.got = append(t.got, "start"); return !t.voice }
func (t *target) EndVoiceSession() bool    { t.got = append(t.got, "end"); return t.voice }
func (t *target) SuppressAudio() bool      { t.got = append(t.got, "audio"); return t.voice }
func (t *target) SuppressTranscript() bool { t.got = append(t.got, "transcript"); return t.voice }
func (t *target) HandOff(reason, summary string) bool {
	t.got = append(t.got, "handoff "+reason+": "+summary)
	return true
}

func TestApplyHandsEachIntentToTheTargetInOrderAndReportsIt(t *testing.T) {
	ins := []Intent{
		{Type: SuppressAudio}, {Type: BlockUser, Duration: time.Minute, Reason: "abuse"},
		{Type: SetPendingMessage, Message: "hi"}, {Type: StartVoiceSession},
		{Type: EndVoiceSession}, {Type: SuppressTranscript}, {Type: HandOff, Reason: "refund", Message: "wants 300 EUR"},
	}
	tg := &target{}
	var reported []string
	Apply(ins, tg, func(in Intent, applied bool) {
		reported = append(reported, fmt.Sprintf("%s=%v", in.Type, applied))
	})
	if got := strings.Join(tg.got, "|"); got != "audio|block 1m0s abuse|pending hi|start|end|transcript|handoff refund: wants 300 EUR" {
		t.Errorf("target saw %s", got)
	}
	want := "SUPPRESS_AUDIO=false BLOCK_USER=true SET_PENDING_MESSAGE=true START_VOICE_SESSION=true " +
		"END_VOICE_SESSION=false SUPPRESS_TRANSCRIPT=false HAND_OFF=true"
	if got := strings.Join(reported, " "); got != want {
		t.Errorf("reported %s, want %s", got, want)
	}
}
