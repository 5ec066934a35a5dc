package gateway

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"google.golang.org/genai"

	"github.com/turnstile-gw/turnstile/fake/fakegemini"
	"github.com/turnstile-gw/turnstile/fake/fakeopenai"
	"github.com/turnstile-gw/turnstile/internal/clock"
	"github.com/turnstile-gw/turnstile/internal/evloop"
	"github.com/turnstile-gw/turnstile/internal/fdroom"
	"github.com/turnstile-gw/turnstile/internal/pseudonym"
	"github.com/turnstile-gw/turnstile/metrics"
	"github.com/turnstile-gw/turnstile/orchestrator"
	"github.com/turnstile-gw/turnstile/protocol"
	"github.com/turnstile-gw/turnstile/server"
	"github.com/turnstile-gw/turnstile/session"
	"github.com/turnstile-gw/turnstile/store"
	"github.com/turnstile-gw/turnstile/tools"
	"github.com/turnstile-gw/turnstile/tools/kb"
	"github.com/turnstile-gw/turnstile/tracing"
	"github.com/turnstile-gw/turnstile/transport"
	"github.com/turnstile-gw/turnstile/transport/geminilive"
	"github.com/turnstile-gw/turnstile/transport/geminitext"
	"github.com/turnstile-gw/turnstile/transport/openaitext"
	"github.com/turnstile-gw/turnstile/web"
)

// gateway is everything serve needs, and what it must close.
type gateway struct {
	edge     *server.Server
	sessions *session.Manager
	catalog  *tools.Catalog // the current tool registry (built-in, HTTP and MCP tools, policy applied)
	// toolsReload reloads TURNSTILE_TOOLS_DIR into catalog (on SIGHUP).
	toolsReload *toolsReloader
	fake        *fakegemini.Server // the offline model, when it runs in-process
	tracing     *tracing.Provider  // nil with tracing off
	// users names users by pseudonym, in traces and timelines alike (one
	// key: a random one is drawn once); usersStable says whether every
	// node draws the same.
	users       pseudonym.Key
	usersStable bool
	closers     []func()
}

func (g *gateway) close() {
	for i := len(g.closers) - 1; i >= 0; i-- {
		g.closers[i]()
	}
}

