package scenarios

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/lockpick-dev/lockpick/checker"
	"github.com/lockpick-dev/lockpick/harness"
	"github.com/lockpick-dev/lockpick/nemesis"
)

// Expectation is what a scenario must show: a verdict, and optionally findings that must be present
// (Some) or absent (None), named as in Findings.
type Expectation struct {
	Verdict checker.Verdict `json:"verdict"`
	Some    []string        `json:"some,omitempty"`
	None    []string        `json:"none,omitempty"`
}

func (e Expectation) String() string {
	s := e.Verdict.String()
	if len(e.Some) > 0 {
		s += ", some " + strings.Join(e.Some, ", ")
	}
	if len(e.None) > 0 {
		s += ", no " + strings.Join(e.None, ", ")
	}
	return s
}

// Findings are the counts an expectation can name, read off a checked run.
func Findings() map[string]func(*checker.Result) int {
	return map[string]func(*checker.Result) int{
		// violations: pairs of holds of one key that overlapped.
		"violations": func(r *checker.Result) int { return r.ViolationCount },
		// overruns: protected work that went on past the lease's deadline.
		"overruns": func(r *checker.Result) int { return r.OverrunCount },
		// ok_in_faults: leases granted while a fault was in effect (the lock stayed available).
		"ok_in_faults": func(r *checker.Result) int { return r.Stats.OKInFaults },
		// ok_wholly_in_faults: leases asked for and granted while a fault was certainly in effect.
		"ok_wholly_in_faults": func(r *checker.Result) int { return r.Stats.OKWhollyInFaults },
		// lost_updates: increments of the counter workload that the resource accepted and then lost.
		"lost_updates": func(r *checker.Result) int {
			if r.Resource == nil {
				return 0
			}
			return int(r.Resource.LostUpdates)
		},
		// stale_writes: writes the resource accepted from a process whose lease had ended.
		"stale_writes": func(r *checker.Result) int {
			if r.Resource == nil {
				return 0
			}
			return r.Resource.StaleWriteCount
		},
		// token_regressions: acquires handed a token not above one handed out before.
		"token_regressions": func(r *checker.Result) int { return r.TokenRegressionCount },
		// early_losses: releases or extends refused as "lease no longer held" before the deadline.
		"early_losses": func(r *checker.Result) int { return r.EarlyLossCount },
		// late_extends: renewals of leases that had already ended.
		"late_extends": func(r *checker.Result) int { return r.LateExtendCount },
		// deadlocks: keys refused as held after the last heal for longer than a lease can outlive its
		// holder (liveness).
		"deadlocks": func(r *checker.Result) int {
			n := 0
			if r.Liveness != nil {
				for _, f := range r.Liveness.Findings {
					if f.Kind == checker.LiveDeadlock {
						n++
					}
				}
			}
			return n
		},
		// ok_acquires: leases granted at all.
		"ok_acquires": func(r *checker.Result) int { return r.Stats.Acquires.OK },
	}
}

func findingNames() []string { return slices.Sorted(maps.Keys(Findings())) }

// Met compares a checked run with the expectation and says what differs; empty means met.
func (e Expectation) Met(r *checker.Result) []string {
	var miss []string
	if r.Valid != e.Verdict {
		miss = append(miss, fmt.Sprintf("verdict %s, expected %s", r.Valid, e.Verdict))
	}
	f := Findings()
	for _, n := range e.Some {
		if v := f[n](r); v == 0 {
			miss = append(miss, fmt.Sprintf("no %s, expected some", n))
		}
	}
	for _, n := range e.None {
		if v := f[n](r); v != 0 {
			miss = append(miss, fmt.Sprintf("%d %s, expected none", v, n))
		}
	}
	return miss
}

// fieldDocs are the top-level keys a scenario file may have, for the unknown-field error.
var fieldDocs = []string{"name", "why", "lock", "workload", "guard", "system", "etcd_server", "nodes", "replicas", "sentinels", "allow_even_nodes", "persistence", "clients", "client_groups", "keys", "ttl", "time_limit", "recovery", "interval", "restart_delay", "node_timeout", "hold_max", "careful", "extend", "think_max", "watchdog_timeout", "reentrant", "client", "seed", "nemeses", "expect"}

