package gateway_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func TestPromQLReaderFindsEveryMetricAndLabel(t *testing.T) {
	cases := []struct {
		expr string
		want string // the tree, in pqString form
	}{
		{`up`, `up`},
		{`turnstile_ready{instance=~"$instance"} == 0`, `(turnstile_ready{instance=~"$instance"} == 0)`},
		{`histogram_quantile(0.95, sum by (tool, le) (rate(x_bucket{a="b"}[$__rate_interval]))) > 1500`,
			`(histogram_quantile(0, sum by(tool,le) (rate(x_bucket{a="b"}[]))) > 0)`},
		{`sum(rate(a[5m])) by (job) / on(job) group_left(version) b`,
			`(sum by(job) (rate(a[])) / on(job) group_left(version) b)`},
		{`a > 0.9 * b and b > 0`, `((a > (0 * b)) and (b > 0))`},
		{"sum by (instance) (rate(m{outcome!~\"ok|cancelled\"}[10m]))\n  / sum by (instance) (rate(m[10m])) > 0.05",
			`((sum by(instance) (rate(m{outcome!~"ok|cancelled"}[])) / sum by(instance) (rate(m[]))) > 0)`},
		{`2 ^ 3 ^ a`, `(0 ^ (0 ^ a))`},
		{`-rate(a[1m] offset 5m)`, `-rate(a[][])`},
		{`{__name__="go_goroutines", job='turnstile'}`, `go_goroutines{job="turnstile"}`},
		{`topk(3, sum without (mode) (x))`, `topk (0, sum without(mode) (x))`},
		{`max_over_time(x[1h:5m])`, `max_over_time(x[])`},
		{`a unless ignoring(code) b`, `(a unless ignoring(code) b)`},
	}
	for _, c := range cases {
		n, err := parsePromQL(c.expr)
		if err != nil {
			t.Errorf("%s: %v", c.expr, err)
			continue
		}
		if got := pqDebug(n); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.expr, got, c.want)
		}
	}
}

func TestPromQLReaderRefusesWhatItCannotFollow(t *testing.T) {
	for _, expr := range []string{
		``, `sum(`, `rate(a[5m]`, `a{b="c"`, `a{b=c}`, `a +`, `a b`, `{job="x"}`,
		`label_replace(up, "x", "$1", "job", "(.*)")`, `made_up_function(a)`, `a{b~"c"}`, `(a`, `a[5m`,
		`sum by (a b) (x)`, `a == bool`, `rate(a[5m] b)`, `a{b="c" d="e"}`,
	} {
		if n, err := parsePromQL(expr); err == nil {
			t.Errorf("%q parsed as %s", expr, pqDebug(n))
		}
	}
}

func TestPromQLSelectorsListsEveryMetric(t *testing.T) {
	n, err := parsePromQL(`sum by (op) (rate(a{x="1"}[5m])) / on(op) group_left b + -histogram_quantile(0.5, c_bucket) or vector(0)`)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range pqSelectors(n) {
		names = append(names, s.name)
	}
	if want := []string{"a", "b", "c_bucket"}; !reflect.DeepEqual(names, want) {
		t.Errorf("selectors %v, want %v", names, want)
	}
}

// pqDebug renders a tree for the tests: numbers as 0, ranges as [].
func pqDebug(n pqNode) string {
	switch n := n.(type) {
	case pqSelector:
		var m []string
		for _, x := range n.matchers {
			m = append(m, fmt.Sprintf("%s%s%q", x.label, x.op, x.value))
		}
		if len(m) == 0 {
			return n.name
		}
		return n.name + "{" + strings.Join(m, ",") + "}"
	case pqCall:
		var a []string
		for _, x := range n.args {
			a = append(a, pqDebug(x))
		}
		return n.fn + "(" + strings.Join(a, ", ") + ")"
	case pqAgg:
		g := ""
		if n.grouping != nil {
			kw := "by"
			if n.without {
				kw = "without"
			}
			g = " " + kw + "(" + strings.Join(n.grouping, ",") + ")"
		}
		inner := pqDebug(n.expr)
		if n.param != nil {
			inner = pqDebug(n.param) + ", " + inner
		}
		return n.op + g + " (" + inner + ")"
	case pqBinary:
		mod := ""
		if n.matching != nil {
			kw := "ignoring"
			if n.on {
				kw = "on"
			}
			mod += " " + kw + "(" + strings.Join(n.matching, ",") + ")"
		}
		if n.group != "" {
			mod += " " + n.group
			if n.include != nil {
				mod += "(" + strings.Join(n.include, ",") + ")"
			}
		}
		return "(" + pqDebug(n.lhs) + " " + n.op + mod + " " + pqDebug(n.rhs) + ")"
	case pqRange:
		return pqDebug(n.expr) + "[]"
	case pqUnary:
		return "-" + pqDebug(n.expr)
	case pqNumber:
		return "0"
	case pqString:
		return `""`
	}
	return "?"
}
