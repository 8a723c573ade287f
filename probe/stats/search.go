package stats

import (
	"fmt"
	"strings"
)

// Search is what a capacity search found: the highest level tried whose
// SLO attainment met the objective, and each step it took, in order.
type Search struct {
	// Rate says the levels are request rates; otherwise concurrency.
	Rate bool `json:"rate,omitempty"`
	// Capacity is the highest level that met the objective; 0 when none
	// did.
	Capacity  float64 `json:"capacity"`
	Precision float64 `json:"precision"`
	Steps     int     `json:"steps"`
	// Done is false when the step budget ran out before the bracket was
	// as narrow as the precision (or the run was stopped): Capacity is then
	// the best level known, not the search's answer.
	Done  bool         `json:"done"`
	Tried []SearchStep `json:"tried"`
}

// SearchStep is one level a search tried.
type SearchStep struct {
	Level      float64 `json:"level"`
	Attainment float64 `json:"slo_attainment"`
	// Passed is true when the step was shown to meet the objective
	// (Evidence.Outcome met); a step without enough evidence counts as
	// not passed, so a capacity is only ever a level shown to hold.
	Passed   bool     `json:"passed"`
	Evidence Evidence `json:"evidence"`
}

// undecidedSteps names the steps without enough evidence.
func (s *Search) undecidedSteps() string {
	var levels []string
	need := 0
	for _, st := range s.Tried {
		if st.Evidence.Outcome == Undecided {
			levels = append(levels, fmt.Sprintf("%g", st.Level))
			need = max(need, st.Evidence.RequestsToDecide)
		}
	}
	out := fmt.Sprintf("level %s had not enough evidence", strings.Join(levels, ", "))
	if need > 0 {
		out += fmt.Sprintf(" (about %d requests a step would decide it)", need)
	}
	return out
}
