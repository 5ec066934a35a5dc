package tools

import (
	"bufio"
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/turnstile-gw/turnstile/protocol"
)

// Files of a tool folder.
const (
	SchemaFile = "schema.json"
	GuideFile  = "guide.md"
)

// Category says what kind of work a tool does. The orchestrator's per-turn
// gates count retrieval calls separately from the total.
type Category string

const (
	CategoryRetrieval Category = "retrieval"
	CategoryAction    Category = "action"
	CategoryUtility   Category = "utility"
)

// Session modes a tool can be declared in (the protocol's modes).
const (
	ModeText  = protocol.ModeText
	ModeVoice = protocol.ModeVoice
)

// Redact holds the allow-lists of argument and result keys that may be shown
// to the browser and written to logs. Every other key is redacted; an empty
// list shows nothing.
type Redact struct {
	Args   []string `json:"args"`
	Result []string `json:"result"`
}

// Manifest is a tool's schema.json plus what is derived from its guide.md.
type Manifest struct {
	Name                 string          `json:"name"`
	Category             Category        `json:"category"`
	Modes                []protocol.Mode `json:"modes"`
	RequiresConfirmation bool            `json:"requiresConfirmation,omitempty"`
	Terminal             bool            `json:"terminal,omitempty"`
	// EndsSession marks a tool that ends the conversation or its current
	// mode (end_voice_session, a hand-over to a person). Like terminal
	// tools, such tools are exempt from the per-turn budget, so that a
	// model out of budget can still end what it must.
	EndsSession bool `json:"endsSession,omitempty"`
	// Sensitive marks a tool that untrusted text must not be able to set
	// off: called after another tool's untrusted output entered the turn,
	// it runs only once the user approves it (or, for a tool that
	// BlocksUser, not at all: UNTRUSTED_CONTEXT). Nil takes the default,
	// Tool.IsSensitive.
	Sensitive *bool `json:"sensitive,omitempty"`
	// BlocksUser marks a tool that acts against the user it would have to
	// ask for approval (ignore_user). It is sensitive by default, and
	// after untrusted output in the turn it is refused outright.
	BlocksUser bool `json:"blocksUser,omitempty"`
	// TrustedOutput marks a tool whose output the gateway itself produces
	// (mode switches, finish, ignore_user): its results do not make the
	// turn untrusted and reach the model unmarked. Every other tool's
	// results (HTTP, MCP, the knowledge base) are untrusted data.
	TrustedOutput bool `json:"trustedOutput,omitempty"`
	// SoftLatencyMs and TimeoutMs are zero when the manifest leaves them
	// out; Tool.SoftLatencyIn and Tool.Timeout apply the defaults.
	SoftLatencyMs LatencyMs `json:"softLatencyMs,omitzero"`
	TimeoutMs     int       `json:"timeoutMs,omitempty"`
	Redact        Redact    `json:"redact"`
	// Parameters is the canonical JSON Schema (draft 2020-12) of the
	// arguments, exactly as written in schema.json.
	Parameters json.RawMessage `json:"parameters"`
	// Description is the guide's summary: its first non-empty line that is
	// not a heading.
	Description string `json:"description,omitempty"`
	// Guide is the whole guide.md, for the system instruction.
	Guide string `json:"guide,omitempty"`
	// HTTP makes the tool a manifest-only HTTP tool (package
	// tools/httptool): a call sends its arguments to this endpoint. Nil
	// for tools with a Go handler.
	HTTP *HTTPSpec `json:"http,omitempty"`
}

// HTTPSpec is the "http" block of a manifest-only HTTP tool.
type HTTPSpec struct {
	// URL is the absolute http or https endpoint.
	URL string `json:"url"`
	// Method is GET, POST, PUT, PATCH or DELETE; "" means POST.
	Method string `json:"method,omitempty"`
	// Headers are sent with every call. Values may reference environment
	// variables as ${NAME}; they are kept here unexpanded and expanded
	// when the handler is built, so that secrets never sit in a manifest.
	Headers map[string]string `json:"headers,omitempty"`
	// Identity false sends none of the identity headers (Turnstile-User,
	// -Session, -Call, -Claim-*, Idempotency-Key, Turnstile-Signature):
	// for third-party APIs that must not learn who the user is. Nil is
	// true.
	Identity *bool `json:"identity,omitempty"`
	// Result, when set, names the fields of a 2xx answer the model gets,
	// as JSON pointers (RFC 6901): the result is an object of just those,
	// keyed by the pointers (package tools/httptool).
	Result []string `json:"result,omitempty"`
}

// SendsIdentity reports whether the tool's requests carry the identity
// headers.
func (s *HTTPSpec) SendsIdentity() bool { return s.Identity == nil || *s.Identity }

//go:embed manifest.schema.json
var manifestSchemaJSON []byte

// manifestChecker validates schema.json files against manifest.schema.json.
type manifestChecker struct {
	schema *jsonschema.Schema
}

func newManifestChecker() (*manifestChecker, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(manifestSchemaJSON))
	if err != nil {
		return nil, fmt.Errorf("manifest schema: decode: %w", err)
	}
	sch, err := compileSchema("urn:turnstile:tool-manifest", doc)
	if err != nil {
		return nil, fmt.Errorf("manifest schema: compile: %w", err)
	}
	return &manifestChecker{schema: sch}, nil
}

// compileSchema compiles doc as a draft 2020-12 schema. The compiler
// meta-validates it; external references are refused so that loading a
// manifest never reads files or the network.
func compileSchema(url string, doc any) (*jsonschema.Schema, error) {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(jsonschema.SchemeURLLoader{})
	if err := c.AddResource(url, doc); err != nil {
		return nil, err
	}
	return c.Compile(url)
}

