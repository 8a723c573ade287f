package stats

import (
	"cmp"
	"slices"

	"github.com/tokenprobe/tokenprobe/probe/result"
)

// ServedModel is a model the answers of a run named, and how many did.
type ServedModel struct {
	Name     string `json:"name"`
	Requests int    `json:"requests"`
}

// maxServedNames bounds the distinct model names a run counts: a gateway
// that names a new model in every answer must not grow a summary without
// end. Answers naming a model past the bound are counted in
// Summary.ServedOther.
const maxServedNames = 8

// maxServedName is how many characters of a name a summary keeps.
const maxServedName = 128

// addServed counts the model r's answer named, if any: the models that
// answered, read from the answers, not the one the model check learned to
// expect.
func (a *Aggregator) addServed(r *result.Request) {
	name := r.ServedModel
	if name == "" || (r.Outcome != result.Success && r.Outcome != result.WrongAnswer) {
		return
	}
	if name != r.Model {
		// A server's string: controls escaped, bounded. The model asked
		// for, the usual answer, is the configuration's own.
		name = cut(name, maxServedName)
	}
	if _, ok := a.served[name]; ok || len(a.served) < maxServedNames {
		if a.served == nil {
			a.served = map[string]int{}
		}
		a.served[name]++
		return
	}
	a.s.ServedOther++
}

// servedSummary is the counted models, the most frequent first (of
// equals, by name, so that a summary does not change between
// computations).
func (a *Aggregator) servedSummary() []ServedModel {
	if len(a.served) == 0 {
		return nil
	}
	out := make([]ServedModel, 0, len(a.served))
	for n, c := range a.served {
		out = append(out, ServedModel{Name: n, Requests: c})
	}
	slices.SortFunc(out, func(x, y ServedModel) int {
		if c := cmp.Compare(y.Requests, x.Requests); c != 0 {
			return c
		}
		return cmp.Compare(x.Name, y.Name)
	})
	return out
}

// ServerText is a name a server sent, as outputs may print it: its
// control characters escaped (a newline forged a console line, an escape
// sequence cleared the screen) and cut to maxServedName characters.
func ServerText(name string) string { return cut(name, maxServedName) }
