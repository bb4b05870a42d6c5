// dashcheck checks the chart's Grafana dashboard and Prometheus alerts with the real tools'
// own code rather than with benchrun's parsers:
//
//   - the dashboard is decoded with Grafana's schema types (grafana-foundation-sdk), strictly:
//     an unknown or mistyped field anywhere, in a panel's options, field config or query, fails;
//     every panel type and every query must be one the SDK knows (Prometheus queries only);
//   - every PromQL expression (panel queries, template variables' label_values selectors, the
//     alerts' expressions) is parsed by Prometheus's own parser;
//   - every metric an expression selects is one the worker or the operator registers, every label
//     it matches, groups or joins on is one that metric carries (metrics.json, generated from the
//     code by operator/tests/metrics_catalogue.rs) or one the scrape adds.
//
// Usage: dashcheck -metrics metrics.json -dashboard benchrun.json [-alerts alerts.json]
// alerts.json is [{"where": "...", "expr": "..."}]. Prints one line per problem and exits 1 if
// there is any.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/plugins"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/prometheus/prometheus/promql/parser"
)

// scrapeLabels are the labels a series has besides its own: those Prometheus adds to every
// target (job, instance) and those the chart's PodMonitor and ServiceMonitor add (check.py checks
// the relabelings that make run, worker, node and namespace).
var scrapeLabels = []string{"job", "instance", "namespace", "pod", "container", "service", "endpoint", "run", "worker", "node"}

type family struct {
	Name   string   `json:"name"`
	Kind   string   `json:"kind"`
	Labels []string `json:"labels"`
}

type catalogue struct {
	Families []family `json:"families"`
}

type exprAt struct {
	Where string `json:"where"`
	Expr  string `json:"expr"`
}

// checker collects problems; each is one line of output.
type checker struct {
	series   map[string]map[string]bool // series name -> its labels (own and scrape)
	problems []string
}

func (c *checker) fail(format string, args ...any) {
	c.problems = append(c.problems, fmt.Sprintf(format, args...))
}

func newChecker(cat catalogue) *checker {
	c := &checker{series: map[string]map[string]bool{}}
	add := func(name string, labels []string, extra ...string) {
		set := map[string]bool{}
		for _, l := range append(append(append([]string{}, labels...), extra...), scrapeLabels...) {
			set[l] = true
		}
		c.series[name] = set
	}
	for _, f := range cat.Families {
		switch f.Kind {
		case "histogram":
			add(f.Name+"_bucket", f.Labels, "le")
			add(f.Name+"_sum", f.Labels)
			add(f.Name+"_count", f.Labels)
		case "counter", "gauge":
			add(f.Name, f.Labels)
		default:
			c.fail("metrics.json: %s has unknown kind %q", f.Name, f.Kind)
		}
	}
	return c
}

// grafanaMacros turns Grafana's interpolations into what Prometheus would receive, so that the
// parser sees a real query: range macros become a duration, other variables (which only appear
// inside label values here) are left alone.
var rangeMacro = regexp.MustCompile(`\$__(rate_interval|interval|range)\b|\$\{__(rate_interval|interval|range)\}`)

func interpolate(expr string) string {
	return rangeMacro.ReplaceAllString(expr, "5m")
}

// checkExpr parses one PromQL expression and checks its metrics and labels.
func (c *checker) checkExpr(where, expr string) {
	p := parser.NewParser(parser.Options{})
	ast, err := p.ParseExpr(interpolate(expr))
	if err != nil {
		c.fail("%s: PromQL does not parse: %v\n    %s", where, err, expr)
		return
	}
	// Labels any selected series carries, and those the expression itself creates.
	available := map[string]bool{}
	var used []string
	selected := 0
	parser.Inspect(ast, func(node parser.Node, _ []parser.Node) error {
		switch n := node.(type) {
		case *parser.VectorSelector:
			name := n.Name
			for _, m := range n.LabelMatchers {
				if m.Name == "__name__" {
					name = m.Value
				}
			}
			labels, ok := c.series[name]
			if !ok {
				c.fail("%s: selects %q, which neither the worker nor the operator exports", where, name)
				return nil
			}
			selected++
			for l := range labels {
				available[l] = true
			}
			for _, m := range n.LabelMatchers {
				if m.Name != "__name__" && !labels[m.Name] {
					c.fail("%s: matches label %q, which %s does not carry (it has %s)", where, m.Name, name, keys(labels))
				}
			}
		case *parser.AggregateExpr:
			used = append(used, n.Grouping...)
		case *parser.BinaryExpr:
			if n.VectorMatching != nil {
				used = append(used, n.VectorMatching.MatchingLabels...)
				used = append(used, n.VectorMatching.Include...)
			}
		case *parser.Call:
			// label_replace(v, dst, repl, src, regex) and label_join(v, dst, sep, src...) make dst.
			if n.Func.Name == "label_replace" || n.Func.Name == "label_join" {
				if s, ok := n.Args[1].(*parser.StringLiteral); ok {
					available[s.Val] = true
				}
			}
		}
		return nil
	})
	if selected == 0 {
		c.fail("%s: selects no benchrun metric: %s", where, expr)
	}
	for _, l := range used {
		if !available[l] && l != "le" {
			c.fail("%s: groups or matches on label %q, which no series it selects carries", where, l)
		}
	}
}

