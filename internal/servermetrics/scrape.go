package servermetrics

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// maxBody bounds one scrape: a server's whole /metrics is a few hundred
// KiB; anything far beyond is not one.
const maxBody = 32 << 20

// accept asks for the protobuf format first, as Prometheus does, and takes
// the text format from servers that speak only that.
const accept = `application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.7,text/plain;version=0.0.4;q=0.3,*/*;q=0.1`

// Options say where a server's metrics are and how to read them.
type Options struct {
	URL  string
	Kind Kind
	// Model keeps only the samples of this model (their model_name or
	// model label), where the server labels its series by model.
	Model       string
	BearerToken string
	TLS         *tls.Config
	// Interval is how often the series are read during a run (default 1s).
	Interval time.Duration
}

// Source reads one server's metrics.
type Source struct {
	o      Options
	client *http.Client

	mu   sync.Mutex
	kind Kind // resolved, for Auto

	// replicas are the replicas' own sources, for an endpoint's base_urls
	// (NewReplicas); replicaOf is a replica's base URL's host and port,
	// replicaURL that URL as the probe's requests carry it.
	replicas              []*Source
	replicaOf, replicaURL string
}

// New returns a source for o.
func New(o Options) *Source {
	if o.Interval <= 0 {
		o.Interval = time.Second
	}
	if o.Kind == "" {
		o.Kind = Auto
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = o.TLS
	tr.MaxIdleConnsPerHost = 1
	// The page is asked for uncompressed: gzip would cost the measured
	// server CPU on every read of a run (vLLM's and SGLang's /metrics are
	// served by the process that streams the tokens), and a compressor's
	// state (about 1 MB) on each read of the in-process simulator. A page
	// is a few hundred KiB, read once a second at most.
	tr.DisableCompression = true
	s := &Source{o: o, client: &http.Client{Transport: tr, Timeout: min(5*time.Second, max(o.Interval, time.Second))}}
	if o.Kind != Auto {
		s.kind = o.Kind
	}
	return s
}

// Interval is how often the source is read during a run.
func (s *Source) Interval() time.Duration { return s.o.Interval }

// URL is where the source reads, without any user information.
func (s *Source) URL() string {
	u, err := url.Parse(s.o.URL)
	if err != nil {
		return "(an unparsable URL)"
	}
	u.User = nil
	return u.String()
}

// Kind is the configured kind, or the detected one once known.
func (s *Source) Kind() Kind {
	if len(s.replicas) > 0 {
		return s.replicas[0].Kind()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.kind == "" {
		return s.o.Kind
	}
	return s.kind
}

// Close drops idle connections.
func (s *Source) Close() {
	for _, r := range s.replicas {
		r.Close()
	}
	if s.client != nil {
		s.client.CloseIdleConnections()
	}
}

// ErrNoMetrics is a metrics URL that answers 404: a server that serves
// no Prometheus metrics (Ollama), or a wrong path. It is not read again
// in the run.
var ErrNoMetrics = errors.New("this server serves no Prometheus metrics at that URL (HTTP 404): remove server_metrics, or set its url or kind")

// Scrape reads the server's metrics once and keeps what the kind's table
// names.
func (s *Source) Scrape(ctx context.Context) (Snapshot, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.o.URL, nil)
	if err != nil {
		return Snapshot{}, err
	}
	req.Header.Set("Accept", accept)
	if s.o.BearerToken != "" {
		req.Header.Set("Authorization", "Bearer "+s.o.BearerToken)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the URL is the caller's to name
		}
		return Snapshot{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return Snapshot{}, ErrNoMetrics
	}
	if resp.StatusCode != http.StatusOK {
		return Snapshot{}, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	at := time.Now()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return Snapshot{}, err
	}
	format := expfmt.ResponseFormat(resp.Header)
	fams, err := Parse(bytes.NewReader(body), format)
	if err != nil {
		return Snapshot{}, err
	}
	kind := s.Kind()
	if kind == Auto {
		names := make([]string, len(fams))
		for i, f := range fams {
			names[i] = f.GetName()
		}
		if kind = Detect(names); kind == "" {
			return Snapshot{}, errors.New("no series of a known server (vLLM, SGLang, TGI, llama.cpp, NIM, TensorRT-LLM, Dynamo): set server_metrics.kind")
		}
		s.mu.Lock()
		s.kind = kind
		s.mu.Unlock()
	}
	snap := Reduce(fams, kind, s.o.Model)
	snap.At = at
	if format.FormatType() != expfmt.TypeProtoDelim {
		snap.declare(Declared(body))
	}
	return snap, nil
}

// Declared names the families a text page declares with a TYPE line,
// those with no sample too: a labelled family of Python's
// prometheus_client is on the page that way until its first observation,
// and the text decoder drops it.
func Declared(text []byte) []string {
	var names []string
	for line := range bytes.Lines(text) {
		if rest, ok := bytes.CutPrefix(line, []byte("# TYPE ")); ok {
			if name, _, ok := bytes.Cut(rest, []byte(" ")); ok {
				names = append(names, string(name))
			}
		}
	}
	return names
}

// declare marks the roles whose family the page declares.
func (s *Snapshot) declare(names []string) {
	for role, candidates := range Table[s.Kind] {
		for _, c := range candidates {
			if slices.Contains(names, c.Name) {
				s.Families[role] = true
			}
		}
	}
}

// Parse reads a /metrics body with the Prometheus ecosystem's own
// decoders: the protobuf format, or the text format for anything else.
func Parse(r io.Reader, format expfmt.Format) ([]*dto.MetricFamily, error) {
	if format.FormatType() != expfmt.TypeProtoDelim {
		format = expfmt.NewFormat(expfmt.TypeTextPlain)
	}
	dec := expfmt.NewDecoder(r, format)
	var fams []*dto.MetricFamily
	for {
		f := &dto.MetricFamily{}
		if err := dec.Decode(f); err != nil {
			if errors.Is(err, io.EOF) {
				return fams, nil
			}
			return nil, err
		}
		fams = append(fams, f)
	}
}

// Hist is a histogram's state: cumulative counts per upper bound.
type Hist struct {
	Count, Sum float64
	Bounds     []float64
	Cumulative []float64
}

// Snapshot is what one scrape found, by role.
type Snapshot struct {
	At    time.Time
	Kind  Kind
	Hist  map[Role]Hist
	Value map[Role]float64
	// Families are the roles whose family is on the page, with series or,
	// before its first observation, without.
	Families map[Role]bool
	// Started is the server's process start time, 0 where not exported.
	Started float64
}

// has says whether the page has role's family at all.
func (s Snapshot) has(r Role) bool {
	_, h := s.Hist[r]
	_, v := s.Value[r]
	return h || v || s.Families[r]
}

// Reduce keeps the series of kind's table from fams: per role the first
// series present, summed over its samples (averaged, for ratios), only
// model's where samples carry a model label naming it.
func Reduce(fams []*dto.MetricFamily, kind Kind, model string) Snapshot {
	byName := make(map[string]*dto.MetricFamily, len(fams))
	for _, f := range fams {
		byName[f.GetName()] = f
	}
	snap := Snapshot{Kind: kind, Hist: map[Role]Hist{}, Value: map[Role]float64{}, Families: map[Role]bool{}}
	if f := byName[StartTime]; f != nil {
		if v, ok := value(Running, f.Metric); ok {
			snap.Started = v
		}
	}
	for role, candidates := range Table[kind] {
		for _, c := range candidates {
			f := byName[c.Name]
			if f == nil {
				continue
			}
			snap.Families[role] = true
			ms := samples(f, c.Match, model)
			if len(ms) == 0 {
				continue
			}
			if role.IsHistogram() {
				if h, ok := mergeHist(ms); ok {
					snap.Hist[role] = h
					break
				}
				continue
			}
			if v, ok := value(role, ms); ok {
				snap.Value[role] = v
				break
			}
		}
	}
	return snap
}

// samples are f's samples that carry match, and model's only where some
// carry a model label naming it.
func samples(f *dto.MetricFamily, match map[string]string, model string) []*dto.Metric {
	var out, ofModel []*dto.Metric
	for _, m := range f.Metric {
		labels := map[string]string{}
		for _, lp := range m.Label {
			labels[lp.GetName()] = lp.GetValue()
		}
		ok := true
		for k, v := range match {
			ok = ok && labels[k] == v
		}
		if !ok {
			continue
		}
		out = append(out, m)
		if model != "" && (labels["model_name"] == model || labels["model"] == model) {
			ofModel = append(ofModel, m)
		}
	}
	if len(ofModel) > 0 {
		return ofModel
	}
	return out
}

func mergeHist(ms []*dto.Metric) (Hist, bool) {
	var h Hist
	byBound := map[float64]float64{}
	for _, m := range ms {
		hm := m.GetHistogram()
		if hm == nil {
			return Hist{}, false
		}
		h.Count += float64(hm.GetSampleCount())
		if hm.SampleCountFloat != nil {
			h.Count += hm.GetSampleCountFloat()
		}
		h.Sum += hm.GetSampleSum()
		for _, b := range hm.Bucket {
			c := float64(b.GetCumulativeCount())
			if b.CumulativeCountFloat != nil {
				c += b.GetCumulativeCountFloat()
			}
			byBound[b.GetUpperBound()] += c
		}
	}
	for ub := range byBound {
		h.Bounds = append(h.Bounds, ub)
	}
	slices.Sort(h.Bounds)
	for _, ub := range h.Bounds {
		h.Cumulative = append(h.Cumulative, byBound[ub])
	}
	return h, true
}

// value is a counter's or gauge's reading over samples: summed, but
// averaged for the ratios, whose sum means nothing.
func value(role Role, ms []*dto.Metric) (float64, bool) {
	var sum float64
	n := 0
	for _, m := range ms {
		switch {
		case m.Gauge != nil:
			sum += m.Gauge.GetValue()
		case m.Counter != nil:
			sum += m.Counter.GetValue()
		case m.Untyped != nil:
			sum += m.Untyped.GetValue()
		case m.Histogram != nil: // a count kept as a histogram: its sum
			sum += m.Histogram.GetSampleSum()
		default:
			continue
		}
		n++
	}
	if n == 0 || math.IsNaN(sum) {
		return 0, false
	}
	if role == KVCache || role == PrefixHitRate {
		return sum / float64(n), true
	}
	return sum, true
}
