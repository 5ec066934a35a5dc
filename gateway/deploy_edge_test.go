package gateway_test

// The edge of the shipped stack: TLS termination (HAProxy, the nginx
// example, the Kubernetes Ingress), access logs that cannot carry a token
// from a query string, a password on compose's Redis, and the admin port
// closed to all but Prometheus in Kubernetes.

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/turnstile-gw/turnstile/internal/tlstest"
)

func readDeploy(t *testing.T, parts ...string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(append([]string{deployDir}, parts...)...))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// haproxyQueryFields are HAProxy log-format fields that hold the query
// string: the request line (%r), the URI (%HU), the query (%HQ), and
// sample fetches of the URL or query.
var haproxyQueryFields = regexp.MustCompile(`%(\{[^}]*\})?r\b|%(\{[^}]*\})?H[UQ]\b|%\[(url|query|capture\.req\.uri|http_first_req|req\.hdr\(\s*:?path)`)

func TestStackHAProxyLogsNoQueryStringAndTerminatesTLS(t *testing.T) {
	cfg := readDeploy(t, "haproxy", "haproxy.cfg")
	var formats []string
	for line := range strings.Lines(cfg) {
		f := strings.Fields(line)
		switch {
		case len(f) == 0 || strings.HasPrefix(f[0], "#"):
		case f[0] == "option" && len(f) > 1 && (f[1] == "httplog" || f[1] == "httpslog"):
			// Their formats log the request line, query string included.
			t.Errorf("haproxy.cfg uses %q: its log format has the request line with its query string", strings.TrimSpace(line))
		case f[0] == "log-format" || f[0] == "error-log-format":
			formats = append(formats, strings.TrimSpace(line))
		}
	}
	if len(formats) == 0 {
		t.Fatal("haproxy.cfg sets no log-format: HAProxy's own formats log the request line with its query string")
	}
	for _, f := range formats {
		if m := haproxyQueryFields.FindString(f); m != "" {
			t.Errorf("haproxy.cfg %s: %q logs the query string (use %%HPO, the path only)", f, m)
		}
		if !strings.Contains(f, "%HPO") {
			t.Errorf("haproxy.cfg %s: no %%HPO (the path): the log would not say what was requested", f)
		}
	}
	for _, bad := range []string{"%r", "%{+Q}r", "%HU", "%HQ", "%[url]", "%[query]", "%[capture.req.uri]"} {
		if haproxyQueryFields.FindString(bad) == "" {
			t.Errorf("the check misses %s", bad)
		}
	}
	if haproxyQueryFields.FindString("%HPO %HP %HM") != "" {
		t.Error("the check refuses the path")
	}

	bind := regexp.MustCompile(`(?m)^\s*bind\s+:(\d+)\s+ssl\s+crt\s+(\S+)`).FindStringSubmatch(cfg)
	if bind == nil {
		t.Fatal("haproxy.cfg has no TLS bind (bind :PORT ssl crt FILE)")
	}
	if !strings.Contains(cfg, "ssl-min-ver TLSv1.2") {
		t.Error("haproxy.cfg does not refuse TLS below 1.2")
	}
	// compose publishes the TLS port and mounts the certificate where the
	// bind reads it, from the folder its tls-cert service writes to.
	compose := yamlDocs(t, filepath.Join(deployDir, "compose.yaml"))[0]
	lb := mapAt(compose, "services", "lb")
	published := false
	for _, p := range listAt(lb, "ports") {
		published = published || strings.HasSuffix(str(p), ":"+bind[1])
	}
	if !published {
		t.Errorf("compose.yaml does not publish HAProxy's TLS port %s", bind[1])
	}
	certDir := filepath.Dir(bind[2])
	mounted := ""
	for _, v := range listAt(lb, "volumes") {
		if src, dst, _ := strings.Cut(strings.TrimSuffix(str(v), ":ro"), ":"); dst == certDir {
			mounted = src
		}
	}
	if mounted == "" {
		t.Fatalf("compose.yaml mounts nothing at %s for HAProxy's certificate", certDir)
	}
	writer := false
	for _, v := range listAt(mapAt(compose, "services", "tls-cert"), "volumes") {
		writer = writer || strings.HasPrefix(str(v), mounted+":")
	}
	if !writer {
		t.Errorf("no tls-cert service writes a certificate to %s", mounted)
	}
	if cond := str(mapAt(lb, "depends_on", "tls-cert")["condition"]); cond != "service_completed_successfully" {
		t.Errorf("HAProxy starts before its certificate exists (depends_on tls-cert condition %q)", cond)
	}

	// With HAProxy installed (CI installs it), the file is valid for it.
	bin, err := exec.LookPath("haproxy")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("haproxy is not installed (scripts/install-test-deps installs it)")
		}
		t.Log("haproxy not installed: the config's syntax is not checked")
		return
	}
	dir := t.TempDir()
	// What HAProxy reads as a certificate: the chain, then the key.
	cert := tlstest.New(t, "localhost")
	certFile := filepath.Join(dir, "turnstile.pem")
	if err := os.WriteFile(certFile, append(cert.CertPEM, cert.KeyPEM...), 0o600); err != nil {
		t.Fatal(err)
	}
	local := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(local, []byte(strings.ReplaceAll(cfg, bind[2], certFile)), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "-c", "-f", local).CombinedOutput(); err != nil {
		t.Fatalf("haproxy -c: %v\n%s", err, out)
	}
}