// assemble builds the gateway from its configuration. On error, whatever it
// had started is closed.
func assemble(ctx context.Context, cfg Config, reg *prometheus.Registry, log *slog.Logger,
	opts Options) (gw *gateway, err error) {
	gw = &gateway{}
	// The gateway's one clock, handed to every package that reads the time.
	cfg.Clock = clock.Or(cfg.Clock)
	clk := cfg.Clock
	started := gw // "return nil, err" clears gw before the deferred close runs
	defer func() {
		if err != nil {
			started.close()
		}
	}()
	v, c := buildVersion()
	m := metrics.New(reg, metrics.Build{Version: v, Commit: c})
	m.SetContextBudget(cfg.ContextMaxTokens)
	gw.users, gw.usersStable = cfg.pseudonyms()
	tracer, err := startTracing(ctx, cfg, v, m, log, gw)
	if err != nil {
		return nil, err
	}

	rdb, err := redisClient(cfg, log, gw)
	if err != nil {
		return nil, err
	}
	if err := checkRedis(ctx, cfg, rdb, log); err != nil {
		return nil, err
	}
	var readyWarnings []string
	if w := redisDurability(ctx, cfg, rdb, log); w != "" {
		readyWarnings = append(readyWarnings, w)
	}
	storeCfg := cfg.Redis
	storeCfg.UserStorageBytes = userStorageQuota(cfg, log)
	st := store.NewRedisStore(rdb, store.RedisStoreOptions{
		Redis: storeCfg, HistoryMax: cfg.HistoryMax, HistoryMaxBytes: cfg.HistoryMaxBytes,
		Observe: m.ObserveRedis,
		Now:     clk.Now,
	})

	var kbFS fs.FS = kb.Sample
	if cfg.KBDir != "" {
		kbFS = os.DirFS(cfg.KBDir)
	}
	index, err := kb.Load(kbFS)
	if err != nil {
		return nil, fmt.Errorf("knowledge base (TURNSTILE_KB_DIR=%q): %w", cfg.KBDir, err)
	}
	gw.closers = append(gw.closers, func() { _ = index.Close() })
	log.Info("knowledge base loaded", "documents", index.Len(), "dir", orSample(cfg.KBDir))

	catalog, err := toolCatalog(ctx, cfg, index, m, log, gw, opts.Tools)
	if err != nil {
		return nil, err
	}
	gw.catalog = catalog
	// Each session pins catalog.Current() at its start: after an MCP
	// server changes its tools, new sessions get the new registry.
	registry := catalog.Current()
	log.Info("tool registry loaded", "version", registry.Version(), "tools", len(registry.Tools()))
	m.InitTools(metricToolNames(registry))
	profileSet, err := loadProfiles(cfg, registry, log)
	if err != nil {
		return nil, err
	}

	client, liveClient, err := geminiClients(ctx, cfg, log, gw, opts)
	if err != nil {
		return nil, err
	}
	textModel, modelName, err := textModel(cfg, log, gw, opts, client)
	if err != nil {
		return nil, err
	}
	// Before the sessions: the session's in-session token refresh (`auth`) verifies with it too.
	auth, err := server.NewAuthenticator(server.AuthConfig{
		Auth: cfg.Auth, Log: log.With("component", "auth"), Metrics: m, Now: clk.Now,
		ToolClaims: cfg.ToolClaims, ContextClaims: cfg.ContextClaims,
	})
	if err != nil {
		return nil, err
	}
	gw.closers = append(gw.closers, auth.Close)
	var verifier session.TokenVerifier // nil in dev mode: nothing expires
	if !cfg.DevMode() {
		verifier = auth
	}
	desk := handoffDesk(cfg, m, gw, log)
	// The descriptors browser and model connections share (0 when the
	// open-file limit is unknown: not counted), and the one count of the
	// public connections, bounded at TURNSTILE_MAX_CONNECTIONS.
	files := fdroom.New(connectionRoom(cfg.FileLimit)).WithConns(cfg.MaxConnections)
	loops, err := voiceLoops(cfg, log)
	if err != nil {
		return nil, err
	}
	if loops != nil {
		gw.closers = append(gw.closers, loops.Close)
	}
	gw.sessions = session.NewManager(session.Config{
		StoreTimeout:  2 * cfg.RedisTimeout,
		ModelName:     modelName,
		TextProvider:  cfg.TextProvider,
		GenAIProvider: cfg.genAIProvider(),
		Offline:       cfg.Offline(),

		Limits:     cfg.Limits,
		Assistant:  cfg.Assistant,
		AuthLeeway: cfg.AuthLeeway,
		Clock:      clk,
		Pseudonyms: gw.users,
		Profiles:   profileSet,
	}, session.Deps{
		Store: st,
		Model: textModel,
		Live:  fdroom.Live(files, geminilive.New(liveClient, cfg.LiveModel, geminilive.Options{Loops: loops})),
		Orchestrator: orchestrator.NewWith(orchestrator.Config{
			Budgets:      cfg.budgets(),
			StoreTimeout: 2 * cfg.RedisTimeout,
			Now:          clk.Now,
		}, orchestrator.Deps{Registry: registry, Metrics: m, Log: log, Ledger: st, Confirms: st}),
		Tools:   catalog,
		Auth:    verifier,
		Metrics: m,
		Log:     log,
		Tracing: tracer,
		Desk:    desk,
		Loops:   loops,
	})
	watchSessions(gw, log)

	if cfg.DevMode() {
		log.Warn("DEV MODE: no TURNSTILE_AUTH_SECRET nor TURNSTILE_AUTH_JWKS_URL, every browser is the anonymous user; " +
			"allowed on loopback only")
	}
	gw.edge = server.New(server.Config{
		Access: cfg.Access,
		Edge:   cfg.Edge,
	}, server.Deps{
		Sessions:  gw.sessions,
		Auth:      auth,
		Store:     st,
		Leases:    st,
		Metrics:   m,
		Gatherer:  reg,
		Summary:   m.Summary,
		Web:       web.Handler(),
		Log:       log,
		Ready:     m.SetReady,
		Warnings:  readyWarnings,
		Telephony: telephonyEdge(cfg, log, st),
		Admin:     st,
		Cooldowns: st,
		Files:     files,
	})
	gw.closers = append(gw.closers, gw.edge.Close)
	return gw, nil
}