// parsedManifest is a manifest with its compiled argument schema.
type parsedManifest struct {
	Manifest
	args       *jsonschema.Schema
	properties []string // top-level argument names, sorted
}

// parse checks one schema.json for the tool folder name. It returns every
// problem it finds, each a plain message for the caller to attribute.
func (mc *manifestChecker) parse(folder string, raw []byte) (*parsedManifest, []error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, []error{fmt.Errorf("invalid JSON: %w", err)}
	}
	if err := mc.schema.Validate(doc); err != nil {
		var ve *jsonschema.ValidationError
		if !errors.As(err, &ve) {
			return nil, []error{fmt.Errorf("validate manifest: %w", err)}
		}
		var errs []error
		for _, leaf := range leafCauses(ve) {
			errs = append(errs, fmt.Errorf("manifest schema violation %s", leaf.Error()))
		}
		return nil, errs
	}

	var m Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, []error{fmt.Errorf("decode manifest: %w", err)}
	}
	var errs []error
	if m.Name != folder {
		errs = append(errs, fmt.Errorf("name %q does not match its folder %q", m.Name, folder))
	}
	params := doc.(map[string]any)["parameters"]
	args, err := compileSchema("tool://"+folder+"/parameters.json", params)
	if err != nil {
		errs = append(errs, fmt.Errorf("parameters are not a valid JSON Schema (draft 2020-12): %w", metaError(err)))
	}
	var props []string
	if p, ok := params.(map[string]any)["properties"].(map[string]any); ok {
		for k := range p {
			props = append(props, k)
		}
		sort.Strings(props)
	}
	for _, k := range m.Redact.Args {
		if !slices.Contains(props, k) {
			errs = append(errs, fmt.Errorf("redact.args lists %q, which is not a parameter", k))
		}
	}
	if m.HTTP != nil {
		if err := checkHTTPURL(m.HTTP.URL); err != nil {
			errs = append(errs, fmt.Errorf("http.url: %w", err))
		}
		errs = append(errs, checkURLTemplate(m.HTTP.URL, props)...)
		names := make([]string, 0, len(m.HTTP.Headers))
		for k := range m.HTTP.Headers {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			switch {
			case !headerName.MatchString(k):
				errs = append(errs, fmt.Errorf("http.headers: %q is not a valid header name", Clip(k, 64)))
			case slices.Contains(gatewayHeaders, strings.ToLower(k)):
				errs = append(errs, fmt.Errorf("http.headers: %s is set by the gateway, not by a manifest", k))
			case ReservedHeader(k):
				errs = append(errs, fmt.Errorf("http.headers: %s is the gateway's word on who is calling (docs/tools.md), not a manifest's", k))
			}
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return &parsedManifest{Manifest: m, args: args, properties: props}, nil
}

// headerName is an HTTP header field name (RFC 9110 token).
var headerName = regexp.MustCompile("^[A-Za-z0-9!#$%&'*+.^_`|~-]+$")

// gatewayHeaders are the headers an HTTP tool's manifest may not set.
var gatewayHeaders = []string{"host", "content-length", "content-type", "transfer-encoding", "connection"}

// checkHTTPURL accepts an absolute http or https URL with a host and no
// credentials (they belong in headers, where they can come from the
// environment).
func checkHTTPURL(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return errors.New("not a valid URL")
	case u.Scheme != "http" && u.Scheme != "https":
		return errors.New("must be an absolute http or https URL")
	case u.Host == "":
		return errors.New("has no host")
	case u.User != nil:
		return errors.New("must not hold credentials; send them in a header, e.g. \"Authorization\": \"Bearer ${API_KEY}\"")
	}
	return nil
}

// metaError shortens a meta-validation failure to its leaf messages; other
// compile errors (bad regexp, refused $ref, …) pass through.
func metaError(err error) error {
	var sve *jsonschema.SchemaValidationError
	if !errors.As(err, &sve) {
		return err
	}
	var ve *jsonschema.ValidationError
	if !errors.As(sve.Err, &ve) {
		return err
	}
	var msgs []string
	for _, leaf := range leafCauses(ve) {
		msgs = append(msgs, leaf.Error())
	}
	return errors.New(strings.Join(msgs, "; "))
}

// leafCauses flattens a validation error tree to the errors that say what is
// actually wrong.
func leafCauses(ve *jsonschema.ValidationError) []*jsonschema.ValidationError {
	if len(ve.Causes) == 0 {
		return []*jsonschema.ValidationError{ve}
	}
	var out []*jsonschema.ValidationError
	for _, c := range ve.Causes {
		out = append(out, leafCauses(c)...)
	}
	return out
}

// GuideSummary returns the summary of a guide as the registry takes it from
// guide.md: its first non-empty line that is not a Markdown heading, or ""
// when there is none.
func GuideSummary(guide string) string {
	return guideSummary([]byte(guide))
}

// guideSummary returns the first non-empty line of a Markdown guide that is
// not a heading (ATX "# x" or setext "x" underlined with = or -).
func guideSummary(guide []byte) string {
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(guide))
	sc.Buffer(make([]byte, 0, 4096), len(guide)+1)
	for sc.Scan() {
		lines = append(lines, strings.TrimSpace(sc.Text()))
	}
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if i+1 < len(lines) && isSetextUnderline(lines[i+1]) {
			i++
			continue
		}
		if isSetextUnderline(line) {
			continue
		}
		return line
	}
	return ""
}

func isSetextUnderline(line string) bool {
	return line != "" && (strings.Trim(line, "=") == "" || strings.Trim(line, "-") == "")
}
