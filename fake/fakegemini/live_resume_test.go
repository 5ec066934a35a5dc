package fakegemini

import (
	"testing"

	"google.golang.org/genai"
)

func TestLiveResumptionHandleBringsBackTheStoredState(t *testing.T) {
	brain := NewLiveScript()
	_, base := startLive(t, brain)
	resume := &genai.LiveConnectConfig{SessionResumption: &genai.SessionResumptionConfig{}}

	first := connectLive(t, base, resume)
	first.skipSetupComplete(t)
	s1 := takeSession(t, brain)
	s1.SetState([]string{"user: hi", "model: hello"})
	if _, err := s1.SendResumptionUpdate(true); err != nil {
		t.Fatalf("resumption update: %v", err)
	}
	s1.SetState([]string{"changed after the handle was issued"})
	upd := first.next(t).SessionResumptionUpdate
	if upd == nil || !upd.Resumable || upd.NewHandle == "" {
		t.Fatalf("resumption update = %+v", upd)
	}
	first.close()

	second := connectLive(t, base, &genai.LiveConnectConfig{SessionResumption: &genai.SessionResumptionConfig{Handle: upd.NewHandle}})
	second.skipSetupComplete(t)
	s2 := takeSession(t, brain)
	if !s2.Resumed || s2.Setup.ResumeHandle() != upd.NewHandle {
		t.Fatalf("resumed %v with handle %q, want a resumed session from %q", s2.Resumed, s2.Setup.ResumeHandle(), upd.NewHandle)
	}
	got, _ := s2.State().([]string)
	if len(got) != 2 || got[1] != "model: hello" {
		t.Errorf("resumed state = %#v, want what was stored when the handle was issued", s2.State())
	}
}

func TestLiveUnknownResumptionHandleClosesWith1007(t *testing.T) {
	brain := NewLiveScript()
	_, base := startLive(t, brain)
	_, err := tryConnectLive(t, base, &genai.LiveConnectConfig{SessionResumption: &genai.SessionResumptionConfig{Handle: "no-such-handle"}})
	if err == nil {
		t.Fatal("Connect resumed an unknown handle")
	}
	if ce := asCloseError(t, err); ce.Code != 1007 || ce.Text != reasonInvalidArgument {
		t.Errorf("close %d %q, want 1007 %q", ce.Code, ce.Text, reasonInvalidArgument)
	}
	select {
	case s := <-brain.Sessions():
		t.Errorf("the brain got session %s for a refused resumption", s.ID)
	default:
	}
}