// watchSessions runs the node's one store subscription until the gateway
// closes: a resume on another node ends this node's connection of that
// session, and a Redis that lost its data gets the live sessions back.
func watchSessions(gw *gateway, log *slog.Logger) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := gw.sessions.Watch(ctx); err != nil {
			log.Error("session store watch stopped", "err", err)
		}
	}()
	gw.closers = append(gw.closers, func() { cancel(); <-done })
}

// redisClient connects to REDIS_URL, or starts the embedded miniredis.
func redisClient(cfg Config, log *slog.Logger, gw *gateway) (redis.UniversalClient, error) {
	var (
		rdb redis.UniversalClient
		err error
	)
	if cfg.RedisURL == "" {
		mr, serr := store.StartEmbedded(cfg.Clock)
		if serr != nil {
			return nil, fmt.Errorf("start embedded redis: %w", serr)
		}
		gw.closers = append(gw.closers, mr.Close)
		log.Warn("no REDIS_URL: using an embedded in-process miniredis; session state lives only in this process "+
			"and resume works only on this node", "addr", mr.Addr())
		rdb, err = mr.Client(cfg.RedisTimeout)
	} else {
		rdb, err = store.NewRedisModeClient(cfg.RedisMode, string(cfg.RedisURL), cfg.RedisTimeout)
	}
	if err != nil {
		return nil, err
	}
	gw.closers = append(gw.closers, func() { _ = rdb.Close() })
	return rdb, nil
}

// geminiClients builds the real genai clients, one for REST (text) and one
// for Live (voice, which needs a ws:// or wss:// base URL): against Google
// (or GEMINI_BASE_URL) with a key, or against the in-process fake Gemini
// server running the demo brains without one.
func geminiClients(ctx context.Context, cfg Config, log *slog.Logger, gw *gateway, opts Options) (*genai.Client, *genai.Client, error) {
	if cfg.UseVertexAI {
		return vertexClients(ctx, cfg, log, opts.Credentials)
	}
	key, base := string(cfg.GeminiAPIKey), string(cfg.GeminiBaseURL)
	if cfg.GeminiOffline() {
		if opts.TextBrain == nil {
			// A short pause between chunks so that answers visibly stream.
			opts.TextBrain = &fakegemini.DemoBrain{Pace: 30 * time.Millisecond}
		}
		if opts.LiveBrain == nil {
			opts.LiveBrain = fakegemini.NewLiveDemo()
		}
		fake := fakegemini.New(opts.TextBrain, log.With("component", "fakegemini"))
		fake.SetLiveBrain(opts.LiveBrain)
		gw.fake = fake
		url, err := fake.Start("127.0.0.1:0")
		if err != nil {
			return nil, nil, fmt.Errorf("start the offline demo model: %w", err)
		}
		gw.closers = append(gw.closers, func() { _ = fake.Close() })
		key, base = "offline-demo", url
		if cfg.TextProvider == transport.ProviderOpenAI {
			log.Warn("OFFLINE DEMO VOICE MODEL: no GEMINI_API_KEY, voice sessions (Gemini Live) come from a "+
				"rule-based fake Gemini server on loopback, not from Google; set GEMINI_API_KEY for the real model",
				"fake_url", url)
		} else {
			log.Warn("OFFLINE DEMO MODEL: no GEMINI_API_KEY, answers come from a rule-based fake Gemini server on "+
				"loopback, not from Google; set GEMINI_API_KEY for the real model", "fake_url", url)
		}
	}
	rest, err := genai.NewClient(ctx, &genai.ClientConfig{
		Backend: genai.BackendGeminiAPI, APIKey: key, HTTPOptions: genai.HTTPOptions{BaseURL: base},
		HTTPClient: geminitext.HTTPClient(),
	})
	if err != nil {
		return nil, nil, fmt.Errorf("gemini client: %w", err)
	}
	live, err := genai.NewClient(ctx, &genai.ClientConfig{
		Backend: genai.BackendGeminiAPI, APIKey: key, HTTPOptions: genai.HTTPOptions{BaseURL: geminilive.BaseURL(base)},
	})
	if err != nil {
		return nil, nil, fmt.Errorf("gemini live client: %w", err)
	}
	return rest, live, nil
}

