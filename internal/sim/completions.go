package sim

// completionsAPI is OpenAI's legacy Completions API: a prompt, and
// chat's chunks with text in place of deltas, no reasoning, no tools.
var completionsAPI = &api{
	routes: []string{"/v1/completions"},
	text:   chatText, end: chatEnd, whole: chatWhole,
}
