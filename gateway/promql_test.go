package gateway_test

// A small PromQL reader for the dashboard and alert checks
// (dashboards_test.go): it parses the expressions of deploy/grafana and
// deploy/prometheus into a tree of selectors, calls, aggregations and binary
// operations, enough to name every metric and label an expression uses and
// where. Prometheus's own parser (promql/parser) would pull the whole
// prometheus module into go.mod, upgrading grpc, x/net and the Google auth
// libraries the genai SDK uses; this reader covers the grammar the files
// use and refuses what it does not know, so the check cannot pass by
// skipping something.

import (
	"fmt"
	"strings"
	"unicode"
)

// pqNode is a parsed PromQL expression.
type pqNode interface{ pq() }

type (
	pqSelector struct {
		name     string
		matchers []pqMatcher
	}
	pqMatcher struct{ label, op, value string }
	pqCall    struct {
		fn   string
		args []pqNode
	}
	pqAgg struct {
		op       string
		without  bool
		grouping []string
		param    pqNode // topk's k, quantile's φ…; nil when none
		expr     pqNode
	}
	pqBinary struct {
		op       string
		lhs, rhs pqNode
		on       bool     // on(…) rather than ignoring(…)
		matching []string // the on / ignoring labels; nil: none given
		group    string   // "group_left", "group_right" or ""
		include  []string // the labels group_left/right copies
	}
	pqNumber struct{}
	pqString struct{}
	pqRange  struct{ expr pqNode } // expr[range], expr[range:step], expr offset …
	pqUnary  struct{ expr pqNode }
)

func (pqSelector) pq() {}
func (pqCall) pq()     {}
func (pqAgg) pq()      {}
func (pqBinary) pq()   {}
func (pqNumber) pq()   {}
func (pqString) pq()   {}
func (pqRange) pq()    {}
func (pqUnary) pq()    {}

var pqAggregations = map[string]bool{"sum": true, "avg": true, "min": true, "max": true, "count": true,
	"stddev": true, "stdvar": true, "group": true, "topk": true, "bottomk": true, "quantile": true,
	"count_values": true, "limitk": true, "limit_ratio": true}

// pqFunctions are the functions the reader accepts; label_replace and
// label_join invent labels, which the check would have to follow: they are
// refused until it does.
var pqFunctions = map[string]bool{"rate": true, "irate": true, "increase": true, "delta": true, "idelta": true,
	"deriv": true, "histogram_quantile": true, "abs": true, "ceil": true, "floor": true, "round": true,
	"clamp": true, "clamp_min": true, "clamp_max": true, "avg_over_time": true, "max_over_time": true,
	"min_over_time": true, "sum_over_time": true, "count_over_time": true, "last_over_time": true,
	"quantile_over_time": true, "absent": true, "absent_over_time": true, "changes": true, "resets": true,
	"time": true, "timestamp": true, "vector": true, "scalar": true, "sort": true, "sort_desc": true,
	"predict_linear": true, "exp": true, "ln": true, "log2": true, "log10": true, "sqrt": true}

// binary operators by precedence, lowest first; ^ is right-associative.
var pqPrecedence = map[string]int{"or": 1, "and": 2, "unless": 2, "==": 3, "!=": 3, "<": 3, "<=": 3, ">": 3,
	">=": 3, "+": 4, "-": 4, "*": 5, "/": 5, "%": 5, "atan2": 5, "^": 6}

type pqToken struct {
	kind string // "ident", "number", "string", "op", "(", ")", "{", "}", "[", "]", ",", "eof"
	text string
}

type pqParser struct {
	src  string
	toks []pqToken
	pos  int
}

// parsePromQL parses one expression.
func parsePromQL(src string) (pqNode, error) {
	p := &pqParser{src: src}
	if err := p.lex(); err != nil {
		return nil, err
	}
	n, err := p.expr(0)
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind != "eof" {
		return nil, fmt.Errorf("unexpected %q after the expression", t.text)
	}
	return n, nil
}