// Parse reads a scenario file. Its errors name the file, the line, the field and what is allowed.
// The scenario's name must be the file's name without .yaml: a scenario is found by its name, and
// a file that says otherwise would be found under one name and stored under another. A file without
// a seed gets one drawn at random (RandomSeed), which the caller prints so the run can be repeated.
func Parse(file string, data []byte) (Scenario, error) {
	s, err := parse(data)
	if err != nil {
		return Scenario{}, fmt.Errorf("%s: %w", file, err)
	}
	base := strings.TrimSuffix(strings.TrimSuffix(filepath.Base(file), ".yaml"), ".yml")
	if s.Name != base {
		return Scenario{}, fmt.Errorf("%s: name %q differs from the file name: rename the file to %s.yaml or set name: %s", file, s.Name, s.Name, base)
	}
	s.File = file
	return s, nil
}

// Load reads a scenario file from disk.
func Load(path string) (Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Scenario{}, fmt.Errorf("read scenario: %w", err)
	}
	return Parse(path, data)
}

func parse(data []byte) (Scenario, error) {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		return Scenario{}, fmt.Errorf("not valid YAML: %w", err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return Scenario{}, errors.New("a scenario file is a mapping of fields (name: ..., lock: ..., expect: ...)")
	}
	root := doc.Content[0]
	var s Scenario
	c := &s.Config
	seen := map[string]bool{}
	var specs []nemesis.Spec
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		at := func(err error) error {
			if strings.HasPrefix(err.Error(), "line ") {
				return fmt.Errorf("%s: %w", k.Value, err)
			}
			return fmt.Errorf("line %d: %s: %w", k.Line, k.Value, err)
		}
		if seen[k.Value] {
			return s, at(errors.New("given twice"))
		}
		seen[k.Value] = true
		var err error
		switch k.Value {
		case "name":
			s.Name, err = str(v)
		case "why":
			s.Why, err = str(v)
		case "lock":
			c.Lock, err = str(v)
		case "workload":
			c.Workload, err = str(v)
		case "guard":
			c.Guard, err = str(v)
		case "persistence":
			c.Persistence, err = str(v)
		case "system":
			c.System, err = str(v)
		case "etcd_server":
			c.EtcdServer, err = str(v)
		case "nodes":
			c.Nodes, err = positive(v)
		case "replicas":
			c.Replicas, err = positive(v)
		case "sentinels":
			c.Sentinels, err = positive(v)
		case "allow_even_nodes":
			c.AllowEvenNodes, err = boolean(v)
		case "clients":
			c.Clients, err = integer(v)
		case "client_groups":
			c.ClientGroups, err = positive(v)
		case "keys":
			c.Keys, err = integer(v)
		case "ttl":
			c.TTL, err = duration(v)
		case "time_limit":
			c.TimeLimit, err = duration(v)
		case "recovery":
			c.Recovery, err = duration(v)
		case "interval":
			c.Interval, err = positiveDuration(v)
		case "restart_delay":
			c.RestartDelay, err = positiveDuration(v)
		case "node_timeout":
			c.NodeTimeout, err = positiveDuration(v)
		case "hold_max":
			c.HoldMax, err = positiveDuration(v)
		case "careful":
			c.Careful, err = boolean(v)
		case "extend":
			c.Extend, err = boolean(v)
		case "reentrant":
			c.Reentrant, err = boolean(v)
		case "think_max":
			c.ThinkMax, err = positiveDuration(v)
		case "watchdog_timeout":
			c.WatchdogTimeout, err = positiveDuration(v)
		case "seed":
			c.Seed, err = strconv.ParseUint(v.Value, 10, 64)
			if v.Kind != yaml.ScalarNode || err != nil {
				err = fmt.Errorf("must be a whole number of at least 0, got %q", v.Value)
			}
		case "client":
			c.ClientCmd, c.ClientCaps, err = clientBlock(v)
		case "nemeses":
			specs, err = nemeses(v)
		case "expect":
			s.Expect, err = expectation(v)
		default:
			err = fmt.Errorf("unknown field: use one of %s", strings.Join(fieldDocs, ", "))
		}
		if err != nil {
			return s, at(err)
		}
	}
	for _, req := range []string{"name", "lock", "ttl", "time_limit", "clients", "expect"} {
		if !seen[req] {
			return s, fmt.Errorf("field %s is missing", req)
		}
	}
	if !seen["keys"] {
		c.Keys = 1
	}
	if !seen["recovery"] {
		c.Recovery = harness.Duration(5 * time.Second)
	}
	if !seen["seed"] {
		c.Seed, s.RandomSeed = rand.Uint64()>>1, true
	}
	c.Nemesis = nemesis.JoinSpecs(specs)
	check := *c
	if err := check.Resolve(); err != nil {
		return s, fieldError(err)
	}
	return s, nil
}

