package gateway

import (
	"context"
	"os"

	"github.com/turnstile-gw/turnstile/tools"
)

// What the end-to-end tests (package gateway_test, which start gateways
// through internal/gatewaytest) reach inside the package: helpers of the
// configuration tests, and the pieces some tests check on their own.

var (
	ConfigEnv        = configEnv
	LoadTestConfig   = loadTestConfig
	LoadConfigTo     = loadConfig // with -h's usage written to a writer
	BuildVersion     = buildVersion
	ResolveVersion   = resolveVersion
	RedisDurability  = redisDurability
	RedisRefusal     = redisRefusal
	ToolNames        = toolNames
	Commit           = commit // the -ldflags value: "unknown" in tests
	RedisCheckScript = redisCheckScript
)

const (
	VertexScope        = vertexScope
	RedisACLCategories = redisACLCategories
	RedisCheckKey      = redisCheckKey
)

// SettingEnvs are the variables of every setting.
func SettingEnvs() []string {
	var envs []string
	for _, s := range configSettings() {
		envs = append(envs, s.Env)
	}
	return envs
}

// RenderProblems are the tools of reg that cannot be rendered for a
// provider, one error each.
func RenderProblems(reg *tools.Registry) []error {
	var errs []error
	for _, p := range renderProblems(reg) {
		errs = append(errs, p.err)
	}
	return errs
}

// WatchReloads reloads g's tools folder at each value on hup until ctx
// ends, as Serve does with Options.Reload.
func WatchReloads(ctx context.Context, g *Gateway, hup <-chan os.Signal) {
	watchReloads(ctx, g.parts.toolsReload, hup, g.log)
}

// PseudonymOf is the pseudonym the gateway shows a user by.
func (c Config) PseudonymOf(user string) string {
	k, _ := c.pseudonyms()
	return k.Of(user)
}
