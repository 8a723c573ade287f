package workload

import (
	"strings"
	"sync"

	"github.com/tokenprobe/tokenprobe/probe/client"
)

// IdentityPrompts are the model-identity probe's built-in prompts: short,
// varied, with one natural continuation each, so that a model answers
// them the same way every time under greedy decoding and two models
// rarely answer them alike. A profile uses the first of them.
var IdentityPrompts = []string{
	"Complete the sentence: The capital of France is",
	"Continue the sequence: 2, 4, 8, 16,",
	"Translate into French: good morning, my friend.",
	"Name the largest planet in the solar system and one of its moons.",
	"Write a haiku about rain on a tin roof.",
	"What is 17 multiplied by 23? Show the steps.",
	"Finish the proverb: A bird in the hand is worth",
	"List the first five prime numbers.",
	"Describe the colour of the sky at sunset in one sentence.",
	"Write a Python function that returns the square of a number.",
	"Who wrote the play Romeo and Juliet?",
	"Give three synonyms for the word quick.",
	"Explain in one sentence why ice floats on water.",
	"Spell the word necessary backwards.",
	"What comes after Tuesday in the week?",
	"Write the opening line of a mystery novel set in a lighthouse.",
	"Convert 100 degrees Celsius to Fahrenheit.",
	"Name a mammal that lays eggs.",
	"Summarise the water cycle in two sentences.",
	"What is the chemical symbol for gold?",
	"Count down from ten to one, in words.",
	"Write a limerick about a cat who learns to code.",
	"What is the square root of 144?",
	"Name the four seasons of the year.",
	"Give a one-line definition of entropy.",
	"Which ocean lies between Africa and Australia?",
	"Write a SQL query that counts the rows of a table named orders.",
	"What does the acronym HTTP stand for?",
	"Rewrite this sentence in the passive voice: The dog chased the ball.",
	"List three uses of copper.",
	"What year did the first person walk on the Moon?",
	"Complete the analogy: hot is to cold as day is to",
}

// Identity sends a model-identity probe's prompts, one after the other
// and over again, each asking for MaxTokens tokens, numbered from 1.
type Identity struct {
	Prompts   []string
	MaxTokens int
	Stream    bool

	mu   sync.Mutex
	next int
}

// Next is the next prompt in order.
func (s *Identity) Next() client.Prompt {
	s.mu.Lock()
	i := s.next
	s.next = (s.next + 1) % len(s.Prompts)
	s.mu.Unlock()
	text := s.Prompts[i]
	return client.Prompt{Text: text, InputTokens: len(strings.Fields(text)), MaxTokens: s.MaxTokens, Stream: s.Stream, IdentityPrompt: i + 1}
}
