package sim

import "net/http"

// An api is one API as the simulator serves it, in one file of this
// package: its routes, how its request reads into the request every API
// shares, and how its answer is written, streamed and whole. The
// handler (sim.go) asks an api, never which API it is.
type api struct {
	// routes are the POST patterns it answers (http.ServeMux's).
	routes []string
	// chat: the request is a conversation (messages), not a prompt, and
	// a tool offered may be called.
	chat bool
	// read fills req from the API's own fields once the body is decoded:
	// a non-empty answer is the 400's message.
	read func(req *request, r *http.Request) string
	// thinks: the answer streams ReasoningTokens of reasoning first.
	thinks bool
	// vectors: answered with embeddings, never streamed.
	vectors bool
	// thinking appends reasoning token at, text the answer's chunk from
	// token at, end what ends the stream (usage included); whole writes
	// the answer not streamed.
	thinking, text func(buf []byte, a streamArgs, at int, text string) []byte
	end            func(buf []byte, a streamArgs) []byte
	whole          func(w http.ResponseWriter, a streamArgs, text string)
}

// apis are the APIs the simulator serves.
var apis = []*api{chatAPI, completionsAPI, responsesAPI, messagesAPI, embeddingsAPI, kserveAPI}
