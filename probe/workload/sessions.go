package workload

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"sync"
	"time"
)

// Session is a multi-turn conversation: its turns are sent one after the
// other, each with the conversation so far, as a chat user would.
type Session struct {
	ID    string
	Turns []Turn
}

// Turn is one user message of a session.
type Turn struct {
	Text string
	// Delay is the pause before this turn is sent, after the previous
	// answer ended (a user reading and typing); ignored on the first turn.
	Delay time.Duration
	// OutputTokens caps the answer; 0 leaves it to the workload's lengths.
	OutputTokens int
	// Expect is what the answer must match (Entry.Expect).
	Expect *regexp.Regexp
}

// multiTurnLine is one line of AIPerf's multi_turn JSONL: a whole session
// ({"session_id", "turns": [...]}) or one turn of a session named by
// session_id (lines with the same session_id are its turns, in order).
type multiTurnLine struct {
	SessionID *string    `json:"session_id"`
	Turns     []turnLine `json:"turns"`
	turnLine
}

type turnLine struct {
	singleTurn
	Delay *float64 `json:"delay"` // milliseconds
}

func (t turnLine) turn() (Turn, error) {
	e, err := t.entry("the turn's text")
	if err != nil {
		return Turn{}, err
	}
	out := Turn{Text: e.Text, OutputTokens: e.OutputTokens, Expect: e.Expect}
	if t.Delay != nil {
		if *t.Delay < 0 {
			return Turn{}, fmt.Errorf("delay must not be negative")
		}
		out.Delay = time.Duration(*t.Delay * float64(time.Millisecond))
	}
	return out, nil
}

// ReadMultiTurn reads a JSONL file of sessions in AIPerf's multi_turn
// shape. Delays are in milliseconds. Errors name the file and line.
func ReadMultiTurn(path string) ([]Session, error) {
	var out []Session
	index := map[string]int{}
	err := eachLine(path, func(text string) error {
		var l multiTurnLine
		if err := decodeStrict(text, &l); err != nil {
			return err
		}
		if l.SessionID == nil || strings.TrimSpace(*l.SessionID) == "" {
			return fmt.Errorf("session_id is required")
		}
		id := *l.SessionID
		var turns []Turn
		if l.Turns != nil {
			if l.Text != nil || l.Texts != nil || l.Delay != nil || l.OutputLength != nil {
				return fmt.Errorf("give turns, or one turn's fields, not both")
			}
			if len(l.Turns) == 0 {
				return fmt.Errorf("turns is empty")
			}
			for i, tl := range l.Turns {
				t, err := tl.turn()
				if err != nil {
					return fmt.Errorf("turns[%d]: %w", i, err)
				}
				turns = append(turns, t)
			}
		} else {
			t, err := l.turn()
			if err != nil {
				return err
			}
			turns = []Turn{t}
		}
		if i, ok := index[id]; ok {
			out[i].Turns = append(out[i].Turns, turns...)
			return nil
		}
		index[id] = len(out)
		out = append(out, Session{ID: id, Turns: turns})
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no sessions", path)
	}
	return out, nil
}

// SessionSource hands out multi-turn sessions.
type SessionSource interface {
	NextSession() Session
	// Streaming says whether turns ask for streamed answers.
	Streaming() bool
}

// Sessions hands out a file's sessions in order or at random, with
// answer lengths drawn for turns that set none.
type Sessions struct {
	sessions []Session
	random   bool
	output   Lengths
	stream   bool
	mu       sync.Mutex
	next     int
	rng      *rand.Rand
}

// NewSessions samples sessions sequentially (wrapping around) or at random.
func NewSessions(sessions []Session, random bool, output Lengths, stream bool, seed uint64) *Sessions {
	return &Sessions{sessions: sessions, random: random, output: output, stream: stream, rng: rand.New(rand.NewPCG(seed, 0x5e55))}
}

// Streaming says whether turns ask for streamed answers.
func (s *Sessions) Streaming() bool { return s.stream }

// NextSession returns the next session, every turn's answer length set.
func (s *Sessions) NextSession() Session {
	s.mu.Lock()
	defer s.mu.Unlock()
	var src Session
	if s.random {
		src = s.sessions[s.rng.IntN(len(s.sessions))]
	} else {
		src = s.sessions[s.next%len(s.sessions)]
		s.next++
	}
	out := Session{ID: src.ID, Turns: make([]Turn, len(src.Turns))}
	for i, t := range src.Turns {
		if t.OutputTokens == 0 {
			t.OutputTokens = s.output.sample(s.rng)
		}
		out.Turns[i] = t
	}
	return out
}
