// Package browse is a small web UI over a run store: the runs newest first with their verdicts,
// filters by lock, nemesis and verdict, a page per run (its verdict and findings, its plan, its
// report and files), and report cards as pages.
//
// Every file is read through an os.Root opened on the store, so no request can reach outside it:
// not with "..", not through a symbolic link that points out.
package browse

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"os"
	"sync"

	"github.com/dustin/go-humanize"
	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/extension"
)

//go:embed pages.html
var pagesFS embed.FS

var pages = template.Must(template.New("pages.html").Funcs(template.FuncMap{
	"pct":       func(f float64) string { return fmt.Sprintf("%.1f%%", 100*f) },
	"stamp":     timeTag,
	"breakable": breakable,
	"size":      func(n int64) string { return humanize.Bytes(uint64(max(n, 0))) },
}).ParseFS(pagesFS, "pages.html"))

// Server serves the store. Its zero value is not usable; call New.
type Server struct {
	root *os.Root
	name string // the store as the user named it, for page titles
	mux  *http.ServeMux
	md   goldmark.Markdown

	mu    sync.Mutex
	cache map[string]cached // run directory (slash path inside the store) -> its summary
}

// New opens store. The store must exist.
func New(store string) (*Server, error) {
	root, err := os.OpenRoot(store)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w (give the directory runs were stored in with --store)", store, err)
	}
	s := &Server{root: root, name: store, cache: map[string]cached{},
		md: goldmark.New(goldmark.WithExtensions(extension.GFM))}
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("GET /{$}", s.index)
	s.mux.HandleFunc("GET /run/{path...}", s.run)
	s.mux.Handle("GET /files/", http.StripPrefix("/files/", http.FileServerFS(root.FS())))
	s.mux.HandleFunc("GET /card/{path...}", s.card)
	return s, nil
}

// Close releases the store.
func (s *Server) Close() error { return s.root.Close() }

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// The pages and the stored reports are the store's own; nothing is ever fetched from elsewhere.
	w.Header().Set("X-Content-Type-Options", "nosniff")
	s.mux.ServeHTTP(w, r)
}

func render(w http.ResponseWriter, name string, data any) {
	var buf bytes.Buffer
	if err := pages.ExecuteTemplate(&buf, name, data); err != nil {
		slog.Error("render page", "page", name, "err", err)
		http.Error(w, "cannot render the page", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(buf.Bytes())
}
