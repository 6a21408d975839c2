package scenarios

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"

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

// fieldNames are the top-level keys a scenario file may have, for the unknown-field error.
func fieldNames() []string {
	names := []string{"name", "why"}
	for _, o := range harness.Options() {
		if o.Key != "" {
			names = append(names, o.Key)
		}
	}
	return append(names, "client", "expect")
}

// Parse reads a scenario file. Its errors name the file, the line, the field and what is allowed.
// The scenario's name must be the file's name without .yaml: a scenario is found by its name, and
// a file that says otherwise would be found under one name and stored under another. A file without
// a seed gets one drawn at random (RandomSeed), which the caller prints so the run can be repeated.
func Parse(file string, data []byte) (Scenario, error) {
	s, err := parse(file, data)
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

func parse(file string, data []byte) (Scenario, error) {
	root, err := topMapping(data)
	if err != nil {
		return Scenario{}, err
	}
	// A file starts from the defaults a command line has, and names its options in its own spelling.
	s := Scenario{Config: harness.Defaults()}
	s.Config.Spelling = harness.Spelling{File: file}
	seen := map[string]bool{}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		err := errors.New("given twice")
		if !seen[k.Value] {
			seen[k.Value] = true
			err = s.field(k.Value, v)
		}
		if err != nil {
			if strings.HasPrefix(err.Error(), "line ") {
				return s, fmt.Errorf("%s: %w", k.Value, err)
			}
			return s, fmt.Errorf("line %d: %s: %w", k.Line, k.Value, err)
		}
	}
	if err := missing(seen); err != nil {
		return s, err
	}
	if !seen["seed"] {
		s.Config.Seed, s.RandomSeed = rand.Uint64()>>1, true
	}
	check := s.Config
	return s, check.Resolve()
}

// topMapping decodes a file into its top-level mapping.
func topMapping(data []byte) (*yaml.Node, error) {
	var doc yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(data)).Decode(&doc); err != nil {
		return nil, fmt.Errorf("not valid YAML: %w", err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, errors.New("a scenario file is a mapping of fields (name: ..., lock: ..., expect: ...)")
	}
	return doc.Content[0], nil
}

// field reads one top-level field: the scenario's own, or a run option through harness.Options.
func (s *Scenario) field(key string, v *yaml.Node) error {
	var err error
	switch key {
	case "name":
		s.Name, err = str(v)
	case "why":
		s.Why, err = str(v)
	case "client":
		s.Config.ClientCmd, s.Config.ClientCaps, err = clientBlock(v)
	case "expect":
		s.Expect, err = expectation(v)
	case "nemeses":
		var specs []nemesis.Spec
		specs, err = nemeses(v)
		s.Config.Nemesis = nemesis.JoinSpecs(specs)
	default:
		o, ok := harness.OptionByKey(key)
		if !ok {
			return unknownField(key)
		}
		err = option(o, &s.Config, v)
	}
	return err
}

// option sets a run option from its node, with the same parser as its flag.
func option(o harness.Option, c *harness.Config, v *yaml.Node) error {
	if v.Kind != yaml.ScalarNode {
		return errors.New("must be a single value")
	}
	val := o.Value(c)
	if val.Type() == "string" && v.Value == "" {
		return errors.New("must be a non-empty text")
	}
	err := val.Set(v.Value)
	switch {
	case errors.Is(err, harness.ErrZero) && val.Type() == "duration":
		return fmt.Errorf("must be positive, got %q (leave the field out for its default)", v.Value)
	case errors.Is(err, harness.ErrZero):
		return fmt.Errorf("must be at least 1, got %s (leave the field out for its default)", v.Value)
	case err != nil:
		return fmt.Errorf("%w, got %q", err, v.Value)
	}
	return nil
}

func unknownField(key string) error {
	if near := harness.Nearest(key, fieldNames()); near != "" {
		return fmt.Errorf("unknown field: did you mean %s? (a scenario file has %s)", near, strings.Join(fieldNames(), ", "))
	}
	return fmt.Errorf("unknown field: use one of %s", strings.Join(fieldNames(), ", "))
}

// missing names every required field the file lacks, in one line.
func missing(seen map[string]bool) error {
	var lack []string
	if !seen["name"] {
		lack = append(lack, "name")
	}
	for _, o := range harness.Options() {
		if o.Required && !seen[o.Key] {
			lack = append(lack, fmt.Sprintf("%s (for example %s: %s)", o.Key, o.Key, o.Default))
		}
	}
	if !seen["expect"] {
		lack = append(lack, "expect (valid or invalid)")
	}
	switch len(lack) {
	case 0:
		return nil
	case 1:
		return fmt.Errorf("field %s is missing: add it", lack[0])
	}
	return fmt.Errorf("fields %s are missing: add them", strings.Join(lack, ", "))
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
