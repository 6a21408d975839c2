package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// exampleFile is a path an example of a command's help names: a word with a slash that ends in a
// file extension (scenarios/x.yaml, ./mylock.py).
var exampleFile = regexp.MustCompile(`(?:^|\s)["']?((?:\./)?[\w.-]+/[\w./-]+\.(?:yaml|yml|md|py|php|json|jsonl|sh))\b`)

// Every file the help's examples name exists in the repository (a newcomer types them from the top
// of a clone); what a user writes himself (mylock.py, my-history.jsonl) is named without a
// directory, or under a directory the repository does not have.
func TestDocsHelpExamplesNameRealFiles(t *testing.T) {
	var walk func(c *cobra.Command)
	checked := 0
	walk = func(c *cobra.Command) {
		for _, m := range exampleFile.FindAllStringSubmatch(c.Example, -1) {
			path := m[1]
			if dir := strings.SplitN(strings.TrimPrefix(path, "./"), "/", 2)[0]; !isDir(filepath.Join("..", "..", dir)) {
				continue
			}
			checked++
			if _, err := os.Stat(filepath.Join("..", "..", path)); err != nil {
				t.Errorf("%s --help: the example names %s, which is not in the repository", c.CommandPath(), path)
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRoot())
	if checked == 0 {
		t.Fatal("no example names a file of the repository: the test checks nothing")
	}
}

func isDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}
