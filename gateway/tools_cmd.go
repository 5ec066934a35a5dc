package gateway

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/turnstile-gw/turnstile/internal/clock"
	"github.com/turnstile-gw/turnstile/internal/settings"
	"github.com/turnstile-gw/turnstile/tools"
	"github.com/turnstile-gw/turnstile/tools/builtin"
	"github.com/turnstile-gw/turnstile/tools/httptool"
	"github.com/turnstile-gw/turnstile/tools/kb"
	"github.com/turnstile-gw/turnstile/tools/mcp"
)

const toolsUsage = `Usage:
  gateway tools check [-policy FILE] [-dir DIR] [-mcp-config FILE]
        validate the built-in tools, the HTTP tools of DIR, the tools of the MCP servers of FILE (which
        it starts or connects to), their provider renderings and a policy file; prints every problem and
        exits 1 on any, else one line per MCP server and a summary line
  gateway tools build [-o FILE] [-policy FILE] [-dir DIR]
        write tool_registry.json (version, commit, build time, tools with provider schemas and guides)
  gateway tools new [-dir DIR] NAME
        scaffold a Go tool in the built-in tools package DIR (default tools/builtin): NAME/schema.json,
        NAME/guide.md, NAME.go (handler), NAME_test.go, and its line in the constructors table

-policy defaults to $TURNSTILE_POLICY, -dir (check, build) to $TURNSTILE_TOOLS_DIR and -mcp-config to
$TURNSTILE_MCP_CONFIG; an empty value ("-policy ''") leaves it out.
build takes its time from $SOURCE_DATE_EPOCH when set, for reproducible output.
Exit status: 0 fine, 1 problems found, 2 usage error.
`

// toolsCommand runs the operator subcommands for the tool registry:
// `gateway tools check`, `build` and `new`.
func toolsCommand(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, toolsUsage)
		return 2
	}
	switch args[0] {
	case "check":
		return toolsCheck(args[1:], getenv, stdout, stderr)
	case "build":
		return toolsBuild(args[1:], getenv, stdout, stderr)
	case "new":
		return toolsNew(args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, toolsUsage)
		return 0
	default:
		fmt.Fprintf(stderr, "gateway tools: unknown subcommand %q\n%s", args[0], toolsUsage)
		return 2
	}
}

// toolSources are where a check or build takes tools from.
type toolSources struct {
	policy    string // policy file; "" = none
	dir       string // TURNSTILE_TOOLS_DIR; "" = none
	mcpConfig string // TURNSTILE_MCP_CONFIG; "" = none (build has no flag for it)
}

// toolsFlags parses a subcommand's flags: -policy always, -dir and
// -mcp-config when withDir and withMCP; each defaults to its environment
// variable unless given. ok is false when the caller should return code.
func toolsFlags(name string, args []string, getenv func(string) string, stderr io.Writer, withMCP bool,
	extra func(fs *flag.FlagSet)) (src toolSources, code int, ok bool) {
	fs := flag.NewFlagSet("gateway tools "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, toolsUsage) }
	fs.StringVar(&src.policy, "policy", "", "policy file (YAML or JSON); default $TURNSTILE_POLICY")
	fs.StringVar(&src.dir, "dir", "", "folder of HTTP tool folders; default $TURNSTILE_TOOLS_DIR")
	if withMCP {
		fs.StringVar(&src.mcpConfig, "mcp-config", "", "MCP servers file; default $TURNSTILE_MCP_CONFIG")
	}
	if extra != nil {
		extra(fs)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return src, 0, false
		}
		return src, 2, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "gateway tools %s: unexpected argument %q\n", name, fs.Arg(0))
		return src, 2, false
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for flagName, env := range map[string]string{"policy": "TURNSTILE_POLICY", "dir": "TURNSTILE_TOOLS_DIR", "mcp-config": "TURNSTILE_MCP_CONFIG"} {
		if set[flagName] {
			continue
		}
		switch flagName {
		case "policy":
			src.policy = getenv(env)
		case "dir":
			src.dir = getenv(env)
		case "mcp-config":
			if withMCP {
				src.mcpConfig = getenv(env)
			}
		}
	}
	return src, 0, true
}