func TestStackNginxExampleCarriesWebSocketsOverTLSAndLogsNoQueryString(t *testing.T) {
	conf := readDeploy(t, "nginx", "turnstile.conf")
	code := regexp.MustCompile(`(?m)#.*$`).ReplaceAllString(conf, "")
	formats := regexp.MustCompile(`log_format\s+(\w+)([^;]*);`).FindAllStringSubmatch(code, -1)
	if len(formats) == 0 {
		t.Fatal("the nginx example defines no log_format: nginx's combined format logs $request, with its query string")
	}
	named := map[string]bool{}
	for _, f := range formats {
		named[f[1]] = true
		// $request, $request_uri, $args, $query_string and $arg_* carry it; $uri does not.
		if m := regexp.MustCompile(`\$(request|request_uri|args|query_string|arg_\w+|request_line)\b`).FindString(f[2]); m != "" {
			t.Errorf("log_format %s logs %s, which holds the query string", f[1], m)
		}
		if !strings.Contains(f[2], "$uri") {
			t.Errorf("log_format %s does not log the path ($uri)", f[1])
		}
	}
	logs := regexp.MustCompile(`access_log\s+(\S+)\s*(\w*)\s*;`).FindAllStringSubmatch(code, -1)
	servers := strings.Count(code, "server {")
	if len(logs) < servers {
		t.Errorf("%d server blocks, %d access_log lines: a server without one logs in nginx's combined format", servers, len(logs))
	}
	for _, l := range logs {
		if l[1] != "off" && !named[l[2]] {
			t.Errorf("access_log %s uses format %q, not one defined here", l[1], l[2])
		}
	}
	for _, want := range []string{"listen 443 ssl", "ssl_certificate ", "ssl_certificate_key ", "ssl_protocols       TLSv1.2 TLSv1.3",
		"proxy_http_version 1.1", "proxy_set_header Upgrade $http_upgrade", "proxy_set_header Connection $connection_upgrade",
		"proxy_read_timeout 1h", "X-Forwarded-For $proxy_add_x_forwarded_for", "location = /v1/ws"} {
		if !strings.Contains(code, want) {
			t.Errorf("the nginx example lacks %q", want)
		}
	}
}

