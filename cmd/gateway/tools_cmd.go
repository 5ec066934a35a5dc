package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/turnstile-gw/turnstile/tools"
	"github.com/turnstile-gw/turnstile/tools/builtin"
	"github.com/turnstile-gw/turnstile/tools/kb"
)

const toolsUsage = `Usage:
  gateway tools check [-policy FILE]
        validate the built-in tools, their provider renderings and a policy file;
        prints every problem and exits 1 on any, else one summary line
  gateway tools build [-o FILE] [-policy FILE]
        write tool_registry.json (version, commit, build time, tools with provider schemas and guides)

-policy defaults to $TURNSTILE_POLICY; -policy "" checks without one.
build takes its time from $SOURCE_DATE_EPOCH when set, for reproducible output.
Exit status: 0 fine, 1 problems found, 2 usage error.
`

// toolsCommand runs the operator subcommands for the tool registry:
// `gateway tools check` and `gateway tools build`.
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
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, toolsUsage)
		return 0
	default:
		fmt.Fprintf(stderr, "gateway tools: unknown subcommand %q\n%s", args[0], toolsUsage)
		return 2
	}
}

// toolsFlags parses a subcommand's flags; ok is false when the caller
// should return code.
func toolsFlags(name string, args []string, getenv func(string) string, stderr io.Writer,
	extra func(fs *flag.FlagSet)) (policy string, code int, ok bool) {
	fs := flag.NewFlagSet("gateway tools "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, toolsUsage) }
	p := fs.String("policy", "", "policy file (YAML or JSON); default $TURNSTILE_POLICY")
	if extra != nil {
		extra(fs)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return "", 0, false
		}
		return "", 2, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "gateway tools %s: unexpected argument %q\n", name, fs.Arg(0))
		return "", 2, false
	}
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == "policy" })
	if !set {
		*p = getenv("TURNSTILE_POLICY")
	}
	return *p, 0, true
}

func toolsCheck(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	var dir string
	policy, code, ok := toolsFlags("check", args, getenv, stderr, func(fs *flag.FlagSet) {
		fs.StringVar(&dir, "dir", "", "folder of extra tool manifests (not supported yet)")
	})
	if !ok {
		return code
	}
	if dir != "" {
		fmt.Fprintln(stderr, "gateway tools check: -dir is not supported yet: only the built-in tools (and a policy) can be checked")
		return 2
	}
	reg, problems := loadToolRegistry(policy)
	if reg != nil {
		problems = append(problems, renderProblems(reg)...)
	}
	if reportProblems(stderr, "check", problems) {
		return 1
	}
	summary := fmt.Sprintf("ok: %d tools (%s), registry version %s", len(reg.Tools()), toolNames(reg), reg.Version())
	if policy != "" {
		summary += ", policy " + policy
	}
	fmt.Fprintln(stdout, summary)
	return 0
}

func toolsBuild(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	var out string
	policy, code, ok := toolsFlags("build", args, getenv, stderr, func(fs *flag.FlagSet) {
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
	reg, problems := loadToolRegistry(policy)
	if reportProblems(stderr, "build", problems) {
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

// loadToolRegistry loads the built-in tools (their knowledge-base handlers
// over the embedded sample, which no check calls) and applies the policy
// file, if any. It returns every problem found; the registry is nil when
// there is any problem loading it or applying the policy.
func loadToolRegistry(policyFile string) (*tools.Registry, []error) {
	index, err := kb.Load(kb.Sample)
	if err != nil {
		return nil, []error{fmt.Errorf("embedded knowledge base: %w", err)}
	}
	defer func() { _ = index.Close() }()

	reg, err := tools.Load(builtin.FS, builtin.Handlers(index))
	switch {
	case err != nil && policyFile != "":
		// No registry to check tool names against; still report the file's own problems.
		_, perr := tools.LoadPolicy(policyFile)
		return nil, append(flattenErrors(err), flattenErrors(perr)...)
	case err != nil:
		return nil, flattenErrors(err)
	case policyFile != "":
		reg, _, err = reg.ApplyPolicyFile(policyFile)
		if err != nil {
			return nil, flattenErrors(err)
		}
	}
	return reg, nil
}

// renderProblems tries every provider rendering that can fail.
func renderProblems(reg *tools.Registry) []error {
	var problems []error
	for _, t := range reg.Tools() {
		if _, err := tools.GeminiSchema(t.ParametersSchema()); err != nil {
			problems = append(problems, fmt.Errorf("tool %s: cannot be rendered for Gemini: %w", t.Name, err))
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
		return time.Now(), nil
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