func toolsCheck(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	src, code, ok := toolsFlags("check", args, getenv, stderr, true, nil)
	if !ok {
		return code
	}
	loaded := loadToolRegistry(src, getenv)
	reg, problems := loaded.reg, loaded.problems
	if reg != nil {
		for _, p := range renderProblems(reg) {
			if loaded.mcp[p.tool] {
				// MCP tools are declared with their JSON Schema as is; the
				// Gemini Schema is only what tool_registry.json shows.
				loaded.warnings = append(loaded.warnings, p.err)
			} else {
				problems = append(problems, p.err)
			}
		}
	}
	for _, w := range loaded.warnings {
		fmt.Fprintln(stderr, "warning:", w)
	}
	if reportProblems(stderr, "check", problems) {
		return 1
	}
	for _, line := range loaded.servers {
		fmt.Fprintln(stdout, line)
	}
	summary := fmt.Sprintf("ok: %d tools (%s), registry version %s", len(reg.Tools()), toolNames(reg), reg.Version())
	if src.policy != "" {
		summary += ", policy " + src.policy
	}
	fmt.Fprintln(stdout, summary)
	return 0
}

func toolsBuild(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	var out string
	src, code, ok := toolsFlags("build", args, getenv, stderr, false, func(fs *flag.FlagSet) {
		fs.StringVar(&out, "o", "tool_registry.json", `output file ("-" for standard output)`)
	})
	if !ok {
		return code
	}
	built, err := buildTime(getenv("SOURCE_DATE_EPOCH"))
	if err != nil {
		fmt.Fprintf(stderr, "gateway tools build: %v\n", err)
		return 2
	}
	loaded := loadToolRegistry(src, getenv)
	reg := loaded.reg
	if reportProblems(stderr, "build", loaded.problems) {
		return 1
	}
	doc, err := reg.BuildManifest(commit, built)
	if err != nil {
		reportProblems(stderr, "build", flattenErrors(err))
		return 1
	}
	if out == "-" {
		if _, err := stdout.Write(doc); err != nil {
			fmt.Fprintf(stderr, "gateway tools build: write: %v\n", err)
			return 1
		}
		return 0
	}
	if err := writeFileAtomic(out, doc); err != nil {
		fmt.Fprintf(stderr, "gateway tools build: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "wrote %s: %d tools, registry version %s\n", out, len(reg.Tools()), reg.Version())
	return 0
}

// loadedTools is what loadToolRegistry found.
type loadedTools struct {
	reg      *tools.Registry // nil when there are problems
	problems []error
	warnings []error
	servers  []string        // one line per MCP server
	mcp      map[string]bool // names of MCP tools
}

// loadToolRegistry loads the built-in tools (their knowledge-base handlers
// over the embedded sample, which no check calls), the HTTP tools of
// src.dir and the tools of src.mcpConfig's servers (started and closed
// again), and applies the policy file, if any, as the gateway does at
// startup. It returns every problem found; the registry is nil when there
// is any.
func loadToolRegistry(src toolSources, getenv func(string) string) loadedTools {
	var out loadedTools
	index, err := kb.Load(kb.Sample)
	if err != nil {
		out.problems = []error{fmt.Errorf("embedded knowledge base: %w", err)}
		return out
	}
	defer func() { _ = index.Close() }()

	var parts [][]*tools.Tool
	builtins, err := tools.LoadWith(builtin.FS, tools.LoadOptions{Origin: "the built-in tools", Handlers: builtin.Handlers(index)})
	out.problems = append(out.problems, flattenErrors(err)...)
	if builtins != nil {
		parts = append(parts, builtins.Tools())
	}
	if src.dir != "" {
		httpTools, err := httptool.Load(os.DirFS(src.dir), "the tools directory "+src.dir, httptool.Options{LookupEnv: lookupFrom(getenv)})
		for _, e := range flattenErrors(err) {
			out.problems = append(out.problems, fmt.Errorf("%s: %w", src.dir, e))
		}
		if httpTools != nil {
			parts = append(parts, httpTools.Tools())
		}
	}
	missing := func(string) bool { return false }
	if src.mcpConfig != "" {
		hub := out.startMCP(src.mcpConfig, getenv)
		if hub != nil {
			defer hub.Close()
			missing = hub.Missing
			parts = append(parts, hub.Tools())
		}
	}

	reg, err := tools.Combine(parts...)
	out.problems = append(out.problems, flattenErrors(err)...)
	switch {
	case len(out.problems) > 0 && src.policy != "":
		// No registry to check tool names against; still report the file's own problems.
		_, perr := tools.LoadPolicy(src.policy)
		out.problems = append(out.problems, flattenErrors(perr)...)
	case len(out.problems) > 0:
	case src.policy != "":
		var warnings []error
		reg, _, warnings, err = reg.ApplyPolicyFileMissing(src.policy, missing)
		out.problems = append(out.problems, flattenErrors(err)...)
		out.warnings = append(out.warnings, warnings...)
	}
	if len(out.problems) == 0 {
		out.reg = reg
	}
	return out
}

// startMCP starts the MCP servers of the config file, waits for their
// tools and reports each server; servers that cannot be reached are
// warnings (the gateway starts without them), tools that cannot be
// registered are problems.
func (out *loadedTools) startMCP(path string, getenv func(string) string) *mcp.Hub {
	cfg, err := mcp.LoadConfig(path, lookupFrom(getenv))
	if err != nil {
		out.problems = append(out.problems, flattenErrors(err)...)
		return nil
	}
	// The gateway's row: the same default, and a value it would refuse is
	// a problem here too.
	var timeout tools.Sources
	if err := settings.Read(&timeout, []settings.Setting[tools.Sources]{tools.MCPStartTimeoutSetting()}, getenv); err != nil {
		out.problems = append(out.problems, err)
		return nil
	}
	hub, err := mcp.Start(context.Background(), cfg, mcp.Options{StartTimeout: timeout.MCPStartTimeout, Version: version})
	if err != nil {
		out.problems = append(out.problems, flattenErrors(err)...)
		return nil
	}
	out.mcp = map[string]bool{}
	for _, t := range hub.Tools() {
		out.mcp[t.Name] = true
	}
	for _, st := range hub.Status() {
		if !st.Up && !st.Listed {
			out.warnings = append(out.warnings, fmt.Errorf("MCP server %s (%s) cannot be reached, so its tools are not checked: %v",
				st.Name, st.Transport, st.Err))
			continue
		}
		out.servers = append(out.servers, fmt.Sprintf("MCP server %s (%s): %d tools", st.Name, st.Transport, st.Tools))
		for _, e := range st.Skipped {
			out.problems = append(out.problems, fmt.Errorf("MCP server %s: %w", st.Name, e))
		}
	}
	return hub
}

// renderProblem is a tool that a provider rendering fails for.
type renderProblem struct {
	tool string
	err  error
}

// renderProblems tries every provider rendering that can fail.
func renderProblems(reg *tools.Registry) []renderProblem {
	var problems []renderProblem
	for _, t := range reg.Tools() {
		if _, err := tools.GeminiSchema(t.ParametersSchema()); err != nil {
			problems = append(problems, renderProblem{t.Name, fmt.Errorf("tool %s: cannot be rendered for Gemini: %w", t.Name, err)})
		}
	}
	return problems
}

// reportProblems prints one problem per line and a count; it reports
// whether there were any.
func reportProblems(w io.Writer, cmd string, problems []error) bool {
	if len(problems) == 0 {
		return false
	}
	for _, p := range problems {
		fmt.Fprintln(w, p)
	}
	noun := "problems"
	if len(problems) == 1 {
		noun = "problem"
	}
	fmt.Fprintf(w, "gateway tools %s: %d %s\n", cmd, len(problems), noun)
	return true
}

// flattenErrors undoes errors.Join (recursively) so that each problem gets
// its own line; nil gives none.
func flattenErrors(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, flattenErrors(e)...)
		}
		return out
	}
	return []error{err}
}

func toolNames(reg *tools.Registry) string {
	var names []string
	for _, t := range reg.Tools() {
		names = append(names, t.Name)
	}
	return strings.Join(names, ", ")
}

// buildTime is $SOURCE_DATE_EPOCH (seconds since 1970) when set, else now.
func buildTime(epoch string) (time.Time, error) {
	if epoch == "" {
		return clock.Wall.Now(), nil
	}
	s, err := strconv.ParseInt(epoch, 10, 64)
	if err != nil || s < 0 {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q: not a non-negative whole number of seconds", epoch)
	}
	return time.Unix(s, 0), nil
}

// writeFileAtomic writes through a temporary file in the same folder and
// renames it, so a reader never sees half a document.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer func() { _ = os.Remove(tmp.Name()) }() // a no-op after the rename
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