func TestStackKubernetesIngressAndNetworkPolicy(t *testing.T) {
	ing := yamlDocs(t, filepath.Join(deployDir, "kubernetes", "ingress.yaml"))[0]
	if str(ing["kind"]) != "Ingress" {
		t.Fatalf("ingress.yaml is a %q", ing["kind"])
	}
	ann := mapAt(ing, "metadata", "annotations")
	for _, k := range []string{"nginx.ingress.kubernetes.io/proxy-read-timeout", "nginx.ingress.kubernetes.io/proxy-send-timeout"} {
		// Above the gateway's ping interval (30 s) by far: ingress-nginx's default 60 s cuts quiet conversations.
		if v := str(ann[k]); v == "" || len(v) < 3 {
			t.Errorf("ingress.yaml: %s = %q, want an hour-scale timeout in seconds", k, v)
		}
	}
	if len(listAt(mapAt(ing, "spec"), "tls")) == 0 {
		t.Error("ingress.yaml terminates no TLS")
	}
	svc := yamlDocs(t, filepath.Join(deployDir, "kubernetes", "service.yaml"))[0]
	backend := mapAt(map[string]any{"r": listAt(mapAt(map[string]any{"r": listAt(mapAt(ing, "spec"), "rules")[0]}, "r", "http"), "paths")[0]}, "r", "backend", "service")
	if str(backend["name"]) != str(mapAt(svc, "metadata")["name"]) || str(mapAt(backend, "port")["name"]) != "http" {
		t.Errorf("ingress.yaml's backend %v is not the Service's http port", backend)
	}

	pol := yamlDocs(t, filepath.Join(deployDir, "kubernetes", "networkpolicy.yaml"))[0]
	dep := yamlDocs(t, filepath.Join(deployDir, "kubernetes", "deployment.yaml"))[0]
	podLabels := mapAt(dep, "spec", "template", "metadata", "labels")
	for k, v := range mapAt(pol, "spec", "podSelector", "matchLabels") {
		if podLabels[k] != v {
			t.Errorf("the NetworkPolicy selects %s=%v; the gateway pods are labelled %v", k, v, podLabels)
		}
	}
	// Every rule that opens the admin port names who may use it.
	adminOpen, publicOpen := false, false
	for _, r := range listAt(mapAt(pol, "spec"), "ingress") {
		rule := mapAt(map[string]any{"r": r}, "r")
		for _, p := range listAt(rule, "ports") {
			switch str(mapAt(map[string]any{"p": p}, "p")["port"]) {
			case "admin":
				adminOpen = true
				if len(listAt(rule, "from")) == 0 {
					t.Error("the NetworkPolicy opens the admin port to everyone")
				}
			case "http":
				publicOpen = true
			}
		}
		if len(listAt(rule, "ports")) == 0 {
			t.Error("a NetworkPolicy rule without ports opens the admin port too")
		}
	}
	if !adminOpen || !publicOpen {
		t.Errorf("the NetworkPolicy opens admin %v, public %v; want both (admin to Prometheus only)", adminOpen, publicOpen)
	}
	if !strings.Contains(readDeploy(t, "kubernetes", "kustomization.yaml"), "- networkpolicy.yaml") {
		t.Error("kustomization.yaml does not apply the NetworkPolicy")
	}
	// The preStop sleep action needs Kubernetes 1.30; the alternative is in the file and the README.
	if d := readDeploy(t, "kubernetes", "deployment.yaml"); !strings.Contains(d, `["/gateway", "sleep", "5s"]`) {
		t.Error("deployment.yaml does not show the preStop alternative for clusters before 1.30")
	}
}

func TestStackComposeRedisNeedsThePasswordTheGatewaysUse(t *testing.T) {
	compose := yamlDocs(t, filepath.Join(deployDir, "compose.yaml"))[0]
	var cmd []string
	for _, a := range listAt(mapAt(compose, "services", "redis"), "command") {
		cmd = append(cmd, str(a))
	}
	pass := ""
	for i, a := range cmd {
		if a == "--requirepass" && i+1 < len(cmd) {
			pass = cmd[i+1]
		}
	}
	if pass == "" {
		t.Fatalf("compose's Redis runs without --requirepass: %q", cmd)
	}
	shell := map[string]string{"REDIS_PASSWORD": strings.Repeat("cd", 32)}
	want := composeValue(t, pass, shell)
	for name, svc := range mapAt(compose, "services") {
		s := mapAt(map[string]any{"s": svc}, "s")
		if _, built := s["build"]; !built {
			continue
		}
		if url := composeValue(t, str(mapAt(s, "environment")["REDIS_URL"]), shell); !strings.Contains(url, ":"+want+"@") {
			t.Errorf("%s: REDIS_URL does not carry Redis's password", name)
		}
	}
}
