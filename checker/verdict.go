package checker

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
)

// Verdict is the outcome of a check: valid, invalid or unknown. Its zero value is Unknown, so a
// verdict that was never set can never be mistaken for a pass.
type Verdict int8

// The verdicts.
const (
	// Unknown means the checker could not decide (the history shows too little evidence that the
	// lock was exercised, an analysis ran out of time, or two analyses disagreed); it is never a
	// pass. Result.UnknownReason says why.
	Unknown Verdict = iota
	// Valid means no two holds of one key overlapped, and the history shows the lock was exercised.
	Valid
	// Invalid means at least two holds of one key certainly overlapped.
	Invalid
)

// String returns "valid", "invalid" or "unknown".
func (v Verdict) String() string {
	switch v {
	case Valid:
		return "valid"
	case Invalid:
		return "invalid"
	default:
		return "unknown"
	}
}

// jsonWord is the verdict as results.json spells it: true, false or unknown.
func (v Verdict) jsonWord() string {
	switch v {
	case Valid:
		return "true"
	case Invalid:
		return "false"
	default:
		return "unknown"
	}
}

// ExitCode returns the Jepsen exit code of the verdict: 0 valid, 1 invalid, 2 unknown.
func (v Verdict) ExitCode() int {
	switch v {
	case Valid:
		return 0
	case Invalid:
		return 1
	default:
		return 2
	}
}

// MarshalJSON encodes Valid as true, Invalid as false and Unknown as "unknown", as Jepsen does.
func (v Verdict) MarshalJSON() ([]byte, error) {
	switch v {
	case Valid:
		return []byte("true"), nil
	case Invalid:
		return []byte("false"), nil
	default:
		return []byte(`"unknown"`), nil
	}
}

// UnmarshalJSON accepts true, false and "unknown" (and the strings "true" and "false").
func (v *Verdict) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch string(b) {
	case "true":
		*v = Valid
		return nil
	case "false":
		*v = Invalid
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("verdict: want true, false or \"unknown\", got %s", b)
	}
	switch s {
	case "true":
		*v = Valid
	case "false":
		*v = Invalid
	case "unknown":
		*v = Unknown
	default:
		return fmt.Errorf("verdict: want true, false or \"unknown\", got %q", s)
	}
	return nil
}

// Never is the end time of a hold whose lock promised no deadline and that was never released.
const Never = math.MaxInt64

// FormatTime renders nanoseconds on the run clock (or a duration in nanoseconds) as seconds with
// millisecond precision, e.g. "12.345s"; Never renders as "never".
func FormatTime(ns int64) string {
	if ns == Never {
		return "never"
	}
	return strconv.FormatFloat(float64(ns)/1e9, 'f', 3, 64) + "s"
}

// FormatSpan formats a length of time so that short ones stay visible: "0.318ms", "154.2ms", "2.500s".
// An overlap of a few hundred microseconds is as much a violation as one of a second.
func FormatSpan(ns int64) string {
	switch {
	case ns < 1e6:
		return strconv.FormatFloat(float64(ns)/1e6, 'f', 3, 64) + "ms"
	case ns < 1e9:
		return strconv.FormatFloat(float64(ns)/1e6, 'f', 1, 64) + "ms"
	}
	return FormatTime(ns)
}
