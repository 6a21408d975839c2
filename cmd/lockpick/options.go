package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/lockpick-dev/lockpick/harness"
)

// optionFlags adds the options of harness.Options that command takes, bound to cfg's fields and
// set to their defaults: the table is the only place a run option is spelt.
func optionFlags(f *pflag.FlagSet, command string, cfg *harness.Config) {
	for _, o := range harness.Options() {
		if o.TakenBy(command) {
			addOption(f, o, cfg, o.Default, o.Help)
		}
	}
}

// fileOptionFlags adds the options that may change a scenario file's run (harness.Option.WithFile),
// bound to set: where the file has the option, its default is the file's.
func fileOptionFlags(f *pflag.FlagSet, set *harness.Config) {
	for _, o := range harness.Options() {
		if !o.WithFile {
			continue
		}
		if o.Key == "" {
			addOption(f, o, set, o.Default, o.Help)
			continue
		}
		help, _, _ := strings.Cut(o.Help, " (default")
		addOption(f, o, set, "", help+" (default: the file's)")
	}
}

func addOption(f *pflag.FlagSet, o harness.Option, cfg *harness.Config, def, help string) {
	v := o.Value(cfg)
	if def != "" {
		_ = v.Set(def) // the table's own default: TestOptionDefaultsRoundTrip keeps it parseable
	}
	fl := f.VarPF(v, o.Name, "", help)
	fl.DefValue = def
	if v.IsBoolFlag() {
		fl.NoOptDefVal = "true"
	}
	if o.Bare != "" {
		fl.NoOptDefVal = o.Bare
	}
}

// fileFlags are the flags that may go with a scenario file besides the table's WithFile options.
var fileFlags = []string{"seeds", "junit"}

// withFile reports whether flag name may be given with a scenario file.
func withFile(name string) bool {
	if slices.Contains(fileFlags, name) {
		return true
	}
	o, ok := harness.LookupOption(name)
	return ok && o.WithFile
}

