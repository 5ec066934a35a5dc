package protocol

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// docs/asyncapi.yaml is checked against the codec in both directions: a
// message type or a field that the Go types have and the document lacks
// fails, and so does the reverse. Where the document describes protocol
// additions that docs/protocol.md announces and the code does not send yet,
// the lists below say so; each entry fails once the code has it, so that
// they only shrink.

// documentedNotCoded are message types the document has and the codec does
// not know yet (issue 9: auth refresh and history paging; tool.args for
// streamed tool arguments).
var documentedNotCoded = map[string]string{}

// fieldsNotCoded are fields the document has on a message whose Go type
// lacks them yet.
var fieldsNotCoded = map[string]string{}

// optionalInDocument are fields the document marks optional that the Go
// type always sends: tool.call's args will be absent while they stream
// (tool.args).
var optionalInDocument = map[string]string{
	"tool.call.args": "absent while the model's arguments stream (tool.args follows)",
}

// sharedTypeFieldsNotSent: several message types share one Go type; these
// are its fields that a given type never carries.
var sharedTypeFieldsNotSent = map[string][]string{}

// serverGoTypes maps each server message type to the Go type the gateway
// sends it as.
var serverGoTypes = map[string]Event{
	TypeSessionReady: SessionReady{}, TypeTurnStart: TurnStart{}, TypeTextDelta: TextDelta{}, TypeTextDone: TextDone{},
	TypeTranscriptIn: TranscriptInput{}, TypeTranscriptOut: TranscriptOutput{}, TypeToolCall: ToolCall{},
	TypeToolResult: ToolResult{}, TypeTurnDone: TurnDone{}, TypeError: Error{}, TypePong: Pong{},
	TypeConfirmReq: ConfirmRequest{}, TypeConfirmDone: ConfirmDone{}, TypeMode: ModeChange{}, TypeBlocked: Blocked{},
	TypeAudioInterrupted: Interrupted{}, TypeToolArgs: ToolArgs{}, TypeAuthOK: AuthOK{}, TypeHistoryPage: History{},
	TypeHandoff: Handoff{}, TypeHandoffPending: HandoffPending{}, TypeHandoffEnded: HandoffEnded{},
}

// apiDoc is the parsed document with $ref resolution.
type apiDoc struct{ root map[string]any }

func loadAPIDoc(t *testing.T) apiDoc {
	t.Helper()
	raw, err := os.ReadFile("../docs/asyncapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var root map[string]any
	if err := yaml.Unmarshal(raw, &root); err != nil {
		t.Fatalf("docs/asyncapi.yaml: %v", err)
	}
	return apiDoc{root}
}

// resolve follows $ref pointers (#/a/b/c) until v is not a reference.
func (d apiDoc) resolve(t *testing.T, v any) map[string]any {
	t.Helper()
	for range 10 {
		m, _ := v.(map[string]any)
		ref, ok := m["$ref"].(string)
		if !ok {
			return m
		}
		if !strings.HasPrefix(ref, "#/") {
			t.Fatalf("external $ref %q", ref)
		}
		var cur any = d.root
		for _, part := range strings.Split(ref[2:], "/") {
			cm, _ := cur.(map[string]any)
			if cm == nil || cm[part] == nil {
				t.Fatalf("$ref %q does not resolve", ref)
			}
			cur = cm[part]
		}
		v = cur
	}
	t.Fatal("$ref chain too long")
	return nil
}

// docMessage is one message of the document.
type docMessage struct {
	payload  map[string]any
	examples []any // the examples' payloads
}

// messages returns the JSON messages by direction ("client", "server") and
// type (the payload's type const), and the binary ones by direction.
func (d apiDoc) messages(t *testing.T) (byType map[string]map[string]docMessage, binary map[string]int) {
	t.Helper()
	byType = map[string]map[string]docMessage{"client": {}, "server": {}}
	binary = map[string]int{}
	ops, _ := d.root["operations"].(map[string]any)
	for dir, opName := range map[string]string{"client": "receiveClientMessages", "server": "sendServerEvents"} {
		op := d.resolve(t, ops[opName])
		want := map[string]string{"client": "receive", "server": "send"}[dir]
		if op["action"] != want {
			t.Errorf("operation %s: action %v, want %s", opName, op["action"], want)
		}
		list, _ := op["messages"].([]any)
		if len(list) == 0 {
			t.Fatalf("operation %s lists no messages", opName)
		}
		for _, ref := range list {
			m := d.resolve(t, ref)
			payload := d.resolve(t, m["payload"])
			ct, _ := m["contentType"].(string)
			if ct == "application/octet-stream" {
				if payload["type"] != "string" || payload["format"] != "binary" {
					t.Errorf("binary message %v: payload %v", m["name"], payload)
				}
				binary[dir]++
				continue
			}
			props, _ := payload["properties"].(map[string]any)
			typ := d.resolve(t, props["type"])
			name, _ := typ["const"].(string)
			if name == "" {
				t.Errorf("message %v: payload has no type const", m["name"])
				continue
			}
			if _, dup := byType[dir][name]; dup {
				t.Errorf("%s message %s documented twice", dir, name)
			}
			var examples []any
			exs, _ := m["examples"].([]any)
			for _, ex := range exs {
				examples = append(examples, ex.(map[string]any)["payload"])
			}
			byType[dir][name] = docMessage{payload: payload, examples: examples}
		}
	}
	return byType, binary
}

// consts maps the string constants of the package's non-test files, by
// name, and lists the names of each const block by its first name.
func consts(t *testing.T) (values map[string]string, blocks map[string][]string) {
	t.Helper()
	values, blocks = map[string]string{}, map[string][]string{}
	fset := token.NewFileSet()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, e.Name(), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			var names []string
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, n := range vs.Names {
					names = append(names, n.Name)
					if i < len(vs.Values) {
						if lit, ok := vs.Values[i].(*ast.BasicLit); ok {
							v := lit.Value
							if lit.Kind == token.STRING {
								v, _ = strconv.Unquote(v)
							}
							values[n.Name] = v
						}
					}
				}
			}
			if len(names) > 0 {
				blocks[names[0]] = names
			}
		}
	}
	return values, blocks
}

