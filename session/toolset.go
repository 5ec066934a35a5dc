package session

import (
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

// currentToolset is the toolset of the registry current now, built once
// per registry version.
func (m *Manager) currentToolset() *toolset {
	reg := m.Tools.Current()
	m.mu.Lock()
	defer m.mu.Unlock()
	if ts := m.toolsets[reg.Version()]; ts != nil {
		return ts
	}
	ts := &toolset{reg: reg,
		text:  newModePrompt(m.cfg.SystemPrompt, reg.ForMode(protocol.ModeText)),
		voice: newModePrompt(m.cfg.SystemPrompt+"\n\n"+voicePrompt, reg.ForMode(protocol.ModeVoice)),
	}
	if len(m.toolsets) >= maxToolsets {
		clear(m.toolsets)
	}
	m.toolsets[reg.Version()] = ts
	for _, mode := range protocol.Modes {
		p := ts.mode(mode)
		m.Metrics.SetInitContext(mode, p.systemTokens, p.toolTokens)
		m.Log.Info("session init size", "registry_version", reg.Version(), "mode", mode, "tokens_estimate", p.tokens,
			"system_prompt_tokens", p.systemTokens, "tool_declaration_tokens", p.toolTokens)
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
func (ts *toolset) mode(mode string) modePrompt {
	if mode == protocol.ModeVoice {
		return ts.voice
	}
	return ts.text
}
