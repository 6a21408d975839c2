package main

import (
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/lockpick-dev/lockpick/harness"
	"github.com/lockpick-dev/lockpick/locks"
	"github.com/lockpick-dev/lockpick/nemesis"
	"github.com/lockpick-dev/lockpick/scenarios"
)

// completeFunc is cobra's completion callback.
type completeFunc = func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective)

// addCompletions teaches `lockpick completion bash|zsh|fish` (cobra's own command) the values of the
// flags and arguments: lock names, nemesis specs with their parameters and values, workloads,
// guards, persistence settings and scenarios. A flag is completed wherever a command has it.
func addCompletions(root *cobra.Command) {
	flags := map[string]completeFunc{
		"locks":   commaList(locks.Names()),
		"nemesis": completeNemeses,
		"nemeses": completeNemeses,
	}
	for _, o := range harness.Options() {
		if o.Values != nil {
			flags[o.Name] = fixed(o.Values())
		}
	}
	for _, cmd := range root.Commands() {
		for name, fn := range flags {
			if cmd.Flags().Lookup(name) != nil {
				// Registering twice is the only error, and each flag is registered once here.
				_ = cmd.RegisterFlagCompletionFunc(name, fn)
			}
		}
		switch cmd.Name() {
		case "run":
			cmd.ValidArgsFunction = completeScenarioFile
		case "scenario":
			cmd.ValidArgsFunction = completeScenarioNames
		case "card":
			cmd.ValidArgsFunction = completeCardLock
		case "check":
			cmd.ValidArgsFunction = func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
				return nil, cobra.ShellCompDirectiveFilterDirs
			}
		}
	}
}

// completeCardLock completes card's one argument, a lock; nothing after it.
func completeCardLock(_ *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return withPrefix(locks.Names(), "", toComplete), cobra.ShellCompDirectiveNoFileComp
}

// fixed completes one value out of a list.
func fixed(values []string) completeFunc {
	return func(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		return withPrefix(values, "", toComplete), cobra.ShellCompDirectiveNoFileComp
	}
}

// commaList completes the last element of a comma-separated list of values.
func commaList(values []string) completeFunc {
	return func(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		done, cur := splitLast(toComplete, ",")
		return withPrefix(values, done, cur), cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
	}
}

// completeNemeses completes nemesis specs, "name:key=value:...", several joined by commas: the name,
// then a parameter it takes, then one of the parameter's values (after "+" for parameters that take
// several). No space follows, so a spec can go on.
func completeNemeses(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	const directive = cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
	done, spec := splitLast(toComplete, ",")
	name, params, hasParams := strings.Cut(spec, ":")
	if !hasParams {
		return withPrefix(nemesis.Names(), done, spec), directive
	}
	known, err := nemesis.ParamValues(name)
	if err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	given, cur := splitLast(params, ":")
	base := done + name + ":" + given
	key, value, hasValue := strings.Cut(cur, "=")
	if !hasValue {
		var keys []string
		for _, k := range slices.Sorted(maps.Keys(known)) {
			if !strings.Contains(":"+given, ":"+k+"=") {
				keys = append(keys, k+"=")
			}
		}
		return withPrefix(keys, base, cur), directive
	}
	chosen, last := splitLast(value, "+")
	return withPrefix(known[key], base+key+"="+chosen, last), directive
}

// completeScenarioFile completes run's argument: the scenario files in ./scenarios when there are
// some (in a checkout), else any YAML file.
func completeScenarioFile(_ *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	files, _ := filepath.Glob(filepath.Join("scenarios", "*.yaml"))
	if got := withPrefix(files, "", toComplete); len(got) > 0 {
		return got, cobra.ShellCompDirectiveNoFileComp
	}
	return []string{"yaml", "yml"}, cobra.ShellCompDirectiveFilterFileExt
}

// completeScenarioNames completes the scenario command's arguments: built-in scenario names not yet
// given, or a YAML file once the word looks like a path.
func completeScenarioNames(_ *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if strings.ContainsAny(toComplete, "/.") {
		return []string{"yaml", "yml"}, cobra.ShellCompDirectiveFilterFileExt
	}
	all, err := scenarios.All()
	if err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	var names []string
	for _, s := range all {
		if !slices.Contains(args, s.Name) {
			names = append(names, s.Name)
		}
	}
	return withPrefix(names, "", toComplete), cobra.ShellCompDirectiveNoFileComp
}

// withPrefix returns base+v for every value v that starts with cur.
func withPrefix(values []string, base, cur string) []string {
	var out []string
	for _, v := range values {
		if strings.HasPrefix(v, cur) {
			out = append(out, base+v)
		}
	}
	return out
}

// splitLast splits s after the last sep: "a,b,c" gives "a,b," and "c".
func splitLast(s, sep string) (done, cur string) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return "", s
	}
	return s[:i+len(sep)], s[i+len(sep):]
}