// decodeCases are the message types Decode's switch accepts.
func decodeCases(t *testing.T, values map[string]string) []string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "client.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		fn, ok := n.(*ast.FuncDecl)
		if !ok || fn.Name.Name != "Decode" {
			return true
		}
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			if cc, ok := n.(*ast.CaseClause); ok {
				for _, e := range cc.List {
					if id, ok := e.(*ast.Ident); ok && strings.HasPrefix(id.Name, "Type") {
						out = append(out, values[id.Name])
					}
				}
			}
			return true
		})
		return false
	})
	return out
}

func sortedKeys[M ~map[string]V, V any](m M) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func TestAsyncAPIDocumentsEveryMessageTypeTheCodecHas(t *testing.T) {
	d := loadAPIDoc(t)
	if v, _ := d.root["asyncapi"].(string); !strings.HasPrefix(v, "3.0") {
		t.Fatalf("asyncapi: %q, want 3.0.x", v)
	}
	ch := d.resolve(t, d.root["channels"].(map[string]any)["session"])
	if ch["address"] != "/v1/ws" {
		t.Errorf("channel address %v, want /v1/ws", ch["address"])
	}
	doc, binary := d.messages(t)
	if binary["client"] != 1 || binary["server"] != 1 {
		t.Errorf("binary audio messages: %v, want one each way", binary)
	}
	values, blocks := consts(t)
	code := map[string][]string{
		"client": decodeCases(t, values),
	}
	for _, name := range blocks["TypeSessionReady"] {
		code["server"] = append(code["server"], values[name])
	}
	if len(code["client"]) < 8 || len(code["server"]) < 16 {
		t.Fatalf("codec types not found: %v", code)
	}
	for _, dir := range []string{"client", "server"} {
		for _, typ := range code[dir] {
			if _, ok := doc[dir][typ]; !ok {
				t.Errorf("%s message %s is in the codec but not in docs/asyncapi.yaml", dir, typ)
			}
			if _, pending := documentedNotCoded[dir+" "+typ]; pending {
				t.Errorf("%s message %s is coded now: remove it from documentedNotCoded", dir, typ)
			}
		}
		for _, typ := range sortedKeys(doc[dir]) {
			if !slices.Contains(code[dir], typ) {
				if _, pending := documentedNotCoded[dir+" "+typ]; !pending {
					t.Errorf("%s message %s is in docs/asyncapi.yaml but the codec does not know it", dir, typ)
				}
			}
		}
	}
	for typ := range serverGoTypes {
		if !slices.Contains(code["server"], typ) {
			t.Errorf("serverGoTypes names %s, which is not a server message type", typ)
		}
	}
	for _, typ := range code["server"] {
		if _, ok := serverGoTypes[typ]; !ok {
			t.Errorf("server message %s has no Go type in serverGoTypes: add it", typ)
		}
	}
}

