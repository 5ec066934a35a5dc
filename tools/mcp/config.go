package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// Config is an MCP configuration file (TURNSTILE_MCP_CONFIG) in the format
// MCP clients share:
//
//	{"mcpServers": {
//	  "notes":   {"command": "notes-mcp", "args": ["--db", "/var/notes"], "env": {"NOTES_TOKEN": "${NOTES_TOKEN}"}},
//	  "tickets": {"url": "https://tickets.example.com/mcp", "headers": {"Authorization": "Bearer ${TICKETS_TOKEN}"}}
//	}}
//
// It is immutable once loaded and holds the expanded secrets: never log it.
type Config struct {
	File    string
	Servers []ServerConfig // by Name; disabled servers are left out
}

// ServerConfig is one server of the file.
type ServerConfig struct {
	// Name is the server's key in the file.
	Name string
	// Prefix starts the names of the server's tools: Prefix + "__" + tool.
	// It is Name made safe for every provider.
	Prefix string
	// Stdio servers: the command the gateway runs, its arguments, extra
	// environment variables and working directory.
	Command string
	Args    []string
	Env     map[string]string
	Cwd     string
	// Streamable HTTP servers: the endpoint and the headers sent to it.
	URL     string
	Headers map[string]string
	// NoIdentity ("identity": false in the file) keeps the caller's
	// identity (tools.Identity) out of the server's tools/call _meta, for
	// a third-party server.
	NoIdentity bool
}

// String describes the server without the values of its env, headers and
// args, which may hold secrets (fmt's %v and %+v use it).
func (s ServerConfig) String() string {
	if s.URL != "" {
		u, err := url.Parse(s.URL)
		host := "(unparseable URL)"
		if err == nil {
			host = u.Scheme + "://" + u.Host
		}
		return fmt.Sprintf("%s (http: %s, headers %s)", s.Name, host, strings.Join(sortedKeys(s.Headers), ", "))
	}
	return fmt.Sprintf("%s (stdio: %s, %d args, env %s)", s.Name, s.Command, len(s.Args), strings.Join(sortedKeys(s.Env), ", "))
}

// Transport is "stdio" or "http".
func (s ServerConfig) Transport() string {
	if s.URL != "" {
		return "http"
	}
	return "stdio"
}

// maxConfigBytes bounds what LoadConfig reads.
const maxConfigBytes = 1 << 20

// maxPrefix bounds a server's prefix, so that its tools' names keep room
// within the 64 characters providers allow.
const maxPrefix = 30

var serverKeys = []string{"command", "args", "env", "cwd", "url", "headers", "type", "disabled", "identity"}

// LoadConfig reads and checks an MCP configuration file. ${NAME} in the
// values of args, env, url and headers is replaced by the environment
// variable NAME (lookupEnv; nil: none is set); a reference to an unset
// variable is an error naming it. Every problem is reported at once, each
// line naming the file and the server.
func LoadConfig(path string, lookupEnv func(string) (string, bool)) (*Config, error) {
	fail := func(err error) (*Config, error) { return nil, fmt.Errorf("%s: %w", path, err) }
	f, err := os.Open(path)
	if err != nil {
		return fail(fmt.Errorf("read: %w", err))
	}
	defer func() { _ = f.Close() }()
	data, err := io.ReadAll(io.LimitReader(f, maxConfigBytes+1))
	if err != nil {
		return fail(fmt.Errorf("read: %w", err))
	}
	if len(data) > maxConfigBytes {
		return fail(fmt.Errorf("larger than %d bytes", maxConfigBytes))
	}
	cfg, errs := parseConfig(data, lookupEnv)
	if len(errs) > 0 {
		for i, e := range errs {
			errs[i] = fmt.Errorf("%s: %w", path, e)
		}
		return nil, errors.Join(errs...)
	}
	cfg.File = path
	return cfg, nil
}

