package gateway_test

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/turnstile-gw/turnstile/gateway"
)

// The stack files of deploy/ are checked here without a container engine:
// they parse, pin every image, and set the gateway only settings that the
// code knows and docs/configuration.md lists.

// yamlDocs parses every document of a YAML file into generic values.
func yamlDocs(t *testing.T, path string) []map[string]any {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	var docs []map[string]any
	for {
		var doc map[string]any
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			t.Fatalf("%s: not valid YAML: %v", path, err)
		}
		if doc != nil {
			docs = append(docs, doc)
		}
	}
}

func mapAt(v any, keys ...string) map[string]any {
	for _, k := range keys {
		m, _ := v.(map[string]any)
		v = m[k]
	}
	m, _ := v.(map[string]any)
	return m
}

func listAt(v any, keys ...string) []any {
	for _, k := range keys[:len(keys)-1] {
		m, _ := v.(map[string]any)
		v = m[k]
	}
	m, _ := v.(map[string]any)
	l, _ := m[keys[len(keys)-1]].([]any)
	return l
}

func str(v any) string { s, _ := v.(string); return s }

// pinnedImage reports whether ref names a version: a digest, or a tag that
// is not latest and has a digit (7.4.2-alpine, v3.1.0). A locally built
// image (built) may carry any explicit tag.
func pinnedImage(ref string, built bool) bool {
	if strings.Contains(ref, "@sha256:") {
		return true
	}
	slash := strings.LastIndexByte(ref, '/')
	colon := strings.LastIndexByte(ref, ':')
	if colon <= slash || strings.Contains(ref, "$") {
		return false
	}
	tag := ref[colon+1:]
	if tag == "" || tag == "latest" {
		return false
	}
	return built || strings.ContainsAny(tag, "0123456789")
}