// jsonFields lists a struct type's JSON fields: name → (field, omitempty).
// An Event's type tag, which Encode writes, is its first: a string always
// sent.
func jsonFields(rt reflect.Type) map[string]reflect.StructField {
	out := map[string]reflect.StructField{}
	if rt.Implements(reflect.TypeFor[Event]()) {
		out["type"] = reflect.StructField{Name: "Type", Type: reflect.TypeFor[string](), Tag: `json:"type"`}
	}
	for i := range rt.NumField() {
		f := rt.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f
	}
	return out
}

// jsonType is the JSON Schema type a Go type encodes as.
func jsonType(rt reflect.Type) string {
	for rt.Kind() == reflect.Pointer {
		rt = rt.Elem()
	}
	switch rt.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Slice, reflect.Array:
		return "array"
	case reflect.Map, reflect.Struct:
		return "object"
	}
	return rt.Kind().String()
}

// compareSchema checks a JSON Schema object against a Go struct type, both
// ways, recursing into nested structs and slices of structs.
func compareSchema(t *testing.T, d apiDoc, path string, schema map[string]any, rt reflect.Type, notSent []string) {
	t.Helper()
	props, _ := schema["properties"].(map[string]any)
	required := map[string]bool{}
	if req, ok := schema["required"].([]any); ok {
		for _, r := range req {
			required[r.(string)] = true
		}
	}
	fields := jsonFields(rt)
	for _, name := range sortedKeys(fields) {
		f := fields[name]
		if slices.Contains(notSent, name) {
			if _, documented := props[name]; documented {
				t.Errorf("%s.%s is documented, but this message never carries it", path, name)
			}
			continue
		}
		p, documented := props[name]
		if !documented {
			t.Errorf("%s.%s is in the Go type but not in docs/asyncapi.yaml", path, name)
			continue
		}
		ps := d.resolve(t, p)
		if got, want := ps["type"], jsonType(f.Type); got != want {
			t.Errorf("%s.%s: documented as %v, the codec sends %s", path, name, got, want)
		}
		omitempty := strings.Contains(f.Tag.Get("json"), ",omitempty")
		_, optional := optionalInDocument[path+"."+name]
		if !omitempty && !required[name] && !optional {
			t.Errorf("%s.%s is always sent: mark it required", path, name)
		}
		if omitempty && required[name] {
			t.Errorf("%s.%s is omitted when empty: it must not be required", path, name)
		}
		elem := f.Type
		for elem.Kind() == reflect.Pointer {
			elem = elem.Elem()
		}
		switch {
		case elem.Kind() == reflect.Struct:
			compareSchema(t, d, path+"."+name, ps, elem, nil)
		case elem.Kind() == reflect.Slice && elem.Elem().Kind() == reflect.Struct:
			compareSchema(t, d, path+"."+name+"[]", d.resolve(t, ps["items"]), elem.Elem(), nil)
		}
	}
	for _, name := range sortedKeys(props) {
		if _, ok := fields[name]; ok {
			continue
		}
		if _, pending := fieldsNotCoded[path+"."+name]; !pending {
			t.Errorf("%s.%s is in docs/asyncapi.yaml but not in the Go type", path, name)
		}
	}
	for key := range fieldsNotCoded {
		if strings.HasPrefix(key, path+".") {
			if _, coded := fields[strings.TrimPrefix(key, path+".")]; coded {
				t.Errorf("%s is coded now: remove it from fieldsNotCoded", key)
			}
		}
	}
}

// strs is a closed set's values as strings.
func strs[S ~string](set []S) []string {
	out := make([]string, len(set))
	for i, v := range set {
		out[i] = string(v)
	}
	return out
}

func TestAsyncAPIServerMessagesMatchTheirGoTypes(t *testing.T) {
	d := loadAPIDoc(t)
	doc, _ := d.messages(t)
	for _, typ := range sortedKeys(serverGoTypes) {
		if got := serverGoTypes[typ].EventType(); got != typ {
			t.Errorf("serverGoTypes[%s] is sent as %s", typ, got)
		}
		m, ok := doc["server"][typ]
		if !ok {
			continue // reported by TestAsyncAPIDocumentsEveryMessageTypeTheCodecHas
		}
		compareSchema(t, d, typ, m.payload, reflect.TypeOf(serverGoTypes[typ]), sharedTypeFieldsNotSent[typ])
	}
}

