package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// pnode is one value of a policy document, decoded from YAML or JSON into
// the same shape so that a single validator checks both, with the line it
// came from for error messages.
type pnode struct {
	line  int
	kind  pkind
	keys  []string // pMap, in document order
	vals  []*pnode // pMap, parallel to keys
	items []*pnode // pList
	text  string   // pString, and the literal of a number
	num   int64    // pInt
	bool  bool     // pBool
}

type pkind int

const (
	pNull pkind = iota
	pMap
	pList
	pString
	pInt
	pFloat
	pBool
)

func (k pkind) String() string {
	return [...]string{"null", "a mapping", "a list", "a string", "an integer", "a fractional number", "a boolean"}[k]
}

// Bounds on a policy document: a valid one nests 4 levels deep and holds a
// few nodes per tool. The node bound stops YAML aliases from expanding a
// small file into a huge tree.
const (
	maxPolicyDepth = 16
	maxPolicyNodes = 100_000
)

// decodeYAMLPolicy parses a single YAML document. Aliases are followed;
// duplicate keys and non-string keys are errors. An empty document gives nil.
func decodeYAMLPolicy(data []byte) (*pnode, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, err
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("line %d: a policy file holds one YAML document, found another", extra.Line)
	}
	budget := maxPolicyNodes
	return fromYAML(&doc, 0, &budget)
}

func fromYAML(n *yaml.Node, depth int, budget *int) (*pnode, error) {
	if depth > maxPolicyDepth {
		return nil, fmt.Errorf("line %d: nested too deeply", n.Line)
	}
	if *budget--; *budget < 0 {
		return nil, fmt.Errorf("line %d: too many values (more than %d, counting what aliases repeat)", n.Line, maxPolicyNodes)
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return nil, nil
		}
		return fromYAML(n.Content[0], depth, budget)
	case yaml.AliasNode:
		return fromYAML(n.Alias, depth+1, budget)
	case yaml.MappingNode:
		out := &pnode{line: n.Line, kind: pMap}
		seen := map[string]int{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode || k.ShortTag() != "!!str" {
				return nil, fmt.Errorf("line %d: keys must be plain strings", k.Line)
			}
			if prev, dup := seen[k.Value]; dup {
				return nil, fmt.Errorf("line %d: key %q already defined at line %d", k.Line, k.Value, prev)
			}
			seen[k.Value] = k.Line
			v, err := fromYAML(n.Content[i+1], depth+1, budget)
			if err != nil {
				return nil, err
			}
			// A key's line is where an error about its value points.
			v.line = k.Line
			out.keys = append(out.keys, k.Value)
			out.vals = append(out.vals, v)
		}
		return out, nil
	case yaml.SequenceNode:
		out := &pnode{line: n.Line, kind: pList}
		for _, item := range n.Content {
			v, err := fromYAML(item, depth+1, budget)
			if err != nil {
				return nil, err
			}
			out.items = append(out.items, v)
		}
		return out, nil
	case yaml.ScalarNode:
		out := &pnode{line: n.Line, text: n.Value}
		switch n.ShortTag() {
		case "!!null":
			out.kind = pNull
		case "!!bool":
			out.kind = pBool
			if err := n.Decode(&out.bool); err != nil {
				return nil, err
			}
		case "!!int":
			out.kind = pInt
			if err := n.Decode(&out.num); err != nil {
				return nil, fmt.Errorf("line %d: %q is out of range", n.Line, n.Value)
			}
		case "!!float":
			out.kind = pFloat
		default:
			out.kind = pString
		}
		return out, nil
	}
	return nil, fmt.Errorf("line %d: unsupported YAML node", n.Line)
}

// decodeJSONPolicy parses one JSON value, refusing duplicate keys (which
// encoding/json would silently let the last one win) and trailing data.
func decodeJSONPolicy(data []byte) (*pnode, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, nil
	}
	d := &jsonTree{dec: json.NewDecoder(bytes.NewReader(data)), data: data}
	d.dec.UseNumber()
	tok, err := d.dec.Token()
	if err != nil {
		return nil, d.wrap(err)
	}
	root, err := d.value(tok, d.line(), 0)
	if err != nil {
		return nil, err
	}
	if _, err := d.dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("line %d: unexpected data after the JSON value", d.line())
	}
	return root, nil
}

type jsonTree struct {
	dec  *json.Decoder
	data []byte
}

// line is the line of the decoder's position.
func (d *jsonTree) line() int {
	off := min(int(d.dec.InputOffset()), len(d.data))
	return 1 + bytes.Count(d.data[:off], []byte("\n"))
}

func (d *jsonTree) wrap(err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		off := min(int(se.Offset), len(d.data))
		return fmt.Errorf("line %d: %w", 1+bytes.Count(d.data[:off], []byte("\n")), err)
	}
	if errors.Is(err, io.EOF) {
		return errors.New("unexpected end of JSON")
	}
	return err
}

func (d *jsonTree) value(tok json.Token, line, depth int) (*pnode, error) {
	if depth > maxPolicyDepth {
		return nil, fmt.Errorf("line %d: nested too deeply", line)
	}
	switch t := tok.(type) {
	case nil:
		return &pnode{line: line, kind: pNull}, nil
	case bool:
		return &pnode{line: line, kind: pBool, bool: t}, nil
	case string:
		return &pnode{line: line, kind: pString, text: t}, nil
	case json.Number:
		if n, err := strconv.ParseInt(string(t), 10, 64); err == nil {
			return &pnode{line: line, kind: pInt, num: n, text: string(t)}, nil
		}
		return &pnode{line: line, kind: pFloat, text: string(t)}, nil
	case json.Delim:
		if t == '[' {
			out := &pnode{line: line, kind: pList}
			for d.dec.More() {
				tok, err := d.dec.Token()
				if err != nil {
					return nil, d.wrap(err)
				}
				v, err := d.value(tok, d.line(), depth+1)
				if err != nil {
					return nil, err
				}
				out.items = append(out.items, v)
			}
			_, err := d.dec.Token() // ']'
			return out, d.wrapNil(err)
		}
		out := &pnode{line: line, kind: pMap}
		seen := map[string]int{}
		for d.dec.More() {
			tok, err := d.dec.Token()
			if err != nil {
				return nil, d.wrap(err)
			}
			key := tok.(string) // the decoder only yields string keys in an object
			kline := d.line()
			if prev, dup := seen[key]; dup {
				return nil, fmt.Errorf("line %d: key %q already defined at line %d", kline, key, prev)
			}
			seen[key] = kline
			tok, err = d.dec.Token()
			if err != nil {
				return nil, d.wrap(err)
			}
			v, err := d.value(tok, kline, depth+1)
			if err != nil {
				return nil, err
			}
			out.keys = append(out.keys, key)
			out.vals = append(out.vals, v)
		}
		_, err := d.dec.Token() // '}'
		return out, d.wrapNil(err)
	}
	return nil, fmt.Errorf("line %d: unexpected JSON token", line)
}

func (d *jsonTree) wrapNil(err error) error {
	if err == nil {
		return nil
	}
	return d.wrap(err)
}
