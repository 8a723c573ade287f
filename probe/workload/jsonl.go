package workload

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

// eachLine calls fn with every non-blank line of a JSON-lines file; an
// error from fn or the file comes back prefixed with the file and line.
func eachLine(path string, fn func(text string) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		if err := fn(text); err != nil {
			return fmt.Errorf("%s:%d: %w", path, line, err)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s:%d: %w", path, line+1, err)
	}
	return nil
}

// decodeStrict decodes one JSON object, refusing fields v does not have.
func decodeStrict(text string, v any) error {
	dec := json.NewDecoder(strings.NewReader(text))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}
