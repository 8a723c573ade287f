// Package hostile is an OpenAI-compatible endpoint that misbehaves on
// purpose, over raw TCP so that it can break HTTP as well as JSON: the
// servers tokenprobe must survive (deeply nested answers, a body left open
// after [DONE], an echoed API key, a content coding, a protocol switch).
// Tests point endpoints at it; the first path segment of the base URL
// picks the behaviour: http://ADDR/echo-401/v1 answers 401 echoing the
// request's headers.
package hostile

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The behaviours, by the first path segment.
const (
	// Echo401 answers 401 with a JSON body that echoes the request line
	// (its query included) and every request header.
	Echo401 = "echo-401"
	// EchoEvent streams one content chunk, then an `event: error` quoting
	// the Authorization header.
	EchoEvent = "echo-event"
	// EchoContent streams a good answer whose content quotes the
	// Authorization header, then [DONE].
	EchoContent = "echo-content"
	// Nested answers with 1 MB of nested arrays: in an SSE line when the
	// request streams, else as a JSON body of 4 MB (the client's own tests
	// send 40 MB).
	Nested = "nested"
	// Drain streams a good answer and [DONE], then leaves the chunked body
	// open and the connection silent.
	Drain = "drain"
	// Gzip answers with Content-Encoding: gzip.
	Gzip = "gzip"
	// Switch answers 101 Switching Protocols and then WebSocket bytes.
	Switch = "switch"
	// ManyChunks streams ManyChunksBytes of minimal valid content
	// chunks (over a million), whatever max_tokens asked for: memory must
	// not grow with them.
	ManyChunks = "many-chunks"
	// AbsurdUsage streams a short good answer whose usage claims
	// 9223372036854775807 completion tokens and 1e30 prompt tokens.
	AbsurdUsage = "absurd-usage"
	// Escapes answers 500 with an error message carrying a newline that
	// forges a log line, a carriage return and the escape that clears a
	// terminal.
	Escapes = "escapes"
	// BigAnswer streams a healthy answer whose content is a JSON array of
	// BigAnswerBytes, in content chunks of 256 KiB (80 of them): an answer check that
	// holds the whole answer as values holds it at 40 to 70 times that.
	BigAnswer = "big-answer"
	// BigToolArgs streams one tool call to "lookup" whose arguments are a
	// JSON object of BigToolArgsBytes, in argument deltas of 256 KiB:
	// a tool check that held the arguments whole would hold 50 MB per
	// request.
	BigToolArgs = "big-tool-args"
	// BigVector answers an embeddings request (any request) with one
	// vector of BigVectorBytes of numbers, not streamed: a reader that
	// holds the body whole holds it at up to twice its size.
	BigVector = "big-vector"
	// Silent reads the request and never answers, holding the connection
	// open: a model server, or an OTLP collector, that accepts and hangs.
	Silent = "silent"
	// EndlessLine streams one SSE line that never ends: "data: " and then
	// bytes without a newline, in chunks of 64 KiB, until the client
	// hangs up. A reader must cut it at its line limit, holding no more.
	EndlessLine = "endless-line"
	// TokenPerFetch is an OAuth2 token endpoint (Google's refresh-token
	// grant, any path below it) that answers every fetch with a new
	// access token of TokenPerFetchBytes, expiring in a second: a client
	// that kept every token it used would grow without end.
	TokenPerFetch = "token-per-fetch"
	// LogprobFlood streams 100 content chunks (within the client's bound
	// on chunks for any max_tokens over 12), each carrying
	// log-probabilities for 1,000 tokens, about 5 MB, whatever
	// top_logprobs asked for: a model-identity probe must keep no more
	// than its bounds.
	LogprobFlood = "logprob-flood"
)

// TokenPerFetchBytes is the size of TokenPerFetch's tokens.
const TokenPerFetchBytes = 60 << 10

// BigAnswerBytes is the size of BigAnswer's content.
const BigAnswerBytes = 20 << 20