func parseConfig(data []byte, lookupEnv func(string) (string, bool)) (*Config, []error) {
	var top map[string]json.RawMessage
	if err := strictJSON(data, &top); err != nil {
		return nil, []error{fmt.Errorf("not a JSON object: %w", err)}
	}
	var errs []error
	for k := range top {
		if k != "mcpServers" {
			errs = append(errs, fmt.Errorf("unknown key %q (the file holds {\"mcpServers\": {...}})", k))
		}
	}
	raw, ok := top["mcpServers"]
	if !ok {
		return nil, append(errs, errors.New(`no "mcpServers" object`))
	}
	names, servers, err := orderedObject(raw)
	if err != nil {
		return nil, append(errs, fmt.Errorf("mcpServers: %w", err))
	}
	cfg := &Config{}
	prefixes := map[string]string{}
	for i, name := range names {
		s, disabled, serr := parseServer(name, servers[i], lookupEnv)
		for _, e := range serr {
			errs = append(errs, fmt.Errorf("mcpServers.%s: %w", name, e))
		}
		if len(serr) > 0 || disabled {
			continue
		}
		if other, dup := prefixes[s.Prefix]; dup {
			errs = append(errs, fmt.Errorf("mcpServers: %q and %q both name their tools %s__…; rename one", other, name, s.Prefix))
			continue
		}
		prefixes[s.Prefix] = name
		cfg.Servers = append(cfg.Servers, s)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	sort.Slice(cfg.Servers, func(i, j int) bool { return cfg.Servers[i].Name < cfg.Servers[j].Name })
	return cfg, nil
}

func parseServer(name string, raw json.RawMessage, lookupEnv func(string) (string, bool)) (ServerConfig, bool, []error) {
	var errs []error
	s := ServerConfig{Name: name, Prefix: Prefix(name)}
	switch {
	case s.Prefix == "":
		errs = append(errs, errors.New("the name has no letter or digit to name its tools by"))
	case len(s.Prefix) > maxPrefix:
		errs = append(errs, fmt.Errorf("the name is longer than %d characters: its tools' names would not fit the 64 providers allow", maxPrefix))
	}
	var fields map[string]json.RawMessage
	if err := strictJSON(raw, &fields); err != nil {
		return s, false, append(errs, errors.New("must be an object"))
	}
	for k := range fields {
		if !slices.Contains(serverKeys, k) {
			errs = append(errs, fmt.Errorf("unknown key %q (allowed: %s)", k, strings.Join(serverKeys, ", ")))
		}
	}
	get := func(k string, into any, what string) bool {
		v, ok := fields[k]
		if !ok {
			return false
		}
		if err := json.Unmarshal(v, into); err != nil {
			errs = append(errs, fmt.Errorf("%s: must be %s", k, what))
			return false
		}
		return true
	}
	expandInto := func(key, v string) string {
		out, err := expand(v, lookupEnv)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", key, err))
		}
		return out
	}
	var disabled bool
	get("disabled", &disabled, "true or false")
	identity := true
	get("identity", &identity, "true or false")
	s.NoIdentity = !identity
	var typ string
	get("type", &typ, "a string")
	get("command", &s.Command, "a string")
	get("cwd", &s.Cwd, "a string")
	var rawURL string
	get("url", &rawURL, "a string")
	var args []string
	if get("args", &args, "a list of strings") {
		for i, a := range args {
			s.Args = append(s.Args, expandInto(fmt.Sprintf("args[%d]", i), a))
		}
	}
	var env, headers map[string]string
	if get("env", &env, "an object of strings") {
		s.Env = map[string]string{}
		for _, k := range sortedKeys(env) {
			if !envName.MatchString(k) {
				errs = append(errs, fmt.Errorf("env: %q is not a variable name", k))
			}
			s.Env[k] = expandInto("env."+k, env[k])
		}
	}
	if get("headers", &headers, "an object of strings") {
		s.Headers = map[string]string{}
		for _, k := range sortedKeys(headers) {
			if !headerName.MatchString(k) {
				errs = append(errs, fmt.Errorf("headers: %q is not a header name", k))
			}
			v := expandInto("headers."+k, headers[k])
			if strings.ContainsAny(v, "\r\n\x00") {
				errs = append(errs, fmt.Errorf("headers.%s: holds a line break or NUL", k))
			}
			s.Headers[k] = v
		}
	}
	if rawURL != "" {
		s.URL = expandInto("url", rawURL)
	}

	switch {
	case typ == "sse":
		errs = append(errs, errors.New(`type "sse": the legacy SSE transport is not supported; use the server's Streamable HTTP endpoint`))
	case typ != "" && typ != "stdio" && typ != "http" && typ != "streamable-http" && typ != "streamableHttp":
		errs = append(errs, fmt.Errorf("type %q: must be stdio or http", typ))
	case s.Command != "" && rawURL != "":
		errs = append(errs, errors.New("has both command (a stdio server) and url (an HTTP server); keep one"))
	case s.Command == "" && rawURL == "":
		errs = append(errs, errors.New(`needs "command" (a stdio server) or "url" (a Streamable HTTP server)`))
	case typ == "stdio" && s.Command == "":
		errs = append(errs, errors.New(`type "stdio" needs "command"`))
	case typ != "" && typ != "stdio" && rawURL == "":
		errs = append(errs, fmt.Errorf("type %q needs \"url\"", typ))
	case s.Command != "" && (len(headers) > 0 || fields["headers"] != nil):
		errs = append(errs, errors.New("headers apply to HTTP servers only"))
	case rawURL != "" && (len(args) > 0 || len(env) > 0 || s.Cwd != ""):
		errs = append(errs, errors.New("args, env and cwd apply to stdio servers only"))
	}
	if s.URL != "" {
		if u, err := url.Parse(s.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, errors.New("url: must be an absolute http or https URL"))
		}
	}
	return s, disabled, errs
}

// strictJSON decodes one JSON value and refuses trailing data.
func strictJSON(data []byte, into any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(into); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("unexpected data after the JSON value")
	}
	return nil
}

// orderedObject returns an object's keys in document order with their
// values, refusing duplicate keys (encoding/json would let the last win).
func orderedObject(raw json.RawMessage) ([]string, []json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return nil, nil, errors.New("must be an object of servers")
	}
	var keys []string
	var vals []json.RawMessage
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, err
		}
		k := tok.(string)
		if slices.Contains(keys, k) {
			return nil, nil, fmt.Errorf("server %q is defined twice", k)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, nil, err
		}
		keys, vals = append(keys, k), append(vals, v)
	}
	return keys, vals, nil
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

var (
	envRef     = regexp.MustCompile(`\$\{([^}]*)\}`)
	envName    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	headerName = regexp.MustCompile("^[A-Za-z0-9!#$%&'*+.^_`|~-]+$")
)

// expand replaces each ${NAME} in v with the environment variable NAME.
func expand(v string, lookup func(string) (string, bool)) (string, error) {
	var errs []error
	out := envRef.ReplaceAllStringFunc(v, func(ref string) string {
		name := ref[2 : len(ref)-1]
		if !envName.MatchString(name) {
			errs = append(errs, fmt.Errorf("%q is not a valid reference (use ${NAME})", ref))
			return ""
		}
		val, ok := "", false
		if lookup != nil {
			val, ok = lookup(name)
		}
		if !ok {
			errs = append(errs, fmt.Errorf("environment variable %s is not set", name))
		}
		return val
	})
	if len(errs) > 0 {
		return "", errors.Join(errs...)
	}
	return out, nil
}
