package openai

// Embeddings is POST /embeddings: never streamed, answered with vectors
// that are counted as they arrive (ReadEmbeddings), never held.
const Embeddings API = "embeddings"

var embeddings = &Protocol{
	API: Embeddings, Operation: "embeddings", Provider: "openai",
	URL:     at("/embeddings"),
	Root:    "/v1",
	Body:    embeddingsBody,
	Event:   func([]byte, *Chunk) error { return ErrMalformed }, // never streamed
	Whole:   func(data []byte, c *Chunk) error { s := reading(data, c); return s.end(s.embeddings(c)) },
	Read:    ReadEmbeddings,
	Vectors: true,
}

// embeddingsBody sends the prompt and the batch's other inputs, asking
// for floats (the reader counts their dimensions).
func embeddingsBody(b *RequestBody) ([]byte, error) {
	out := append(b.open(), `,"input":[`...)
	out = b.appendPrompt(out, "")
	for _, in := range b.Inputs {
		out = append(out, ',')
		out = appendString(out, in)
	}
	out = append(out, `],"encoding_format":"float"`...)
	return appendExtra(out, b.Extra, "model", "input", "encoding_format")
}

// vector is one item of an embeddings response's data, as it is read:
// the elements of its embedding, and whether each began as a number.
type vector struct {
	dims       int
	notNumbers bool
}

// element counts an element of the embedding, whose first byte is b. A
// vector of strings, nulls or objects has a length but no dimensions:
// ["NaN", null, true, {}] is no vector of 4.
func (v *vector) element(b byte) {
	if b != '-' && (b < '0' || b > '9') {
		v.notNumbers = true
	}
	v.dims++
}

// add counts the vector in c: its dimensions where every vector so far
// had as many, -1 where they differ, NotNumbers once one was not numbers.
func (v *vector) add(c *Chunk) {
	switch {
	case c.Dimensions == NotNumbers:
	case v.notNumbers && v.dims > 0:
		c.Dimensions = NotNumbers
	case c.Vectors == 0:
		c.Dimensions = v.dims
	case v.dims != c.Dimensions && c.Dimensions != 0:
		c.Dimensions = -1
	}
	if v.dims == 0 {
		c.Dimensions = 0
	}
	c.Vectors++
}

// embeddings reads an embeddings response: its vectors counted and
// their dimensions, the prompt's usage, the model. A response with
// vectors is content.
func (s *scanner) embeddings(c *Chunk) error {
	var typ []byte
	err := s.members(func(k []byte) error {
		var err error
		switch string(k) {
		case "data":
			err = s.array(func() error {
				var v vector
				err := s.members(func(k []byte) error {
					if string(k) != "embedding" || s.peek() != '[' {
						return s.skip()
					}
					return s.array(func() error {
						v.element(s.peek())
						return s.skip()
					})
				})
				v.add(c)
				return err
			})
		default:
			err = s.embeddingsMember(c, k, &typ)
		}
		return err
	})
	embeddingsEnd(c, typ)
	return err
}

// embeddingsMember reads an embeddings response's members besides its
// data: the model, usage, an error, the object's type. The stream
// scanner reads these through it too.
func (s *scanner) embeddingsMember(c *Chunk, k []byte, typ *[]byte) error {
	var err error
	switch string(k) {
	case "model":
		c.Model, err = s.strOrSkip()
	case "usage":
		err = s.usage(c)
	case "error":
		err = s.errorMember(c)
	case "object":
		*typ, err = s.strOrSkip()
	default:
		err = s.skip()
	}
	return err
}

// embeddingsEnd says what a whole embeddings response was: an error by
// its object's type, content when it held a vector.
func embeddingsEnd(c *Chunk, typ []byte) {
	if string(typ) == "error" {
		c.Error = true
	}
	c.Content = c.Vectors > 0
}
