package systems

import (
	"os/exec"
	"reflect"
	"strings"
	"testing"
)

// Nodes go round-robin on the hosts in the layout's order, a host's k-th node on port 17001+k-1.
func TestPlaceOnHostsRoundRobin(t *testing.T) {
	nodes := []Node{{Name: "n1"}, {Name: "n2"}, {Name: "n3"}, {Name: "n4"}, {Name: "n5"}}
	got := PlaceOnHosts([]string{"a", "b", "c"}, nodes)
	want := map[string][]PlacedNode{
		"a": {{"n1", 17001}, {"n4", 17002}},
		"b": {{"n2", 17001}, {"n5", 17002}},
		"c": {{"n3", 17001}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("PlaceOnHosts = %v, want %v", got, want)
	}
}

// The greps find rules by their comment as iptables -S prints it (quoted when it holds a colon,
// bare otherwise), a run's grep only that run's rules, clean's every run's: checked by a real grep.
func TestGrepCommentFindsRulesAsIptablesPrintsThem(t *testing.T) {
	lines := []string{
		`-A INPUT -s 10.77.0.1/32 -p tcp -m tcp --dport 17001 -m comment --comment "lockpick-ssh:run1" -j DROP`,
		`-A OUTPUT -d 10.77.0.1/32 -p tcp -m tcp --sport 17001 -m comment --comment lockpick-ssh:run1 -j DROP`,
		`-A INPUT -s 10.77.0.1/32 -p tcp -m tcp --dport 17002 -m comment --comment "lockpick-ssh:run12" -j DROP`,
		`-A FORWARD -i lp-br0 -o lp-br0 -m comment --comment lockpick-ssh-hosts -j ACCEPT`,
	}
	count := func(grep string) int {
		out, _ := exec.Command("sh", "-c", grep).Output()
		return strings.Count(string(out), "\n")
	}
	input := "printf '%s\\n' " + quoteAll(lines) + " | "
	if n := count(input + grepComment(SSHRuleTag+"run1", false)); n != 2 {
		t.Errorf("the run's grep finds %d of its 2 rules (and none of run12's)", n)
	}
	if n := count(input + grepComment(SSHRuleTag, true)); n != 3 {
		t.Errorf("clean's grep finds %d rules, want the 3 of lockpick's runs (not the test hosts' own)", n)
	}
}

func quoteAll(ss []string) string {
	var q []string
	for _, s := range ss {
		q = append(q, shellQuote(s))
	}
	return strings.Join(q, " ")
}