// labelValues is Grafana's variable query `label_values(selector, label)`.
var labelValues = regexp.MustCompile(`^\s*label_values\((.*),\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)\s*$`)

func (c *checker) checkVariableQuery(where, query string) {
	m := labelValues.FindStringSubmatch(query)
	if m == nil {
		// query_result(...) and plain expressions are PromQL.
		q := strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(query), "query_result("), ")")
		c.checkExpr(where, q)
		return
	}
	c.checkExpr(where, m[1])
	p := parser.NewParser(parser.Options{})
	ast, err := p.ParseExpr(m[1])
	if err != nil {
		return // reported above
	}
	if vs, ok := ast.(*parser.VectorSelector); ok {
		if labels, ok := c.series[vs.Name]; ok && !labels[m[2]] {
			c.fail("%s: label_values of %q, which %s does not carry", where, m[2], vs.Name)
		}
	}
}

func (c *checker) checkDashboard(raw []byte) {
	var strict dashboard.Dashboard
	if err := strictErrors(strict.UnmarshalJSONStrict(raw)); err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			c.fail("dashboard: Grafana's schema rejects %s", line)
		}
	}
	// Go on with a lenient decoding, so that the queries are checked whatever the schema said.
	var d dashboard.Dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		c.fail("dashboard: does not decode as a Grafana dashboard: %v", err)
		return
	}
	for _, v := range d.Templating.List {
		where := fmt.Sprintf("dashboard variable %q", v.Name)
		if v.Type != dashboard.VariableTypeQuery {
			continue
		}
		if v.Query == nil {
			c.fail("%s: a query variable without a query", where)
			continue
		}
		switch {
		case v.Query.String != nil:
			c.checkVariableQuery(where, *v.Query.String)
		case v.Query.Map != nil:
			q, ok := v.Query.Map["query"].(string)
			if !ok {
				c.fail("%s: query has no string 'query'", where)
				continue
			}
			c.checkVariableQuery(where, q)
		}
	}
	for _, pr := range d.Panels {
		panels := []*dashboard.Panel{}
		if pr.Panel != nil {
			panels = append(panels, pr.Panel)
		}
		if pr.RowPanel != nil {
			for i := range pr.RowPanel.Panels {
				panels = append(panels, &pr.RowPanel.Panels[i])
			}
		}
		for _, p := range panels {
			title := ""
			if p.Title != nil {
				title = *p.Title
			}
			where := fmt.Sprintf("dashboard panel %q", title)
			if _, ok := cog.ConfigForPanelcfgVariant(p.Type); !ok {
				c.fail("%s: panel type %q has no schema in the SDK", where, p.Type)
			}
			if len(p.Targets) == 0 {
				c.fail("%s: no queries", where)
			}
			for i, t := range p.Targets {
				q, ok := t.(*prometheus.Dataquery)
				if !ok {
					c.fail("%s: query %d is a %T, not a Prometheus query (set the panel's datasource type)", where, i, t)
					continue
				}
				c.checkExpr(fmt.Sprintf("%s query %d", where, i), q.Expr)
			}
		}
	}
}

// strictErrors returns nil when the SDK's strict decoding found nothing: it returns its error list
// as an error even when the list is empty.
func strictErrors(err error) error {
	var list cog.BuildErrors
	if errors.As(err, &list) && len(list) == 0 {
		return nil
	}
	return err
}

func keys(m map[string]bool) string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

func readJSON(path string, into any) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw, into); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

func main() {
	metrics := flag.String("metrics", "", "metrics.json: the families the code registers")
	dash := flag.String("dashboard", "", "the Grafana dashboard JSON")
	alerts := flag.String("alerts", "", "optional: [{where, expr}] of the alerts' expressions")
	flag.Parse()
	if *metrics == "" || *dash == "" {
		fmt.Fprintln(os.Stderr, "usage: dashcheck -metrics metrics.json -dashboard dashboard.json [-alerts alerts.json]")
		os.Exit(2)
	}
	plugins.RegisterDefaultPlugins()

	var cat catalogue
	if err := readJSON(*metrics, &cat); err != nil {
		fmt.Fprintln(os.Stderr, "dashcheck:", err)
		os.Exit(2)
	}
	c := newChecker(cat)
	raw, err := os.ReadFile(*dash)
	if err != nil {
		fmt.Fprintln(os.Stderr, "dashcheck:", err)
		os.Exit(2)
	}
	c.checkDashboard(raw)
	if *alerts != "" {
		var exprs []exprAt
		if err := readJSON(*alerts, &exprs); err != nil {
			fmt.Fprintln(os.Stderr, "dashcheck:", err)
			os.Exit(2)
		}
		if len(exprs) == 0 {
			c.fail("%s: no alert expressions to check", *alerts)
		}
		for _, e := range exprs {
			c.checkExpr(e.Where, e.Expr)
		}
	}
	for _, p := range c.problems {
		fmt.Println("FAIL:", p)
	}
	if len(c.problems) > 0 {
		os.Exit(1)
	}
	fmt.Printf("dashcheck: %d series known; dashboard decoded strictly; every expression parsed and checked\n", len(c.series))
}
