package results

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/lockpick-dev/lockpick/checker"
	"github.com/lockpick-dev/lockpick/history"
)

// Checked is a run directory checked in one pass over its history: the verdict, and everything its
// report shows, gathered as the checker read each event.
type Checked struct {
	Result *checker.Result
	dir    string
	data   *runData
	// metaErr is a config.json that could not be read: the verdict stands, the report cannot be
	// written (Write returns it, as Write always has).
	metaErr error
}

// CheckRun checks the history of the run directory dir (what `lockpick check DIR` and the end of
// every run do) and gathers its report's data in the same pass, so the history is read once. opts
// is passed to the checker; its Observe is CheckRun's own. Errors are the checker's (CheckFile).
func CheckRun(dir string, opts checker.Options) (*Checked, error) {
	meta, metaErr := readMeta(dir)
	path := filepath.Join(dir, history.FileName)
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open history: %w", err)
	}
	defer f.Close()
	return checkRun(dir, path, history.NewScanner(f), meta, metaErr, opts)
}

// Write stores the checked run's results in its directory: results.json, summary.txt, the
// visualizations and the report, as Write does, without reading the history again.
func (c *Checked) Write(info RunInfo) error {
	return writeResults(c.dir, c.Result, info, c.report(info))
}

// WriteRecord writes results.json, the record of the verdict. A run says its verdict first, then
// writes this, then WriteDerived: no failure to write can hide the verdict.
func (c *Checked) WriteRecord(info RunInfo) error {
	return writeRecord(c.dir, c.Result, info)
}

// WriteDerived writes the files derived from the record (summary.txt, the visualizations, the
// report), each tried whatever became of the others, and returns every failure.
func (c *Checked) WriteDerived(info RunInfo) []error {
	return writeDerived(c.dir, c.Result, info, c.report(info))
}

func (c *Checked) report(info RunInfo) func() error {
	return func() error {
		if c.metaErr != nil {
			return fmt.Errorf("write report: %w", c.metaErr)
		}
		return writeReport(c.dir, c.Result, info, c.data)
	}
}