func TestAsyncAPIClientMessagesMatchTheDecoder(t *testing.T) {
	d := loadAPIDoc(t)
	doc, _ := d.messages(t)
	wire := jsonFields(reflect.TypeOf(wireClient{}))
	used := map[string]bool{}
	for _, typ := range sortedKeys(doc["client"]) {
		m := doc["client"][typ]
		props, _ := m.payload["properties"].(map[string]any)
		_, pending := documentedNotCoded["client "+typ]
		for _, name := range sortedKeys(props) {
			used[name] = true
			if _, ok := wire[name]; !ok && !pending {
				t.Errorf("client %s.%s is documented but the decoder does not read it", typ, name)
			}
		}
		if pending {
			continue
		}
		// The documented required fields, with their example values, make a
		// message the decoder accepts.
		msg := map[string]any{}
		req, _ := m.payload["required"].([]any)
		for _, r := range req {
			ps := d.resolve(t, props[r.(string)])
			switch {
			case ps["const"] != nil:
				msg[r.(string)] = ps["const"]
			case ps["examples"] != nil:
				msg[r.(string)] = ps["examples"].([]any)[0]
			default:
				t.Errorf("client %s.%s is required but has no const or example", typ, r)
			}
		}
		b, err := json.Marshal(msg)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := Decode(b, Limits{}); err != nil || got.Type != typ {
			t.Errorf("client %s built from the document (%s): %v, %v", typ, b, got.Type, err)
		}
		// Each documented example decodes too.
		for _, ex := range m.examples {
			b, err := json.Marshal(ex)
			if err != nil {
				t.Fatal(err)
			}
			if got, err := Decode(b, Limits{}); err != nil || got.Type != typ {
				t.Errorf("client %s example %s: %v, %v", typ, b, got.Type, err)
			}
		}
	}
	for _, name := range sortedKeys(wire) {
		if !used[name] {
			t.Errorf("the decoder reads %q, which no documented client message has", name)
		}
	}
	// The nested resume object.
	resume := d.resolve(t, d.resolve(t, doc["client"][TypeSessionStart].payload["properties"].(map[string]any)["resume"]))
	compareSchema(t, d, "session.start.resume", resume, reflect.TypeOf(Resume{}), nil)
}

// enumOf returns a schema's enum values as strings.
func enumOf(t *testing.T, d apiDoc, v any) []string {
	t.Helper()
	var out []string
	for _, e := range d.resolve(t, v)["enum"].([]any) {
		out = append(out, e.(string))
	}
	return out
}

func TestAsyncAPIEnumsAndCloseCodesMatchTheCodec(t *testing.T) {
	d := loadAPIDoc(t)
	doc, _ := d.messages(t)
	prop := func(typ, name string) any {
		return doc["server"][typ].payload["properties"].(map[string]any)[name]
	}
	same := func(what string, documented, coded []string) {
		t.Helper()
		a, b := slices.Clone(documented), slices.Clone(coded)
		slices.Sort(a)
		slices.Sort(b)
		if !slices.Equal(a, b) {
			t.Errorf("%s: documented %v, codec %v", what, a, b)
		}
	}
	same("turn.done reason", enumOf(t, d, prop(TypeTurnDone, "reason")), strs(TurnEndReasons))
	same("mode", enumOf(t, d, prop(TypeMode, "mode")), strs(Modes))

	values, blocks := consts(t)
	var codes []string
	for _, name := range blocks["CodeBadJSON"] {
		codes = append(codes, values[name])
	}
	var documented []string
	for _, c := range enumOf(t, d, prop(TypeError, "code")) {
		if _, pending := documentedNotCoded["code "+c]; pending {
			if slices.Contains(codes, c) {
				t.Errorf("error code %s is coded now: remove it from documentedNotCoded", c)
			}
			continue
		}
		documented = append(documented, c)
	}
	same("error code", documented, codes)

	ch := d.resolve(t, d.root["channels"].(map[string]any)["session"])
	var closeCodes, allCodes []string
	for _, c := range ch["x-close-codes"].([]any) {
		cc := c.(map[string]any)
		n := cc["code"].(int)
		kind := cc["kind"].(string)
		if (n >= 4100 && n < 4200) != (kind == "reconnect") {
			t.Errorf("close %d is %s: 4100-4199 are the reconnect codes", n, kind)
		}
		allCodes = append(allCodes, strconv.Itoa(n))
		if _, pending := documentedNotCoded["close "+strconv.Itoa(n)]; !pending && n >= 4000 {
			closeCodes = append(closeCodes, strconv.Itoa(n))
		}
	}
	var coded []string
	for _, name := range blocks["CloseInvalidData"] {
		if v, err := strconv.Atoi(values[name]); err == nil && v >= 4000 && v < 5000 {
			coded = append(coded, values[name])
		}
	}
	same("close codes 4000-4999", closeCodes, coded)
	for _, dc := range Disconnects {
		if dc.Code != 0 && !slices.Contains(allCodes, strconv.Itoa(dc.Code)) {
			t.Errorf("disconnect %s closes %d, which the document does not list", dc.Label, dc.Code)
		}
	}
}
