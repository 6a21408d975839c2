package browse

import (
	"net/http"
	"slices"
)

// indexPage is what the index template shows.
type indexPage struct {
	Store                    string
	Runs                     []Run
	Total                    int
	Cards                    []Card
	Locks, Nemeses, Verdicts []string
	Lock, Nemesis, Verdict   string
	Counts                   map[string]int
}

func (s *Server) index(w http.ResponseWriter, r *http.Request) {
	runs, cards, err := s.Runs()
	if err != nil {
		http.Error(w, "cannot read the store: "+err.Error(), http.StatusInternalServerError)
		return
	}
	q := r.URL.Query()
	p := indexPage{Store: s.name, Total: len(runs), Cards: cards, Counts: map[string]int{},
		Lock: q.Get("lock"), Nemesis: q.Get("nemesis"), Verdict: q.Get("verdict")}
	for _, run := range runs {
		p.Locks = addUnique(p.Locks, run.Lock)
		p.Nemeses = addUnique(p.Nemeses, run.Nemesis)
		p.Verdicts = addUnique(p.Verdicts, run.Verdict)
		if (p.Lock == "" || run.Lock == p.Lock) && (p.Nemesis == "" || run.Nemesis == p.Nemesis) && (p.Verdict == "" || run.Verdict == p.Verdict) {
			p.Runs = append(p.Runs, run)
			p.Counts[run.Verdict]++
		}
	}
	slices.Sort(p.Locks)
	slices.Sort(p.Nemeses)
	slices.Sort(p.Verdicts)
	render(w, "index", p)
}

func addUnique(list []string, v string) []string {
	if v == "" || slices.Contains(list, v) {
		return list
	}
	return append(list, v)
}