// BigToolArgsBytes is the size of BigToolArgs' arguments: under the
// client's 64 MiB body limit, so that only the checks' bound holds them.
const BigToolArgsBytes = 50 << 20

// BigVectorBytes is the size of BigVector's vector: under the client's
// 64 MiB body limit.
const BigVectorBytes = 60 << 20

// BigVectorDimensions is the length of BigVector's vector ("0.1," is 4
// bytes).
const BigVectorDimensions = BigVectorBytes / 4

// toolDelta is a chat chunk carrying part of a tool call's arguments.
func toolDelta(name, args string) string {
	a, _ := json.Marshal(args)
	fn := `"arguments":` + string(a)
	if name != "" {
		fn = `"name":"` + name + `",` + fn
	}
	return `{"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{` + fn + `}}]},"finish_reason":null}]}`
}

// ManyChunksBytes is the size of ManyChunks' answer: under the client's
// 64 MiB body limit, so that only a bound on chunks ends it.
const ManyChunksBytes = 60 << 20

// EscapesMessage is Escapes' error message.
const EscapesMessage = "overloaded\nlevel=error msg=\"forged line\"\r\u001b[2Jcleared"

// tokens numbers TokenPerFetch's tokens, so that each is new.
var tokens atomic.Int64

// Server is a running hostile endpoint.
type Server struct {
	l        net.Listener
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    map[net.Conn]struct{}
	accepted atomic.Int64
	answer   func(conn net.Conn, req *http.Request) bool
}

// Start serves the behaviours above on 127.0.0.1.
func Start() (*Server, error) { return StartFunc(answer) }

// Listen serves the behaviours above on addr (cmd/hostile).
func Listen(addr string) (*Server, error) { return serve(addr, answer) }

// StartFunc serves every request with fn, which writes whatever it likes to
// the raw connection and returns false to close it. The request's body has
// been read.
func StartFunc(fn func(conn net.Conn, req *http.Request) bool) (*Server, error) {
	return serve("127.0.0.1:0", fn)
}

func serve(addr string, fn func(conn net.Conn, req *http.Request) bool) (*Server, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s := &Server{l: l, conns: map[net.Conn]struct{}{}, answer: fn}
	s.wg.Go(s.accept)
	return s, nil
}

// URL is the base URL for behaviour b: http://ADDR/b/v1.
func (s *Server) URL(b string) string { return "http://" + s.l.Addr().String() + "/" + b + "/v1" }

// Addr is the server's host:port.
func (s *Server) Addr() string { return s.l.Addr().String() }

// Connections counts the connections accepted so far.
func (s *Server) Connections() int64 { return s.accepted.Load() }