func TestStackFilesParseAndPinEveryImage(t *testing.T) {
	var files []string
	err := filepath.WalkDir(deployDir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && (strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml")) {
			files = append(files, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 10 {
		t.Fatalf("only %d YAML files under deploy/: %v", len(files), files)
	}
	images := 0
	for _, f := range files {
		for _, doc := range yamlDocs(t, f) {
			// Compose services, and every container of a pod template.
			for name, svc := range mapAt(doc, "services") {
				ref := str(mapAt(map[string]any{"s": svc}, "s")["image"])
				_, built := mapAt(map[string]any{"s": svc}, "s")["build"]
				images++
				if !pinnedImage(ref, built) {
					t.Errorf("%s: service %s: image %q is not pinned by version", f, name, ref)
				}
			}
			for _, c := range listAt(doc, "spec", "template", "spec", "containers") {
				ref := str(mapAt(map[string]any{"c": c}, "c")["image"])
				images++
				if !pinnedImage(ref, false) {
					t.Errorf("%s: container image %q is not pinned by version", f, ref)
				}
			}
		}
	}
	if images < 6 {
		t.Errorf("only %d images found in the stack files", images)
	}
	for ref, want := range map[string]bool{"redis:7.4.2-alpine": true, "redis": false, "redis:latest": false,
		"grafana/grafana": false, "registry:5000/x:v1": true, "x@sha256:abc": true, "x:${TAG}": false, "x:dev": false} {
		if pinnedImage(ref, false) != want {
			t.Errorf("pinnedImage(%q) = %v", ref, !want)
		}
	}
}

// gatewayEnv collects what the stack files set for the gateway: the
// environment of compose services built from this repository, and the env
// and secret keys of the Kubernetes containers.
func gatewayEnv(t *testing.T) map[string][]string {
	t.Helper()
	env := map[string][]string{} // name → where
	compose := yamlDocs(t, filepath.Join(deployDir, "compose.yaml"))[0]
	gateways := 0
	for name, svc := range mapAt(compose, "services") {
		s := mapAt(map[string]any{"s": svc}, "s")
		if _, built := s["build"]; !built {
			continue
		}
		gateways++
		for k := range mapAt(s, "environment") {
			env[k] = append(env[k], "compose.yaml service "+name)
		}
	}
	if gateways != 2 {
		t.Errorf("compose.yaml has %d gateway services, want 2", gateways)
	}
	k8s := filepath.Join(deployDir, "kubernetes")
	for _, doc := range yamlDocs(t, filepath.Join(k8s, "deployment.yaml")) {
		for _, c := range listAt(doc, "spec", "template", "spec", "containers") {
			for _, e := range listAt(map[string]any{"c": c}, "c", "env") {
				n := str(mapAt(map[string]any{"e": e}, "e")["name"])
				env[n] = append(env[n], "kubernetes/deployment.yaml")
			}
		}
	}
	for _, doc := range yamlDocs(t, filepath.Join(k8s, "secret.yaml")) {
		for k := range mapAt(doc, "stringData") {
			env[k] = append(env[k], "kubernetes/secret.yaml")
		}
	}
	return env
}

func TestStackSetsOnlySettingsTheGatewayKnowsAndDocuments(t *testing.T) {
	known := map[string]bool{}
	for _, s := range configSettings() {
		known[s.env] = true
	}
	doc, err := os.ReadFile(filepath.Join("..", "docs", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	env := gatewayEnv(t)
	if len(env) < 5 {
		t.Fatalf("only %d gateway settings found in the stack files: %v", len(env), env)
	}
	for name, where := range env {
		// The OpenTelemetry SDK's own variables are no gateway settings,
		// but docs/configuration.md lists the ones the gateway honours.
		if !known[name] && !strings.HasPrefix(name, "OTEL_") {
			t.Errorf("%s (set in %s) is not a gateway setting (gateway/config.go)", name, strings.Join(where, ", "))
		}
		if !strings.Contains(string(doc), "| `"+name+"` |") {
			t.Errorf("%s (set in %s) is not listed in docs/configuration.md", name, strings.Join(where, ", "))
		}
	}
	for _, need := range []string{"REDIS_URL", "TURNSTILE_AUTH_SECRET", "TURNSTILE_ADDR", "TURNSTILE_SHUTDOWN_TIMEOUT"} {
		if len(env[need]) < 2 {
			t.Errorf("%s is set in %v; compose and Kubernetes both need it", need, env[need])
		}
	}
}

func parseDur(t *testing.T, what, s string) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatalf("%s: %q is not a duration", what, s)
	}
	return d
}

// TestStackDrainsBeforeItIsKilled: a node gets its whole drain before the
// orchestrator kills it, is taken out of rotation by its /readyz, and is
// scraped on its admin listener.
func TestStackDrainsBeforeItIsKilledAndIsWatched(t *testing.T) {
	compose := yamlDocs(t, filepath.Join(deployDir, "compose.yaml"))[0]
	var adminPorts []string
	for name, svc := range mapAt(compose, "services") {
		s := mapAt(map[string]any{"s": svc}, "s")
		if _, built := s["build"]; !built {
			continue
		}
		e := mapAt(s, "environment")
		drain := parseDur(t, name+" TURNSTILE_SHUTDOWN_TIMEOUT", str(e["TURNSTILE_SHUTDOWN_TIMEOUT"]))
		if grace := parseDur(t, name+" stop_grace_period", str(s["stop_grace_period"])); grace <= drain {
			t.Errorf("compose %s: stop_grace_period %v does not exceed the drain %v", name, grace, drain)
		}
		_, port, _ := net.SplitHostPort(str(e["TURNSTILE_ADMIN_ADDR"]))
		adminPorts = append(adminPorts, port)
	}
	prom, err := os.ReadFile(filepath.Join(deployDir, "prometheus", "prometheus.yml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{"gateway-1:", "gateway-2:"} {
		for _, p := range adminPorts {
			if !strings.Contains(string(prom), target+p) {
				t.Errorf("prometheus.yml does not scrape %s%s (TURNSTILE_ADMIN_ADDR)", target, p)
			}
		}
	}
	lb, err := os.ReadFile(filepath.Join(deployDir, "haproxy", "haproxy.cfg"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"uri /readyz", "http-check expect status 200", "timeout tunnel",
		"server gateway-1 gateway-1:8080", "server gateway-2 gateway-2:8080"} {
		if !bytes.Contains(lb, []byte(want)) {
			t.Errorf("haproxy.cfg lacks %q", want)
		}
	}

	dep := yamlDocs(t, filepath.Join(deployDir, "kubernetes", "deployment.yaml"))[0]
	pod := mapAt(dep, "spec", "template", "spec")
	c := mapAt(map[string]any{"c": listAt(dep, "spec", "template", "spec", "containers")[0]}, "c")
	var drain time.Duration
	for _, e := range listAt(c, "env") {
		if m := mapAt(map[string]any{"e": e}, "e"); str(m["name"]) == "TURNSTILE_SHUTDOWN_TIMEOUT" {
			drain = parseDur(t, "TURNSTILE_SHUTDOWN_TIMEOUT", str(m["value"]))
		}
	}
	preStop, _ := mapAt(c, "lifecycle", "preStop", "sleep")["seconds"].(int)
	grace, _ := pod["terminationGracePeriodSeconds"].(int)
	if drain == 0 || time.Duration(grace)*time.Second <= drain+time.Duration(preStop)*time.Second {
		t.Errorf("terminationGracePeriodSeconds %d does not exceed preStop %ds + TURNSTILE_SHUTDOWN_TIMEOUT %v", grace, preStop, drain)
	}
	if p := str(mapAt(c, "readinessProbe", "httpGet")["path"]); p != "/readyz" {
		t.Errorf("readiness probe %q, want /readyz", p)
	}
	if p := str(mapAt(c, "livenessProbe", "httpGet")["path"]); p != "/healthz" {
		t.Errorf("liveness probe %q, want /healthz", p)
	}
	if mapAt(pod, "securityContext")["runAsNonRoot"] != true || mapAt(c, "securityContext")["readOnlyRootFilesystem"] != true ||
		mapAt(c, "securityContext")["allowPrivilegeEscalation"] != false {
		t.Error("the gateway pod must run as non-root, with a read-only root filesystem and no privilege escalation")
	}
	ann := mapAt(dep, "spec", "template", "metadata", "annotations")
	if ann["prometheus.io/scrape"] != "true" || ann["prometheus.io/port"] != "9090" {
		t.Errorf("scrape annotations %v, want scrape on the admin port 9090", ann)
	}
	kinds := map[string]bool{}
	for _, f := range []string{"deployment.yaml", "service.yaml", "pdb.yaml", "secret.yaml"} {
		for _, d := range yamlDocs(t, filepath.Join(deployDir, "kubernetes", f)) {
			kinds[str(d["kind"])] = true
		}
	}
	for _, k := range []string{"Deployment", "Service", "PodDisruptionBudget", "Secret"} {
		if !kinds[k] {
			t.Errorf("deploy/kubernetes has no %s", k)
		}
	}
	kust, err := os.ReadFile(filepath.Join(deployDir, "kubernetes", "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range regexp.MustCompile(`(?m)^  - (\S+\.yaml)$`).FindAllStringSubmatch(string(kust), -1) {
		if _, err := os.Stat(filepath.Join(deployDir, "kubernetes", f[1])); err != nil {
			t.Errorf("kustomization.yaml lists %s: %v", f[1], err)
		}
	}
}

// composeValue expands compose's ${VAR}, ${VAR:-default} and ${VAR:?message}
// forms against the shell environment env, as `docker compose up` would.
func composeValue(t *testing.T, v string, env map[string]string) string {
	t.Helper()
	return regexp.MustCompile(`\$\{([A-Z0-9_]+)(?:(:-|:\?)([^}]*))?\}`).ReplaceAllStringFunc(v, func(m string) string {
		p := regexp.MustCompile(`\$\{([A-Z0-9_]+)(?:(:-|:\?)([^}]*))?\}`).FindStringSubmatch(m)
		if val := env[p[1]]; val != "" {
			return val
		}
		switch p[2] {
		case ":-":
			return p[3]
		case ":?":
			t.Fatalf("compose would refuse to start without %s: %s", p[1], p[3])
		}
		return ""
	})
}

// TestComposeGatewaysStartAsTheREADMESays loads each compose gateway's
// environment through the gateway's own settings, with what deploy/README.md
// exports: the stack must start offline with TURNSTILE_DEMO=true and with a
// Gemini key, and must refuse (saying why) with neither.
func TestComposeGatewaysStartAsTheREADMESays(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(deployDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "\nexport TURNSTILE_DEMO=true") {
		t.Fatal("deploy/README.md no longer exports TURNSTILE_DEMO=true before bringing the stack up")
	}
	compose := yamlDocs(t, filepath.Join(deployDir, "compose.yaml"))[0]
	secret := strings.Repeat("ab", 32)
	redisPass := strings.Repeat("cd", 32)
	adminToken := strings.Repeat("ef", 32)
	for _, v := range []string{"REDIS_PASSWORD", "TURNSTILE_ADMIN_TOKEN"} {
		if !strings.Contains(string(readme), "\nexport "+v+"=") {
			t.Fatalf("deploy/README.md does not export %s before bringing the stack up", v)
		}
	}
	for _, tc := range []struct {
		name    string
		shell   map[string]string
		refusal string // "" = starts
	}{
		{"offline demo", map[string]string{"TURNSTILE_AUTH_SECRET": secret, "REDIS_PASSWORD": redisPass, "TURNSTILE_ADMIN_TOKEN": adminToken, "TURNSTILE_DEMO": "true"}, ""},
		{"gemini key", map[string]string{"TURNSTILE_AUTH_SECRET": secret, "REDIS_PASSWORD": redisPass, "TURNSTILE_ADMIN_TOKEN": adminToken, "GEMINI_API_KEY": "k"}, ""},
		{"neither", map[string]string{"TURNSTILE_AUTH_SECRET": secret, "REDIS_PASSWORD": redisPass, "TURNSTILE_ADMIN_TOKEN": adminToken}, "TURNSTILE_DEMO"},
	} {
		for name, svc := range mapAt(compose, "services") {
			s := mapAt(map[string]any{"s": svc}, "s")
			if _, built := s["build"]; !built {
				continue
			}
			env := map[string]string{}
			for k, v := range mapAt(s, "environment") {
				env[k] = composeValue(t, str(v), tc.shell)
			}
			_, err := gateway.LoadConfig(nil, func(k string) string { return env[k] })
			switch {
			case tc.refusal == "" && err != nil:
				t.Errorf("%s, %s: the gateway refuses to start: %v", tc.name, name, err)
			case tc.refusal != "" && (err == nil || !strings.Contains(err.Error(), tc.refusal)):
				t.Errorf("%s, %s: want a refusal naming %s, got %v", tc.name, name, tc.refusal, err)
			}
		}
	}
}
