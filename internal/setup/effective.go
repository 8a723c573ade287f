package setup

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/tokenprobe/tokenprobe/internal/config"
)

// Effective is cfg with the defaults setup applies at run time written
// in (config.Load has written its own already): what is in force. cfg is
// not changed.
func Effective(cfg *config.Config) *config.Config {
	out := *cfg
	out.Profiles = make([]*config.Profile, len(cfg.Profiles))
	for i, p := range cfg.Profiles {
		q := *p
		f := FailureOf(&p.Failure, p.Checks.Abort)
		q.Failure = config.Failure{
			Backoff:       config.Backoff{Base: duration(f.BackoffBase), Max: duration(f.BackoffMax)},
			RetryAfterMax: duration(f.RetryAfterMax),
			Abort: config.Abort{MinRequests: &f.AbortMinRequests, ErrorRatio: &f.AbortErrorRatio,
				UnreachableFor: duration(f.AbortUnreachable)},
			MaxErrorRatio:      &f.MaxErrorRatio,
			ScheduleBackoffMax: duration(ScheduleBackoffMax(&p.Failure)),
		}
		if q.Checks.Model == "" {
			q.Checks.Model = "learn"
		}
		if q.Checks.MaxWrongRatio == nil {
			wrong := DefaultMaxWrongRatio
			q.Checks.MaxWrongRatio = &wrong
		}
		stream := p.Workload.Streaming()
		q.Workload.Stream = &stream
		if p.Load.Sweep != nil {
			q.Load.Stages = nil // the sweep says them
		}
		out.Profiles[i] = &q
	}
	out.Endpoints = make([]*config.Endpoint, len(cfg.Endpoints))
	for i, e := range cfg.Endpoints {
		f := *e
		usage := e.Usage()
		f.IncludeUsage = &usage
		out.Endpoints[i] = &f
	}
	if cfg.Tracing != nil {
		t := *cfg.Tracing
		sample := t.SampleRatio()
		t.Sample = &sample
		out.Tracing = &t
	}
	return &out
}

func duration(d time.Duration) *config.Duration {
	c := config.Duration(d)
	return &c
}

// RenderEffective is the configuration in force as YAML, for /config and
// --print-config: Effective(cfg), secrets redacted as config renders
// them, every value in force that the source file does not write marked
// with a "# default" comment (see markDefaults). source is the file cfg
// was loaded from; nil marks nothing.
func RenderEffective(cfg *config.Config, source []byte) ([]byte, error) {
	var doc yaml.Node
	if err := doc.Encode(Effective(cfg)); err != nil {
		return nil, err
	}
	if source != nil {
		var written yaml.Node
		if err := yaml.Unmarshal(source, &written); err != nil {
			return nil, fmt.Errorf("reading the source again: %w", err)
		}
		var root *yaml.Node
		if len(written.Content) > 0 {
			root = written.Content[0]
		}
		markDefaults(&doc, root, "")
	}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, err
	}
	return b.Bytes(), enc.Close()
}

// markDefaults comments every value of n that written (the same place
// in the source file, nil where the file has nothing) does not hold,
// and leaves out those that are zero, empty or null: a field left off
// that means "none" or "off" is not a default in force. A threshold left
// at zero stays, marked "none". key is the mapping key n is the value of.
func markDefaults(n, written *yaml.Node, key string) {
	if written != nil && written.Kind == yaml.AliasNode {
		written = written.Alias
	}
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			markDefaults(c, written, key)
		}
	case yaml.MappingNode:
		kept := n.Content[:0]
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			w := child(written, k.Value)
			if w == nil && zero(v) && !isThreshold(k.Value) {
				continue
			}
			markDefaults(v, w, k.Value)
			kept = append(kept, k, v)
		}
		n.Content = kept
	case yaml.SequenceNode:
		if written == nil && isScalarList(n) {
			n.LineComment = "default"
			return
		}
		for i, c := range n.Content {
			var w *yaml.Node
			if written != nil && written.Kind == yaml.SequenceNode && i < len(written.Content) {
				w = written.Content[i]
			}
			markDefaults(c, w, key)
		}
	case yaml.ScalarNode:
		switch {
		case written != nil:
		case isThreshold(key) && zero(n):
			n.LineComment = "none"
		default:
			n.LineComment = "default"
		}
	}
}

// zero reports whether n holds nothing: a zero, empty or null scalar,
// an empty list, or a mapping of nothing but such.
func zero(n *yaml.Node) bool {
	switch n.Kind {
	case yaml.ScalarNode:
		switch n.Value {
		case "", "0", "0s", "false", "null":
			return true
		}
		return false
	case yaml.SequenceNode:
		return len(n.Content) == 0
	case yaml.MappingNode:
		for i := 1; i < len(n.Content); i += 2 {
			if !zero(n.Content[i]) {
				return false
			}
		}
		return true
	}
	return false
}

// child is the value of key in a written mapping, or nil.
func child(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

func isScalarList(n *yaml.Node) bool {
	for _, c := range n.Content {
		if c.Kind != yaml.ScalarNode {
			return false
		}
	}
	return true
}

// isThreshold reports whether key is a field of the slo block, where
// zero is no threshold: shown as such rather than left out.
func isThreshold(key string) bool { return sloFields[key] }

// sloFields are the slo block's keys, from its type.
var sloFields = func() map[string]bool {
	out := map[string]bool{}
	t := reflect.TypeFor[config.SLO]()
	for i := range t.NumField() {
		if tag, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ","); tag != "" && tag != "-" {
			out[tag] = true
		}
	}
	return out
}()
