package results

import (
	"encoding/xml"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/lockpick-dev/lockpick/checker"
)

// JUnitSuite is a JUnit XML report, so that a CI pipeline shows lockpick's verdicts as test
// results: an invalid verdict is a failure (its text the violation summary), an unknown verdict or a
// run that could not start is an error.
type JUnitSuite struct {
	XMLName   xml.Name    `xml:"testsuite"`
	Name      string      `xml:"name,attr"`
	Tests     int         `xml:"tests,attr"`
	Failures  int         `xml:"failures,attr"`
	Errors    int         `xml:"errors,attr"`
	Time      float64     `xml:"time,attr"`
	Timestamp string      `xml:"timestamp,attr,omitempty"`
	Cases     []JUnitCase `xml:"testcase"`
}

// JUnitCase is one run, scenario or matrix cell.
type JUnitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      float64       `xml:"time,attr"`
	Failure   *JUnitMessage `xml:"failure,omitempty"`
	Error     *JUnitMessage `xml:"error,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

// JUnitMessage is a failure or an error: a one-line message and the full text.
type JUnitMessage struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

// RunCase is the test case of one checked run: failed when invalid, an error when unknown.
func RunCase(class, name, dir string, res *checker.Result, took time.Duration) JUnitCase {
	c := JUnitCase{Name: name, Classname: class, Time: took.Seconds(), SystemOut: "run stored in " + dir}
	switch res.Valid {
	case checker.Invalid:
		c.Failure = &JUnitMessage{Message: Headline(res), Type: "invalid", Text: res.Summary()}
	case checker.Unknown:
		c.Error = &JUnitMessage{Message: "verdict unknown: " + Headline(res), Type: "unknown", Text: res.Summary()}
	}
	return c
}

// ScenarioCase is the test case of a scenario: failed when the outcome was not the expected one.
func ScenarioCase(name, expect, dir string, res *checker.Result, misses []string, took time.Duration) JUnitCase {
	c := JUnitCase{Name: name, Classname: "lockpick.scenario", Time: took.Seconds(),
		SystemOut: fmt.Sprintf("expected %s; run stored in %s", expect, dir)}
	if len(misses) > 0 {
		c.Failure = &JUnitMessage{Message: fmt.Sprintf("expected %s: not met: %s", expect, strings.Join(misses, "; ")),
			Type: "expectation", Text: res.Summary()}
	}
	return c
}

// ErrorCase is the test case of a run that could not start or crashed.
func ErrorCase(class, name string, err error, took time.Duration) JUnitCase {
	return JUnitCase{Name: name, Classname: class, Time: took.Seconds(),
		Error: &JUnitMessage{Message: err.Error(), Type: "could not run", Text: err.Error()}}
}

// CellCase is the test case of a matrix cell: failed when any seed's verdict was invalid (the text
// holds each such run's summary.txt), an error when any could not run or was unknown.
func CellCase(c *Cell) JUnitCase {
	tc := JUnitCase{Name: c.Lock + " under " + c.Nemesis, Classname: "lockpick.matrix." + c.Lock}
	var text strings.Builder
	var invalid, broken []string
	for _, r := range c.Runs {
		tc.Time += time.Duration(r.Took).Seconds()
		switch {
		case r.Error != "":
			broken = append(broken, fmt.Sprintf("seed %d could not run: %s", r.Seed, r.Error))
		case r.Verdict == checker.Invalid.String():
			s, _ := os.ReadFile(filepath.Join(r.Dir, SummaryFile))
			invalid = append(invalid, fmt.Sprintf("seed %d: %s%s", r.Seed, r.Words(), firstCause(string(s))))
			fmt.Fprintf(&text, "== seed %d (%s)\n%s\n", r.Seed, r.Dir, s)
		case r.Verdict != checker.Valid.String():
			broken = append(broken, fmt.Sprintf("seed %d: verdict %s (%s)", r.Seed, r.Verdict, r.Dir))
		}
	}
	tc.SystemOut = "verdicts: " + c.Tally()
	if c.Expected != "" {
		tc.SystemOut += fmt.Sprintf("; expected %s (%s)", c.Expected, map[bool]string{true: "met", false: "not met"}[c.Matches()])
	}
	switch {
	case len(invalid) > 0:
		tc.Failure = &JUnitMessage{Message: c.Tally() + ": " + strings.Join(invalid, ", "), Type: "invalid", Text: text.String()}
	case len(broken) > 0:
		tc.Error = &JUnitMessage{Message: strings.Join(broken, "; "), Type: "unknown", Text: strings.Join(broken, "\n")}
	}
	return tc
}

// Headline says in one line what a result found: the first violation and its cause, the data-level
// damage, or why the verdict is unknown.
func Headline(res *checker.Result) string {
	var parts []string
	if res.ViolationCount > 0 && len(res.Violations) > 0 {
		v := res.Violations[0]
		why := v.Cause
		if why == "" {
			why = v.Description
		}
		parts = append(parts, fmt.Sprintf("%s; the first at %s: %s", checker.Phrase(checker.FindingViolation, res.ViolationCount), checker.FormatTime(v.OverlapStart), why))
	}
	if res.TokenRegressionCount > 0 {
		parts = append(parts, checker.Phrase(checker.FindingTokenRegression, res.TokenRegressionCount))
	}
	if res.EarlyLossCount > 0 && len(res.EarlyLosses) > 0 {
		parts = append(parts, fmt.Sprintf("%s; the first: %s", checker.Phrase(checker.FindingEarlyLoss, res.EarlyLossCount), res.EarlyLosses[0].Description))
	}
	if res.LateExtendCount > 0 {
		parts = append(parts, checker.Phrase(checker.FindingLateExtend, res.LateExtendCount))
	}
	if rr := res.Resource; rr != nil && rr.Valid != checker.Valid {
		parts = append(parts, fmt.Sprintf("data: %s, %s accepted", checker.Phrase(checker.FindingLostUpdate, int(rr.LostUpdates)), checker.Phrase(checker.FindingStaleWrite, rr.StaleWriteCount)))
	}
	parts = append(parts, res.Errors...)
	if len(parts) == 0 {
		parts = append(parts, res.Verdicts())
	}
	return strings.Join(parts, "; ")
}

// WriteJUnit writes the suite to path, counting its failures and errors. A suite without a Time of
// its own (its wall time) gets the sum of its cases' times, which is its wall time only when they
// ran one after the other.
func WriteJUnit(path string, s JUnitSuite) error {
	s.Tests, s.Failures, s.Errors = len(s.Cases), 0, 0
	sum := s.Time == 0
	for _, c := range s.Cases {
		if sum {
			s.Time += c.Time
		}
		if c.Failure != nil {
			s.Failures++
		}
		if c.Error != nil {
			s.Errors++
		}
	}
	b, err := xml.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("junit: %w", err)
	}
	b = append([]byte(xml.Header), append(b, '\n')...)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("write --junit %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write --junit %s: %w", path, err)
	}
	return nil
}

// firstCause is the first violation's cause from a summary.txt, as ", cause: ...", or "".
func firstCause(summary string) string {
	for _, l := range strings.Split(summary, "\n") {
		if c, ok := strings.CutPrefix(strings.TrimSpace(l), "cause: "); ok {
			return ", cause: " + c
		}
	}
	return ""
}
