package main

import (
	"slices"
	"strings"
	"testing"
)

// A card's rows are the scenario files of the locks it names, and only those.
func TestCardRowsAreTheLocksScenarios(t *testing.T) {
	rows, err := cardRows([]string{"etcd"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range rows {
		if r.Config.Lock != "etcd" {
			t.Errorf("row %s runs lock %s", r.Name, r.Config.Lock)
		}
		names = append(names, r.Name)
	}
	if !slices.Contains(names, "etcd-none") || slices.Contains(names, "etcd-unlock-retry") {
		t.Errorf("rows of etcd: %v", names)
	}
	if _, err := cardRows([]string{"no-such-lock"}); err == nil || !strings.Contains(err.Error(), "unknown lock") {
		t.Errorf("unknown lock: %v", err)
	}
}
