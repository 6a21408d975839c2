package browse

import (
	"fmt"
	"html/template"
	"strings"
	"time"
)

// timeTag shows t in UTC, marked as such, inside a <time> element whose datetime the page's script
// rewrites in the reader's own time zone.
func timeTag(t time.Time) template.HTML {
	if t.IsZero() {
		return "—"
	}
	utc := t.UTC()
	return template.HTML(fmt.Sprintf(`<time datetime="%s">%s UTC</time>`,
		utc.Format("2006-01-02T15:04:05.000Z"), utc.Format("2006-01-02 15:04:05")))
}

// breakable lets a browser break a name of joined parts (nemeses "restart,partition", a run name
// "single-restart+partition") after each joint, rather than inside a part.
func breakable(s string) template.HTML {
	r := strings.NewReplacer(",", ",<wbr>", "+", "+<wbr>")
	return template.HTML(r.Replace(template.HTMLEscapeString(s)))
}
