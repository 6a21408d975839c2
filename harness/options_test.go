package harness

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

// Every option is spelt once: a flag name, a YAML key or the reason a file has none, help, and at
// least one command; no two rows share a flag, a key or a field.
func TestOptionsTableIsWhole(t *testing.T) {
	names, keys, fields := map[string]bool{}, map[string]bool{}, map[uintptr]string{}
	var c Config
	for _, o := range Options() {
		switch {
		case o.Name == "" || strings.HasPrefix(o.Name, "-") || strings.ContainsAny(o.Name, "_ "):
			t.Errorf("option %q: a flag name is lower-case words joined by '-'", o.Name)
		case names[o.Name]:
			t.Errorf("option %s: given twice", o.Name)
		case o.Key == "" && o.NoKey == "":
			t.Errorf("option %s: no YAML key and no reason a scenario file cannot set it", o.Name)
		case o.Key != "" && o.NoKey != "":
			t.Errorf("option %s: a YAML key and a reason for none", o.Name)
		case o.Key != "" && keys[o.Key]:
			t.Errorf("option %s: key %s given twice", o.Name, o.Key)
		case o.Help == "" || len(o.Commands) == 0:
			t.Errorf("option %s: no help or no command takes it", o.Name)
		case o.Required && o.Key == "":
			t.Errorf("option %s: required of a scenario file, which cannot set it", o.Name)
		}
		names[o.Name], keys[o.Key] = true, true
		p := reflect.ValueOf(o.field(&c)).Pointer()
		if prev, dup := fields[p]; dup {
			t.Errorf("options %s and %s set the same field", prev, o.Name)
		}
		fields[p] = o.Name
	}
}

// Every field a user sets has its row: a Config field with a JSON name and no row is a setting that
// can only be reached from Go (the run's own records are listed here).
func TestEveryUserFieldHasAnOption(t *testing.T) {
	recorded := map[string]bool{"Etcd": true, "KeyPrefix": true, "Library": true, "Revision": true, "Version": true, "Command": true, "Spelling": true}
	var c Config
	set := map[uintptr]bool{}
	for _, o := range Options() {
		set[reflect.ValueOf(o.field(&c)).Pointer()] = true
	}
	v := reflect.ValueOf(&c).Elem()
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if !recorded[f.Name] && !set[v.Field(i).Addr().Pointer()] {
			t.Errorf("Config.%s has no row in Options: add one (or list it here as a record of the run)", f.Name)
		}
	}
}

// Defaults round-trip: each row's default, set through its value and read back, is the text the
// row gives, and setting the text read back changes nothing.
func TestOptionDefaultsRoundTrip(t *testing.T) {
	d := Defaults()
	for _, o := range Options() {
		got := o.Value(&d).String()
		want := o.Default
		if want == "" {
			want = o.Value(&Config{}).String()
		}
		if got != want {
			t.Errorf("option %s: default reads back %q, want %q", o.Name, got, want)
		}
		again := d
		if err := o.Value(&again).Set(got); err != nil && !errors.Is(err, ErrZero) {
			t.Errorf("option %s: its own text %q does not parse: %v", o.Name, got, err)
		}
		if !reflect.DeepEqual(again, d) {
			t.Errorf("option %s: setting %q changed the config", o.Name, got)
		}
	}
	if d.Lock != "redlock" || time.Duration(d.TTL) != 2*time.Second || d.Keys != 1 || d.Store != "store" || d.Nemesis != "none" {
		t.Errorf("defaults %+v", d)
	}
}

// A value that does not parse says what is wanted, and a zero where zero means the default is
// refused by every positive option.
func TestOptionValuesSayWhatIsWanted(t *testing.T) {
	var c Config
	for _, tc := range []struct{ name, text, want string }{
		{"seed", "-5", "must be a whole number of at least 0"},
		{"clients", "ten", "must be a whole number"},
		{"ttl", "soon", "must be a duration such as 2s or 500ms"},
		{"careful", "maybe", "must be true or false"},
	} {
		o, _ := LookupOption(tc.name)
		if err := o.Value(&c).Set(tc.text); err == nil || err.Error() != tc.want {
			t.Errorf("--%s %s: %v, want %q", tc.name, tc.text, err, tc.want)
		}
	}
	for _, o := range Options() {
		if o.Positive {
			zero := "0"
			if o.Kind() == "duration" {
				zero = "0s"
			}
			if err := o.Value(&c).Set(zero); !errors.Is(err, ErrZero) {
				t.Errorf("--%s %s: %v, want ErrZero", o.Name, zero, err)
			}
		}
	}
	o, _ := LookupOption("client-cmd")
	if o.Value(&c).Set("python3  my.py --x"); strings.Join(c.ClientCmd, "|") != "python3|my.py|--x" {
		t.Errorf("client-cmd split into %q", c.ClientCmd)
	}
}

// An option is named as the user spelt it: a flag, or a scenario file's key; an option a file
// cannot set keeps its flag.
func TestSpelling(t *testing.T) {
	flags, file := Spelling{}, Spelling{File: "s.yaml"}
	for _, tc := range []struct{ got, want string }{
		{flags.Name("time-limit"), "--time-limit"},
		{file.Name("time-limit"), "time_limit"},
		{file.Name("nemesis"), "nemeses"},
		{file.Name("store"), "--store"},
		{flags.Set("ttl", "2s"), "--ttl 2s"},
		{file.Set("ttl", "2s"), "ttl: 2s"},
		{flags.Set("allow-even-nodes", "true"), "--allow-even-nodes"},
		{file.Set("allow-even-nodes", "true"), "allow_even_nodes: true"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
	err := errors.New("--lock redlock takes an odd number of nodes, got --nodes 4: use --nodes 3, or add --allow-even-nodes (--store is yours)")
	if got := file.Respell(err).Error(); got != "lock redlock takes an odd number of nodes, got nodes 4: use nodes 3, or add allow_even_nodes (--store is yours)" {
		t.Errorf("respelt: %q", got)
	}
	if got := flags.Respell(err); got != err {
		t.Errorf("flags respelt: %v", got)
	}
}

// Resolve's own messages follow the spelling.
func TestResolveSpeaksTheUsersSpelling(t *testing.T) {
	c := Defaults()
	c.TimeLimit = c.TTL
	if err := c.Resolve(); err == nil || !strings.HasPrefix(err.Error(), "--time-limit 2s is not longer than --ttl 2s") {
		t.Errorf("flags: %v", err)
	}
	c = Defaults()
	c.TimeLimit, c.Spelling = c.TTL, Spelling{File: "s.yaml"}
	if err := c.Resolve(); err == nil || !strings.HasPrefix(err.Error(), "time_limit: 2s is not longer than ttl: 2s") || !strings.Contains(err.Error(), "(for example time_limit: 30s)") {
		t.Errorf("file: %v", err)
	}
}

func TestNearest(t *testing.T) {
	names := []string{"seed", "seeds", "store", "time-limit", "recovery"}
	for typed, want := range map[string]string{"sed": "seed", "recovry": "recovery", "time": "time-limit", "zebra": "", "st": ""} {
		if got := Nearest(typed, names); got != want {
			t.Errorf("Nearest(%q) = %q, want %q", typed, got, want)
		}
	}
}