// Close stops the server and drops every connection, held ones included.
func (s *Server) Close() error {
	err := s.l.Close()
	s.mu.Lock()
	for c := range s.conns {
		_ = c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return err
}

func (s *Server) accept() {
	for {
		conn, err := s.l.Accept()
		if err != nil {
			return
		}
		s.accepted.Add(1)
		s.mu.Lock()
		s.conns[conn] = struct{}{}
		s.mu.Unlock()
		s.wg.Go(func() {
			defer func() {
				s.mu.Lock()
				delete(s.conns, conn)
				s.mu.Unlock()
				_ = conn.Close()
			}()
			br := bufio.NewReader(conn)
			for {
				req, err := http.ReadRequest(br)
				if err != nil {
					return
				}
				_, _ = io.Copy(io.Discard, req.Body)
				if !s.answer(conn, req) {
					return
				}
			}
		})
	}
}

// Hold keeps conn open and silent until the client or Close ends it.
func Hold(conn net.Conn) { _, _ = io.Copy(io.Discard, conn) }

// SSEHead is a chunked text/event-stream response head.
const SSEHead = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"

// Chunk frames s as one chunk of a chunked body.
func Chunk(s string) string { return fmt.Sprintf("%x\r\n%s\r\n", len(s), s) }

// Content is a chat completion chunk carrying text.
func Content(text string) string {
	b, _ := json.Marshal(text)
	return `{"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":` + string(b) + `},"finish_reason":null}]}`
}

func answer(conn net.Conn, req *http.Request) bool {
	behaviour, _, _ := strings.Cut(strings.TrimPrefix(req.URL.Path, "/"), "/")
	auth := req.Header.Get("Authorization")
	stream := strings.Contains(req.Header.Get("Accept"), "text/event-stream")
	switch behaviour {
	case TokenPerFetch:
		n := tokens.Add(1)
		tok := fmt.Sprintf("tok-%08d-", n) + strings.Repeat("x", TokenPerFetchBytes)
		body := `{"access_token":"` + tok + `","token_type":"Bearer","expires_in":1}`
		_, _ = fmt.Fprintf(conn, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		return true
	case Echo401:
		body, _ := json.Marshal(map[string]any{"error": map[string]any{"message": "invalid api key", "request": req.Method + " " + req.RequestURI, "request_headers": req.Header}})
		fmt.Fprintf(conn, "HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		return true
	case EchoEvent:
		msg, _ := json.Marshal(map[string]string{"message": "upstream rejected credentials " + auth})
		_, _ = io.WriteString(conn, SSEHead+Chunk("data: "+Content("a")+"\n\nevent: error\ndata: "+string(msg)+"\n\n")+"0\r\n\r\n")
		return true
	case EchoContent:
		events := "data: " + Content("you sent "+auth) + "\n\ndata: " + Content(" ok") + "\n\ndata: [DONE]\n\n"
		_, _ = io.WriteString(conn, SSEHead+Chunk(events)+"0\r\n\r\n")
		return true
	case Nested:
		if stream {
			line := `{"choices":[{"delta":{"content":"a"}}],"x":` + strings.Repeat("[", 1<<20-100) + "}"
			_, _ = io.WriteString(conn, SSEHead+Chunk("data: "+line+"\n\n")+"0\r\n\r\n")
			return true
		}
		whole := `{"x":` + strings.Repeat("[", 4<<20) + `}`
		fmt.Fprintf(conn, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(whole), whole)
		return true
	case Drain:
		events := "data: " + Content("a") + "\n\ndata: " + Content("b") + "\n\ndata: [DONE]\n\n"
		_, _ = io.WriteString(conn, SSEHead+Chunk(events))
		Hold(conn)
		return false
	case Gzip:
		body := "\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03"
		fmt.Fprintf(conn, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		return true
	case EndlessLine:
		chunk := Chunk(strings.Repeat("z", 64<<10)) // built once: see BigVector
		_, _ = io.WriteString(conn, SSEHead+Chunk("data: "))
		for {
			if _, err := io.WriteString(conn, chunk); err != nil {
				return false // the client ended it
			}
		}
	case ManyChunks:
		event := "data: " + `{"choices":[{"index":0,"delta":{"content":"a"}}]}` + "\n\n"
		piece := Chunk(strings.Repeat(event, 64<<10/len(event)))
		_, _ = io.WriteString(conn, SSEHead)
		for sent := 0; sent < ManyChunksBytes; sent += len(piece) {
			if _, err := io.WriteString(conn, piece); err != nil {
				return false // the client ended it
			}
		}
		_, _ = io.WriteString(conn, Chunk("data: [DONE]\n\n")+"0\r\n\r\n")
		return true
	case LogprobFlood:
		lp := `{"token":"a","logprob":-1.5,"top_logprobs":[]},`
		event := "data: " + `{"choices":[{"index":0,"delta":{"content":"a"},"logprobs":{"content":[` + strings.Repeat(lp, 999) + strings.TrimSuffix(lp, ",") + `]}}]}` + "\n\n"
		piece := Chunk(event)
		_, _ = io.WriteString(conn, SSEHead)
		for range 100 {
			if _, err := io.WriteString(conn, piece); err != nil {
				return false // the client ended it
			}
		}
		_, _ = io.WriteString(conn, Chunk("data: [DONE]\n\n")+"0\r\n\r\n")
		return true
	case AbsurdUsage:
		usage := `{"id":"x","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":1e30,"completion_tokens":9223372036854775807,"total_tokens":99999999999999999999999}}`
		events := "data: " + Content("a") + "\n\ndata: " + Content("b") + "\n\ndata: " + usage + "\n\ndata: [DONE]\n\n"
		_, _ = io.WriteString(conn, SSEHead+Chunk(events)+"0\r\n\r\n")
		return true
	case Escapes:
		body, _ := json.Marshal(map[string]any{"error": map[string]string{"message": EscapesMessage, "type": "server_error"}})
		fmt.Fprintf(conn, "HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		return true
	case BigAnswer:
		piece := strings.Repeat("1,", 128<<10)
		_, _ = io.WriteString(conn, SSEHead+Chunk("data: "+Content("[")+"\n\n"))
		chunk := Chunk("data: " + Content(piece) + "\n\n") // built once: see BigVector
		for sent := 0; sent < BigAnswerBytes; sent += len(piece) {
			if _, err := io.WriteString(conn, chunk); err != nil {
				return false
			}
		}
		end := `{"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`
		_, _ = io.WriteString(conn, Chunk("data: "+Content("1]")+"\n\ndata: "+end+"\n\ndata: [DONE]\n\n")+"0\r\n\r\n")
		return true
	case BigToolArgs:
		// {"a":[1,1,...]}: numbers need no escaping, so the body is the
		// arguments' size, under the client's body limit.
		piece := strings.Repeat("1,", 128<<10)
		_, _ = io.WriteString(conn, SSEHead+Chunk("data: "+toolDelta("lookup", `{"a":[`)+"\n\n"))
		chunk := Chunk("data: " + toolDelta("", piece) + "\n\n") // built once: see BigVector
		for sent := 0; sent < BigToolArgsBytes; sent += len(piece) {
			if _, err := io.WriteString(conn, chunk); err != nil {
				return false
			}
		}
		end := `{"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`
		_, _ = io.WriteString(conn, Chunk("data: "+toolDelta("", "1]}")+"\n\ndata: "+end+"\n\ndata: [DONE]\n\n")+"0\r\n\r\n")
		return true
	case BigVector:
		piece := strings.Repeat("0.1,", 16<<10)
		_, _ = io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"+
			Chunk(`{"object":"list","data":[{"object":"embedding","index":0,"embedding":[`))
		// Each chunk is built once, not once a write: the tests that bound
		// the client's heap run this server in their own process, and 4 x
		// 60 MB of its garbage, swept late on a busy machine, read as the
		// client's (TestBigVectorsReadAsTheyStream: 24.3 MB in CI's busy pass).
		chunk := Chunk(piece)
		for sent := len(piece); sent < BigVectorBytes; sent += len(piece) {
			if _, err := io.WriteString(conn, chunk); err != nil {
				return false
			}
		}
		_, _ = io.WriteString(conn, Chunk(piece[:len(piece)-1]+`]}],"model":"m","usage":{"prompt_tokens":10,"total_tokens":10}}`)+"0\r\n\r\n")
		return true
	case Silent:
		Hold(conn)
		return false
	case Switch:
		_, _ = io.WriteString(conn, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n\x81\x05hello")
		time.Sleep(10 * time.Millisecond)
		return false
	}
	_, _ = io.WriteString(conn, "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
	return true
}

// ErrAnswered is UnansweredAddr's error where connects to a full accept
// queue are answered (or refused) rather than left waiting.
var ErrAnswered = errors.New("connects to a full accept queue are answered here")

// ClosedAddr is a local address where nothing listens (one was, a moment
// ago): an endpoint that refuses every connection.
func ClosedAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}
