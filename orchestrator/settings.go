package orchestrator

// The orchestrator's own settings: the per-turn budgets of each mode and
// how long a confirmation waits. Each is a row of a table the gateway lifts
// into its own; a policy file may still override the budgets.

import (
	"time"

	"github.com/turnstile-gw/turnstile/internal/settings"
	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/tools"
)

// Budgets are the per-turn gates of each mode and the life of a
// confirmation. Zero values get the defaults noted.
type Budgets struct {
	Text  Budget // default tools.DefaultBudget("text")
	Voice Budget // default tools.DefaultBudget("voice")
	// ConfirmTTL is how long a confirmation waits for the user, and how long
	// an approval waits for the model's repeated call; default 2 min.
	ConfirmTTL time.Duration
}

// BudgetSettings are the rows of the per-turn budgets; their defaults are
// tools.DefaultBudget's, defined once in tools.
func BudgetSettings() []settings.Setting[Budgets] {
	return []settings.Setting[Budgets]{
		settings.Int("TURNSTILE_VOICE_MAX_RETRIEVAL", tools.DefaultBudget(protocol.ModeVoice).MaxRetrieval,
			"retrieval tool calls allowed per voice turn", 0, -1,
			func(b *Budgets) *int { return &b.Voice.MaxRetrieval }),
		settings.Int("TURNSTILE_VOICE_MAX_CALLS", tools.DefaultBudget(protocol.ModeVoice).MaxCalls,
			"tool calls allowed per voice turn", 0, -1,
			func(b *Budgets) *int { return &b.Voice.MaxCalls }),
		settings.Int("TURNSTILE_TEXT_MAX_RETRIEVAL", tools.DefaultBudget(protocol.ModeText).MaxRetrieval,
			"retrieval tool calls allowed per text turn", 0, -1,
			func(b *Budgets) *int { return &b.Text.MaxRetrieval }),
		settings.Int("TURNSTILE_TEXT_MAX_CALLS", tools.DefaultBudget(protocol.ModeText).MaxCalls,
			"tool calls allowed per text turn", 0, -1,
			func(b *Budgets) *int { return &b.Text.MaxCalls }),
	}
}

// ConfirmSettings is the row of the confirmations' life.
func ConfirmSettings() []settings.Setting[Budgets] {
	return []settings.Setting[Budgets]{
		settings.Duration("TURNSTILE_CONFIRM_TTL", "2m", "how long a confirmation waits for the user, and an approval for the model's repeated call", time.Second,
			func(b *Budgets) *time.Duration { return &b.ConfirmTTL }),
	}
}
