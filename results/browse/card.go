package browse

import (
	"bytes"
	"errors"
	"html/template"
	"io/fs"
	"net/http"
	"path"
	"regexp"
	"strings"

	"github.com/lockpick-dev/lockpick/results"
)

// runDirRef finds run directories named in a card ("store/redlock-restart/20261122T061808.379Z").
var runDirRef = regexp.MustCompile(`(?:[^\s<>"]*/)?([A-Za-z0-9._-]+/\d{8}T\d{6}\.\d{3}Z(?:-\d+)?)`)

// cardPage is a card's markdown rendered, with what the index knows of it.
type cardPage struct {
	Store string
	Card
	Body template.HTML
}

func (s *Server) card(w http.ResponseWriter, r *http.Request) {
	p := r.PathValue("path")
	if !strings.HasSuffix(p, ".md") || !fs.ValidPath(p) {
		http.NotFound(w, r)
		return
	}
	b, err := fs.ReadFile(s.root.FS(), p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			http.NotFound(w, r)
		} else {
			http.Error(w, "cannot read "+p, http.StatusForbidden)
		}
		return
	}
	var out bytes.Buffer
	if err := s.md.Convert(b, &out); err != nil {
		http.Error(w, "cannot render "+p, http.StatusInternalServerError)
		return
	}
	c := readCard(s.root.FS(), path.Dir(p), path.Base(p))
	render(w, "card", cardPage{Store: s.name, Card: c, Body: template.HTML(s.linkRuns(out.String()))})
}

// linkRuns makes the run directories a rendered card names into links to their pages. goldmark
// escapes raw HTML by default (no WithUnsafe), so the card itself cannot inject markup.
func (s *Server) linkRuns(html string) string {
	return runDirRef.ReplaceAllStringFunc(html, func(m string) string {
		rel := runDirRef.FindStringSubmatch(m)[1]
		if _, err := fs.Stat(s.root.FS(), rel+"/"+results.ConfigFile); err != nil {
			return m
		}
		return `<a href="/run/` + template.HTMLEscapeString(rel) + `/">` + m + `</a>`
	})
}
