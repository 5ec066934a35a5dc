package gateway

import "github.com/turnstile-gw/turnstile/internal/settings"

// upstreamBudgetSettings bound the paid Live connections and the resumes
// one session or user may cause, on every node together (issue 24). Each
// default leaves a person using voice far below it: a move into voice is
// one open (at most TURNSTILE_VOICE_STARTS_PER_MINUTE of them), a Live
// connection is replaced about every 10 minutes, a reconnect or a drain is
// one or two opens.
func upstreamBudgetSettings() []configSetting {
	return []configSetting{
		settings.Int("TURNSTILE_LIVE_CONNECTS_PER_MINUTE", 10, "Live upstream connections opened per session and minute across all nodes, whatever the reason (voice.start, a resume in voice, goAway, reconnects); beyond it: rate_limited and the session stays in text; 0: no limit", 0, -1,
			func(c *Config) *int { return &c.LiveConnectsPerMinute }),
		settings.Int("TURNSTILE_USER_LIVE_CONNECTS_PER_MINUTE", 30, "Live upstream connections opened for one user's sessions per minute across all nodes (in dev mode, per connection); beyond it: rate_limited and the session stays in text; 0: no limit", 0, -1,
			func(c *Config) *int { return &c.UserLiveConnectsPerMinute }),
		settings.Int("TURNSTILE_RESUMES_PER_MINUTE", 10, "resumes of one session per minute across all nodes; beyond it: rate_limited and close 4008; 0: no limit", 0, -1,
			func(c *Config) *int { return &c.ResumesPerMinute }),
		settings.Int("TURNSTILE_USER_RESUMES_PER_MINUTE", 30, "resumes of one user's sessions per minute across all nodes (in dev mode, per connection); beyond it: rate_limited and close 4008; 0: no limit", 0, -1,
			func(c *Config) *int { return &c.UserResumesPerMinute }),
	}
}