// flagName finds the flag an error of Config.Resolve names, to say the file's field instead.
var flagName = regexp.MustCompile(`^--([a-z-]+)`)

func fieldError(err error) error {
	msg := err.Error()
	if m := flagName.FindStringSubmatch(msg); m != nil {
		field := strings.ReplaceAll(m[1], "-", "_")
		if field == "nemesis" {
			field = "nemeses"
		}
		return fmt.Errorf("%s%s", field, strings.TrimPrefix(msg, m[0]))
	}
	return err
}

// clientBlock reads the client block of --lock client: its command (a text split at spaces, or a
// list of words) and the capabilities its program offers.
func clientBlock(v *yaml.Node) (cmd, caps []string, err error) {
	if v.Kind != yaml.MappingNode {
		return nil, nil, errors.New("must be a mapping: client: {command: ./myclient.py, capabilities: [validity, extend]}")
	}
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, val := v.Content[i], v.Content[i+1]
		switch {
		case k.Value == "command" && val.Kind == yaml.ScalarNode:
			cmd = strings.Fields(val.Value)
		case k.Value == "command" && val.Kind == yaml.SequenceNode, k.Value == "capabilities" && val.Kind == yaml.SequenceNode:
			var words []string
			for _, w := range val.Content {
				if w.Kind != yaml.ScalarNode || w.Value == "" {
					return nil, nil, fmt.Errorf("line %d: %s: each entry must be a non-empty text", w.Line, k.Value)
				}
				words = append(words, w.Value)
			}
			if k.Value == "command" {
				cmd = words
			} else {
				caps = words
			}
		default:
			return nil, nil, fmt.Errorf("line %d: %s: the client block has command (a text or a list) and capabilities (a list)", k.Line, k.Value)
		}
	}
	if len(cmd) == 0 {
		return nil, nil, errors.New("needs a command: client: {command: ./myclient.py}")
	}
	return cmd, caps, nil
}

func str(v *yaml.Node) (string, error) {
	if v.Kind != yaml.ScalarNode || v.Value == "" {
		return "", errors.New("must be a non-empty text")
	}
	return v.Value, nil
}

func integer(v *yaml.Node) (int, error) {
	n, err := strconv.Atoi(v.Value)
	if v.Kind != yaml.ScalarNode || err != nil {
		return 0, fmt.Errorf("must be a whole number, got %q", v.Value)
	}
	return n, nil
}

// positive reads a count that must be at least 1. In a Config zero means "the default", so a file
// that says 0 would silently get the default: it is refused instead.
func positive(v *yaml.Node) (int, error) {
	n, err := integer(v)
	if err == nil && n < 1 {
		return 0, fmt.Errorf("must be at least 1, got %d (leave the field out for its default)", n)
	}
	return n, err
}