// textModel is the model of text turns and its name: Gemini through the
// REST client, or an OpenAI-compatible server (the in-process fake OpenAI
// server running the demo brain when it has neither key nor base URL).
func textModel(cfg Config, log *slog.Logger, gw *gateway, opts Options, gemini *genai.Client) (transport.TextModel, string, error) {
	if cfg.TextProvider != transport.ProviderOpenAI {
		if cfg.OpenAIAPIKey != "" || cfg.OpenAIBaseURL != "" {
			log.Info("OPENAI_API_KEY / OPENAI_BASE_URL are set but unused: TURNSTILE_TEXT_PROVIDER is gemini")
		}
		m, err := geminitext.New(gemini, cfg.TextModel, geminitext.Options{ToolChoice: cfg.ToolChoice})
		if err != nil {
			return nil, "", fmt.Errorf("gemini text model: %w", err)
		}
		return m, cfg.TextModel, nil
	}
	key, base := string(cfg.OpenAIAPIKey), string(cfg.OpenAIBaseURL)
	if cfg.OpenAIOffline() {
		brain := opts.OpenAIBrain
		if brain == nil {
			// A short pause between chunks so that answers visibly stream.
			brain = &fakeopenai.DemoBrain{Pace: 30 * time.Millisecond}
		}
		fake := fakeopenai.New(brain, fakeopenai.Options{Log: log.With("component", "fakeopenai")})
		url, err := fake.Start("127.0.0.1:0")
		if err != nil {
			return nil, "", fmt.Errorf("start the offline demo model (fake OpenAI server): %w", err)
		}
		gw.closers = append(gw.closers, func() { _ = fake.Close() })
		base = url
		log.Warn("OFFLINE DEMO MODEL: TURNSTILE_TEXT_PROVIDER=openai without OPENAI_API_KEY or OPENAI_BASE_URL, text "+
			"answers come from a rule-based fake OpenAI-compatible server on loopback, not from a real model; set "+
			"OPENAI_BASE_URL (any compatible server) or OPENAI_API_KEY (OpenAI) for a real one", "fake_url", url)
	}
	m, err := openaitext.New(openaitext.NewClient(openaitext.ClientConfig{BaseURL: base, APIKey: key}),
		cfg.OpenAIModel, openaitext.Options{ToolChoice: cfg.ToolChoice})
	if err != nil {
		return nil, "", fmt.Errorf("openai text model: %w", err)
	}
	return m, cfg.OpenAIModel, nil
}

func orSample(dir string) string {
	if dir == "" {
		return "embedded sample"
	}
	return dir
}

// metricToolNames are the registry's tool names, whose metric series start at zero.
func metricToolNames(r *tools.Registry) []string {
	var names []string
	for _, t := range r.Tools() {
		names = append(names, t.Name)
	}
	return names
}

// budgets are the orchestrator's: each mode's gate is the policy file's,
// else the settings'.
func (c Config) budgets() orchestrator.Budgets {
	b := c.Budgets
	if p, ok := c.Policy.Budget(protocol.ModeText); ok {
		b.Text = p
	}
	if p, ok := c.Policy.Budget(protocol.ModeVoice); ok {
		b.Voice = p
	}
	return b
}

// userStorageQuota is the per-user storage quota the store keeps: none in
// dev mode, where every anonymous connection is the one user "anon" (a
// quota there would be shared by every tab and load run of a developer).
func userStorageQuota(cfg Config, log *slog.Logger) int {
	if cfg.DevMode() && cfg.UserStorageBytes > 0 {
		log.Info("dev mode: no per-user storage quota (TURNSTILE_USER_STORAGE_BYTES applies to authenticated users)")
		return 0
	}
	return cfg.UserStorageBytes
}

// voiceLoops are the event loops of TURNSTILE_VOICE_LOOP, one per CPU the
// runtime uses; nil when it is off, or not on Linux (said in the log).
func voiceLoops(cfg Config, log *slog.Logger) (*evloop.Pool, error) {
	if !cfg.VoiceLoop {
		return nil, nil
	}
	if !evloop.Supported {
		log.Info("voice sessions served by a goroutine per socket: event loops (TURNSTILE_VOICE_LOOP) are Linux only")
		return nil, nil
	}
	n := runtime.GOMAXPROCS(0)
	p, err := evloop.NewPool(n)
	if err != nil {
		return nil, fmt.Errorf("TURNSTILE_VOICE_LOOP: %w", err)
	}
	log.Info("voice sessions served by event loops", "loops", n)
	return p, nil
}
