package stats

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
	Passed     bool    `json:"passed"`
}