func boolean(v *yaml.Node) (bool, error) {
	switch v.Value {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, fmt.Errorf("must be true or false, got %q", v.Value)
}

// positiveDuration reads a duration that must be above zero, for the same reason as positive.
func positiveDuration(v *yaml.Node) (harness.Duration, error) {
	d, err := duration(v)
	if err == nil && d <= 0 {
		return 0, fmt.Errorf("must be positive, got %q (leave the field out for its default)", v.Value)
	}
	return d, err
}

func duration(v *yaml.Node) (harness.Duration, error) {
	d, err := time.ParseDuration(v.Value)
	if v.Kind != yaml.ScalarNode || err != nil {
		return 0, fmt.Errorf("must be a duration such as 2s or 500ms, got %q", v.Value)
	}
	return harness.Duration(d), nil
}

// nemeses reads a list of nemeses, each a mapping with a name and its parameters:
//
//	nemeses:
//	  - name: clock
//	    target: majority
//	    jump: forward
func nemeses(v *yaml.Node) ([]nemesis.Spec, error) {
	if v.Kind != yaml.SequenceNode {
		return nil, errors.New("must be a list of nemeses, each with a name (- name: restart)")
	}
	var specs []nemesis.Spec
	for _, item := range v.Content {
		if item.Kind == yaml.ScalarNode {
			item = &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{{Kind: yaml.ScalarNode, Value: "name"}, item}}
		}
		if item.Kind != yaml.MappingNode {
			return nil, fmt.Errorf("line %d: a nemesis is a name or a mapping with a name and its parameters", item.Line)
		}
		var spec nemesis.Spec
		for i := 0; i+1 < len(item.Content); i += 2 {
			k, val := item.Content[i], item.Content[i+1]
			if val.Kind != yaml.ScalarNode {
				return nil, fmt.Errorf("line %d: nemesis parameter %s must be a single value", k.Line, k.Value)
			}
			if k.Value == "name" {
				spec.Name = val.Value
				continue
			}
			if spec.Params == nil {
				spec.Params = map[string]string{}
			}
			spec.Params[k.Value] = val.Value
		}
		if err := nemesis.Validate(spec.Name); err != nil {
			return nil, fmt.Errorf("line %d: %w", item.Line, err)
		}
		specs = append(specs, spec)
	}
	// The text form goes through the same checks as --nemesis (duplicates, "none").
	joined := nemesis.JoinSpecs(specs)
	if _, err := nemesis.ParseSpecs(joined); err != nil {
		return nil, err
	}
	return specs, nil
}

// expectation reads "expect: invalid" or a mapping with a verdict and findings:
//
//	expect:
//	  verdict: valid
//	  some: [ok_in_faults]
//	  none: [overruns]
func expectation(v *yaml.Node) (Expectation, error) {
	var e Expectation
	verdict := func(n *yaml.Node) error {
		switch n.Value {
		case "valid":
			e.Verdict = checker.Valid
		case "invalid":
			e.Verdict = checker.Invalid
		default:
			return fmt.Errorf("verdict %q: use valid or invalid", n.Value)
		}
		return nil
	}
	if v.Kind == yaml.ScalarNode {
		return e, verdict(v)
	}
	if v.Kind != yaml.MappingNode {
		return e, errors.New("must be valid, invalid, or a mapping with verdict, some and none")
	}
	findings := Findings()
	list := func(n *yaml.Node) ([]string, error) {
		if n.Kind != yaml.SequenceNode {
			return nil, fmt.Errorf("must be a list, for example [%s]", findingNames()[0])
		}
		var out []string
		for _, x := range n.Content {
			if _, ok := findings[x.Value]; !ok {
				return nil, fmt.Errorf("unknown finding %q: use %s", x.Value, strings.Join(findingNames(), ", "))
			}
			out = append(out, x.Value)
		}
		return out, nil
	}
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, val := v.Content[i], v.Content[i+1]
		var err error
		switch k.Value {
		case "verdict":
			err = verdict(val)
		case "some":
			e.Some, err = list(val)
		case "none":
			e.None, err = list(val)
		default:
			err = errors.New("unknown field: use verdict, some, none")
		}
		if err != nil {
			return e, fmt.Errorf("%s: %w", k.Value, err)
		}
	}
	if e.Verdict == checker.Unknown {
		return e, errors.New("verdict is missing: use valid or invalid")
	}
	return e, nil
}
