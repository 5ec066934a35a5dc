package session

import (
	"github.com/turnstile-gw/turnstile/profiles"
	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/tools"
	"github.com/turnstile-gw/turnstile/transport"
)

// toolset is one tool registry with what each mode's model is told before
// the conversation. A session pins the toolset current at its start, and
// keeps it for its connection's life: a registry that changes (an MCP
// server's list changed) reaches new sessions only.
type toolset struct {
	reg   *tools.Registry
	text  modePrompt
	voice modePrompt
}

// modePrompt is what a mode's model is told before the conversation.
type modePrompt struct {
	system string
	decls  []transport.ToolDecl
	tokens int // the session-init estimate: system and tool declarations
	// systemTokens and toolTokens split it.
	systemTokens, toolTokens int
	// listed are the tools declared in the mode, as session.ready shows
	// them.
	listed []protocol.ToolInfo
}

// maxToolsets bounds the toolsets a manager keeps built; sessions hold
// their own.
const maxToolsets = 4

// currentToolset is the toolset of the registry current now for the
// default profile, built once per registry version.
func (m *Manager) currentToolset() *toolset { return m.toolsetFor(nil) }

// toolsetFor is the toolset of the registry current now for a profile
// (nil: the default), built once per registry version and profile.
func (m *Manager) toolsetFor(p *profiles.Profile) *toolset {
	reg := m.Tools.Current()
	key, system := reg.Version(), m.cfg.SystemPrompt
	if p != nil {
		key += "/" + p.Name
		if p.SystemPrompt != "" {
			system = p.SystemPrompt
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if ts := m.toolsets[key]; ts != nil {
		return ts
	}
	if p != nil && len(p.Tools) > 0 {
		reg = reg.Subset(p.Tools) // what the model is not offered, it cannot run
	}
	ts := &toolset{reg: reg,
		text:  newModePrompt(system, reg.ForMode(protocol.ModeText)),
		voice: newModePrompt(system+"\n\n"+voicePrompt, reg.ForMode(protocol.ModeVoice)),
	}
	if len(m.toolsets) >= maxToolsets+len(m.cfg.Profiles) {
		clear(m.toolsets)
	}
	m.toolsets[key] = ts
	for _, mode := range protocol.Modes {
		mp := ts.mode(mode)
		if p == nil { // the gauge is the default profile's
			m.Metrics.SetInitContext(mode, mp.systemTokens, mp.toolTokens)
		}
		m.Log.Info("session init size", "registry_version", reg.Version(), "profile", profileLabel(p), "mode", mode,
			"tokens_estimate", mp.tokens, "system_prompt_tokens", mp.systemTokens, "tool_declaration_tokens", mp.toolTokens)
	}
	return ts
}

func newModePrompt(base string, ts []*tools.Tool) modePrompt {
	system, decls := systemAndTools(base, ts)
	listed := make([]protocol.ToolInfo, 0, len(ts))
	for _, t := range ts {
		listed = append(listed, protocol.ToolInfo{Name: t.Name, Modes: t.Modes,
			RequiresConfirmation: t.RequiresConfirmation, Terminal: t.Terminal})
	}
	sys, tool := estimateTokens(system, decls)
	return modePrompt{system: system, decls: decls, tokens: sys + tool, systemTokens: sys, toolTokens: tool, listed: listed}
}

// mode returns the prompt of a mode.
func (ts *toolset) mode(mode protocol.Mode) modePrompt {
	if mode == protocol.ModeVoice {
		return ts.voice
	}
	return ts.text
}

// profileLabel names a profile in logs: "default" for none.
func profileLabel(p *profiles.Profile) string {
	if p == nil {
		return "default"
	}
	return p.Name
}