// fileFlagList names the flags that apply with a scenario file, for refusals.
func fileFlagList() string {
	var names []string
	for _, o := range harness.Options() {
		if o.WithFile {
			names = append(names, "--"+o.Name)
		}
	}
	for _, n := range fileFlags {
		names = append(names, "--"+n)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// refuseWithFile refuses the flags given with scenario file that would change what it tests,
// naming the field of the file to set instead.
func refuseWithFile(f *pflag.FlagSet, file string) error {
	var bad, fields, drop []string
	f.Visit(func(fl *pflag.Flag) {
		if withFile(fl.Name) {
			return
		}
		bad = append(bad, "--"+fl.Name)
		o, ok := harness.LookupOption(fl.Name)
		switch {
		case ok && o.Key == "nemeses":
			fields = append(fields, fmt.Sprintf("nemeses: [%s]", fl.Value.String()))
		case ok && o.Key != "":
			fields = append(fields, o.Key+": "+fl.Value.String())
		case ok:
			drop = append(drop, fmt.Sprintf("--%s (%s)", fl.Name, o.NoKey))
		default:
			drop = append(drop, "--"+fl.Name)
		}
	})
	if len(bad) == 0 {
		return nil
	}
	var fix []string
	if len(fields) > 0 {
		fix = append(fix, fmt.Sprintf("set %s in %s instead", strings.Join(fields, ", "), file))
	}
	if len(drop) > 0 {
		fix = append(fix, "drop "+strings.Join(drop, ", "))
	}
	return fmt.Errorf("%s cannot be combined with a scenario file: %s (with a file only %s apply)", strings.Join(bad, ", "), strings.Join(fix, "; "), fileFlagList())
}

// flagError turns a flag that could not be parsed into one line that says what is wanted.
func flagError(cmd *cobra.Command, err error) error {
	var notExist *pflag.NotExistError
	var invalid *pflag.InvalidValueError
	var required *pflag.ValueRequiredError
	switch {
	case errors.As(err, &notExist) && notExist.GetSpecifiedShortnames() == "":
		return unknownFlag(cmd, notExist.GetSpecifiedName())
	case errors.As(err, &invalid):
		return invalidValue(invalid)
	case errors.As(err, &required):
		fl := required.GetFlag()
		return fmt.Errorf("--%s needs a value (for example --%s %s)", fl.Name, fl.Name, example(fl))
	}
	return fmt.Errorf("%w (lockpick %s --help lists the flags)", err, cmd.Name())
}

// unknownFlag names the fix for a flag the command does not take: the scenario file's field when it
// is an option a file sets, the commands that take it, or the nearest flag the command has.
func unknownFlag(cmd *cobra.Command, name string) error {
	if o, ok := harness.LookupOption(name); ok {
		if cmd.Name() == "scenario" && o.Key != "" {
			return fmt.Errorf("--%s is set in the scenario file, not on the command line: set %s: in the file (with a file only %s apply)", name, o.Key, fileFlagList())
		}
	}
	if others := commandsWithFlag(cmd.Root(), name); len(others) > 0 {
		return fmt.Errorf("--%s is not a flag of %s: it applies to lockpick %s", name, cmd.Name(), strings.Join(others, ", "))
	}
	var names []string
	cmd.Flags().VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
	cmd.InheritedFlags().VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
	if near := harness.Nearest(name, names); near != "" {
		return fmt.Errorf("unknown flag --%s: did you mean --%s? (lockpick %s --help lists the flags)", name, near, cmd.Name())
	}
	return fmt.Errorf("unknown flag --%s: lockpick %s --help lists the flags", name, cmd.Name())
}

// commandsWithFlag names the commands that take flag name.
func commandsWithFlag(root *cobra.Command, name string) []string {
	var names []string
	for _, c := range root.Commands() {
		if !c.Hidden && c.Flags().Lookup(name) != nil {
			names = append(names, c.Name())
		}
	}
	return names
}

// invalidValue says what a flag wants instead of the parser's own error (strconv.ParseUint...).
func invalidValue(e *pflag.InvalidValueError) error {
	fl := e.GetFlag()
	if errors.Is(e, harness.ErrZero) {
		return fmt.Errorf("--%s %s: give a positive value, or leave --%s out for its default", fl.Name, e.GetValue(), fl.Name)
	}
	want := e.Unwrap().Error()
	switch fl.Value.Type() {
	case "int", "int64", "int32":
		want = "must be a whole number"
	case "uint", "uint64", "uint32", "uint16":
		want = "must be a whole number of at least 0"
	case "duration":
		want = "must be a duration such as 2s or 500ms"
	case "bool":
		want = "must be true or false"
	}
	return fmt.Errorf("--%s %s: %s (for example --%s %s)", fl.Name, e.GetValue(), want, fl.Name, example(fl))
}

// example is a value a flag takes: its default, else a typical value of its type.
func example(fl *pflag.Flag) string {
	if fl.DefValue != "" && fl.DefValue != "0" && fl.DefValue != "0s" && fl.DefValue != "[]" && fl.DefValue != "false" {
		return fl.DefValue
	}
	switch fl.Value.Type() {
	case "duration":
		return "2s"
	case "bool":
		return "true"
	case "int", "uint", "uint64", "int64":
		return "3"
	}
	return "VALUE"
}

// unknownCommand refuses a first word that is no command, naming the nearest one; cobra's own
// message spans several lines.
func unknownCommand(root *cobra.Command, args []string) error {
	if len(args) > 0 && strings.HasPrefix(args[0], "__") {
		return nil // the shell's completion requests, which cobra adds when it runs
	}
	// help and completion are added when cobra runs; add them now, to be found.
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd(args...)
	c, rest, err := root.Find(args)
	if err == nil || c != root || len(rest) == 0 {
		return nil
	}
	if s := root.SuggestionsFor(rest[0]); len(s) > 0 {
		return fmt.Errorf("unknown command %q: did you mean lockpick %s? (lockpick --help lists the commands)", rest[0], s[0])
	}
	return fmt.Errorf("unknown command %q: lockpick --help lists the commands", rest[0])
}

// newOptionsTopic is `lockpick help options`: the table of run options, made from harness.Options
// like --help, for the docs' list of flags and scenario fields.
func newOptionsTopic() *cobra.Command {
	return &cobra.Command{Use: "options", Short: "The options of a run: each flag, its scenario file field, default and commands", Long: optionsDoc()}
}

// optionsDoc renders harness.Options as a markdown table.
func optionsDoc() string {
	var b strings.Builder
	b.WriteString("Each option of a run is a flag and, where a scenario file may set it, a field of the file.\n")
	b.WriteString("With a scenario file only the options marked \"with a file\" may be given as flags.\n\n")
	b.WriteString("| flag | scenario field | type | default | commands | what it sets |\n|---|---|---|---|---|---|\n")
	for _, o := range harness.Options() {
		key := "`" + o.Key + ":`"
		if o.Key == "" {
			key = "none: " + o.NoKey
		}
		if o.Required {
			key += " (required)"
		}
		commands := strings.Join(o.Commands, ", ")
		if o.WithFile {
			commands += "; with a file"
		}
		def := ""
		if o.Default != "" {
			def = "`" + o.Default + "`"
		}
		fmt.Fprintf(&b, "| `--%s` | %s | %s | %s | %s | %s |\n", o.Name, key, o.Kind(), def, commands, strings.ReplaceAll(o.Help, "|", "\\|"))
	}
	return b.String()
}
