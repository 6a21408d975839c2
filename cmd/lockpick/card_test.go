package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lockpick-dev/lockpick/scenarios"
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

// --from takes the latest stored run of the row's scenario, seed, lock and nemeses, and no other.
func TestStoredRunMatchesTheRow(t *testing.T) {
	s, err := scenarios.Find("etcd-none")
	if err != nil {
		t.Fatal(err)
	}
	store := t.TempDir()
	write := func(name, cfg string) {
		dir := filepath.Join(store, "etcd-none", name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	nem, _ := json.Marshal(s.Config.Nemesis)
	write("20260101T000000.000Z", `{"lock":"etcd","nemesis":`+string(nem)+`,"seed":3,"etcd_server":"system"}`)
	write("20260101T000001.000Z", `{"lock":"etcd","nemesis":`+string(nem)+`,"seed":3,"etcd_server":"current"}`)
	write("20260101T000002.000Z", `{"lock":"etcd","nemesis":"restart","seed":3}`)
	dir, _, err := storedRun(store, s, 3, "")
	if err != nil || filepath.Base(dir) != "20260101T000001.000Z" {
		t.Errorf("latest run of seed 3: %s, %v", dir, err)
	}
	if dir, _, err := storedRun(store, s, 3, "system"); err != nil || filepath.Base(dir) != "20260101T000000.000Z" {
		t.Errorf("run on the system etcd: %s, %v", dir, err)
	}
	if _, _, err := storedRun(store, s, 4, ""); err == nil || !strings.Contains(err.Error(), "seed 4") {
		t.Errorf("a seed never run: %v", err)
	}
}