func (p *pqParser) lex() error {
	s := p.src
	for i := 0; i < len(s); {
		c := rune(s[i])
		switch {
		case unicode.IsSpace(c):
			i++
		case c == '#': // a comment runs to the end of the line
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case c == '[':
			// A range or subquery: durations, Grafana's $__rate_interval,
			// and an optional :step. Kept as text.
			j := strings.IndexByte(s[i:], ']')
			if j < 0 {
				return fmt.Errorf("unclosed [ at %d", i)
			}
			inner := strings.TrimSpace(s[i+1 : i+j])
			if inner == "" || strings.ContainsAny(inner, "[({\"'") {
				return fmt.Errorf("bad range [%s]", inner)
			}
			p.toks = append(p.toks, pqToken{"[", inner})
			i += j + 1
		case c == '"' || c == '\'' || c == '`':
			j := i + 1
			for j < len(s) && rune(s[j]) != c {
				if s[j] == '\\' && c != '`' {
					j++
				}
				j++
			}
			if j >= len(s) {
				return fmt.Errorf("unclosed string at %d", i)
			}
			p.toks = append(p.toks, pqToken{"string", unescapePromQL(s[i+1 : j])})
			i = j + 1
		case unicode.IsDigit(c) || (c == '.' && i+1 < len(s) && unicode.IsDigit(rune(s[i+1]))):
			j := i
			for j < len(s) && (unicode.IsDigit(rune(s[j])) || strings.ContainsRune(".eE+-xabcdefABCDEF", rune(s[j]))) {
				if (s[j] == '+' || s[j] == '-') && s[j-1] != 'e' && s[j-1] != 'E' {
					break
				}
				j++
			}
			p.toks = append(p.toks, pqToken{"number", s[i:j]})
			i = j
		case unicode.IsLetter(c) || c == '_' || c == ':':
			j := i
			for j < len(s) && (unicode.IsLetter(rune(s[j])) || unicode.IsDigit(rune(s[j])) || s[j] == '_' || s[j] == ':') {
				j++
			}
			p.toks = append(p.toks, pqToken{"ident", s[i:j]})
			i = j
		case strings.ContainsRune("(){},", c):
			p.toks = append(p.toks, pqToken{string(c), string(c)})
			i++
		default:
			ops := []string{"==", "!=", "<=", ">=", "=~", "!~", "+", "-", "*", "/", "%", "^", "<", ">", "=", "@"}
			matched := false
			for _, op := range ops {
				if strings.HasPrefix(s[i:], op) {
					p.toks = append(p.toks, pqToken{"op", op})
					i += len(op)
					matched = true
					break
				}
			}
			if !matched {
				return fmt.Errorf("unexpected %q at %d", c, i)
			}
		}
	}
	p.toks = append(p.toks, pqToken{"eof", "end of expression"})
	return nil
}

func unescapePromQL(s string) string {
	return strings.NewReplacer(`\"`, `"`, `\'`, `'`, `\\`, `\`).Replace(s)
}

func (p *pqParser) peek() pqToken { return p.toks[p.pos] }
func (p *pqParser) next() pqToken { t := p.toks[p.pos]; p.pos++; return t }

func (p *pqParser) expect(kind string) (pqToken, error) {
	t := p.next()
	if t.kind != kind {
		return t, fmt.Errorf("want %s, got %q", kind, t.text)
	}
	return t, nil
}

// binaryOp returns the binary operator at the current token, if any.
func (p *pqParser) binaryOp() (string, bool) {
	t := p.peek()
	if t.kind == "op" || t.kind == "ident" {
		if _, ok := pqPrecedence[t.text]; ok {
			return t.text, true
		}
	}
	return "", false
}

// expr parses by precedence climbing: operators binding tighter than min.
func (p *pqParser) expr(min int) (pqNode, error) {
	lhs, err := p.unary()
	if err != nil {
		return nil, err
	}
	for {
		op, ok := p.binaryOp()
		if !ok || pqPrecedence[op] <= min {
			return lhs, nil
		}
		p.next()
		b := pqBinary{op: op, lhs: lhs}
		if p.peek().text == "bool" {
			p.next()
		}
		if t := p.peek().text; t == "on" || t == "ignoring" {
			p.next()
			b.on = t == "on"
			if b.matching, err = p.labelList(); err != nil {
				return nil, err
			}
			if b.matching == nil {
				b.matching = []string{}
			}
		}
		if t := p.peek().text; t == "group_left" || t == "group_right" {
			p.next()
			b.group = t
			if p.peek().kind == "(" {
				if b.include, err = p.labelList(); err != nil {
					return nil, err
				}
			}
		}
		next := pqPrecedence[op]
		if op == "^" {
			next-- // right-associative
		}
		if b.rhs, err = p.expr(next); err != nil {
			return nil, err
		}
		lhs = b
	}
}

func (p *pqParser) unary() (pqNode, error) {
	if t := p.peek(); t.kind == "op" && (t.text == "-" || t.text == "+") {
		p.next()
		n, err := p.unary()
		return pqUnary{n}, err
	}
	n, err := p.primary()
	if err != nil {
		return nil, err
	}
	for {
		switch t := p.peek(); {
		case t.kind == "[":
			p.next()
			n = pqRange{n}
		case t.text == "offset":
			p.next()
			if _, err := p.duration(); err != nil {
				return nil, err
			}
			n = pqRange{n}
		case t.text == "@":
			p.next()
			if _, err := p.unary(); err != nil {
				return nil, err
			}
			n = pqRange{n}
		default:
			return n, nil
		}
	}
}

// duration reads an offset's duration (5m, 1h30m, -5m).
func (p *pqParser) duration() (string, error) {
	t := p.next()
	if t.kind == "op" && t.text == "-" {
		t = p.next()
	}
	if t.kind != "number" {
		return "", fmt.Errorf("want a duration, got %q", t.text)
	}
	d := t.text
	for p.peek().kind == "ident" && strings.Trim(p.peek().text, "smhdwy") == "" {
		d += p.next().text
	}
	return d, nil
}

func (p *pqParser) primary() (pqNode, error) {
	t := p.peek()
	switch t.kind {
	case "number":
		p.next()
		return pqNumber{}, nil
	case "string":
		p.next()
		return pqString{}, nil
	case "(":
		p.next()
		n, err := p.expr(0)
		if err != nil {
			return nil, err
		}
		_, err = p.expect(")")
		return n, err
	case "{":
		return p.selector("")
	case "ident":
		p.next()
		switch {
		case t.text == "inf" || t.text == "Inf" || t.text == "nan" || t.text == "NaN":
			return pqNumber{}, nil
		case pqAggregations[t.text] && (p.peek().kind == "(" || p.peek().text == "by" || p.peek().text == "without"):
			return p.aggregation(t.text)
		case p.peek().kind == "(":
			if !pqFunctions[t.text] {
				return nil, fmt.Errorf("function %s is not known to this checker", t.text)
			}
			return p.call(t.text)
		}
		if _, isOp := pqPrecedence[t.text]; isOp || t.text == "by" || t.text == "without" || t.text == "on" ||
			t.text == "ignoring" || t.text == "bool" || t.text == "offset" {
			return nil, fmt.Errorf("unexpected keyword %s", t.text)
		}
		return p.selector(t.text)
	}
	return nil, fmt.Errorf("unexpected %q", t.text)
}

func (p *pqParser) selector(name string) (pqNode, error) {
	s := pqSelector{name: name}
	if p.peek().kind != "{" {
		return s, nil
	}
	p.next()
	for p.peek().kind != "}" {
		l, err := p.expect("ident")
		if err != nil {
			return nil, err
		}
		op := p.next()
		if op.kind != "op" || (op.text != "=" && op.text != "!=" && op.text != "=~" && op.text != "!~") {
			return nil, fmt.Errorf("bad matcher operator %q", op.text)
		}
		v, err := p.expect("string")
		if err != nil {
			return nil, err
		}
		if l.text == "__name__" && op.text == "=" {
			s.name = v.text
		} else {
			s.matchers = append(s.matchers, pqMatcher{l.text, op.text, v.text})
		}
		switch p.peek().kind {
		case ",":
			p.next()
		case "}":
		default:
			return nil, fmt.Errorf("want , or } after a matcher, got %q", p.peek().text)
		}
	}
	p.next()
	if s.name == "" {
		return nil, fmt.Errorf("a selector without a metric name")
	}
	return s, nil
}

func (p *pqParser) call(fn string) (pqNode, error) {
	c := pqCall{fn: fn}
	p.next() // (
	for p.peek().kind != ")" {
		a, err := p.expr(0)
		if err != nil {
			return nil, err
		}
		c.args = append(c.args, a)
		switch p.peek().kind {
		case ",":
			p.next()
		case ")":
		default:
			return nil, fmt.Errorf("want , or ) after an argument of %s, got %q", fn, p.peek().text)
		}
	}
	p.next()
	return c, nil
}

func (p *pqParser) aggregation(op string) (pqNode, error) {
	a := pqAgg{op: op}
	var err error
	grouping := func() error {
		if t := p.peek().text; t == "by" || t == "without" {
			p.next()
			a.without = t == "without"
			a.grouping, err = p.labelList()
		}
		return err
	}
	if err := grouping(); err != nil {
		return nil, err
	}
	if _, err := p.expect("("); err != nil {
		return nil, err
	}
	first, err := p.expr(0)
	if err != nil {
		return nil, err
	}
	a.expr = first
	if p.peek().kind == "," {
		p.next()
		a.param = first
		if a.expr, err = p.expr(0); err != nil {
			return nil, err
		}
	}
	if _, err := p.expect(")"); err != nil {
		return nil, err
	}
	if a.grouping == nil {
		if err := grouping(); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// labelList reads "(a, b, c)".
func (p *pqParser) labelList() ([]string, error) {
	if _, err := p.expect("("); err != nil {
		return nil, err
	}
	out := []string{}
	for p.peek().kind != ")" {
		l, err := p.expect("ident")
		if err != nil {
			return nil, err
		}
		out = append(out, l.text)
		switch p.peek().kind {
		case ",":
			p.next()
		case ")":
		default:
			return nil, fmt.Errorf("want , or ) in a label list, got %q", p.peek().text)
		}
	}
	p.next()
	return out, nil
}

// pqSelectors lists every selector under n.
func pqSelectors(n pqNode) []pqSelector {
	var out []pqSelector
	var walk func(pqNode)
	walk = func(n pqNode) {
		switch n := n.(type) {
		case pqSelector:
			out = append(out, n)
		case pqCall:
			for _, a := range n.args {
				walk(a)
			}
		case pqAgg:
			if n.param != nil {
				walk(n.param)
			}
			walk(n.expr)
		case pqBinary:
			walk(n.lhs)
			walk(n.rhs)
		case pqRange:
			walk(n.expr)
		case pqUnary:
			walk(n.expr)
		}
	}
	walk(n)
	return out
}
