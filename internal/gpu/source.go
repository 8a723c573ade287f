package gpu

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// GPU identifies one device as dcgm-exporter labels it.
type GPU struct {
	Index     uint
	UUID      string
	PCIBusID  string
	Device    string // nvidia0
	ModelName string
	Hostname  string
}

func (g GPU) labels() []string {
	return []string{strconv.FormatUint(uint64(g.Index), 10), g.UUID, g.PCIBusID, g.Device, g.ModelName, g.Hostname}
}

// Sample is one reading of one GPU: field series name to value.
type Sample struct {
	GPU    GPU
	Values map[string]float64
}

// Source reads GPU fields: DCGM in-process, an nv-hostengine, or a running
// dcgm-exporter.
type Source interface {
	// Name is the source's kind, for the up metric and the status page.
	Name() string
	Read(ctx context.Context) ([]Sample, error)
	Close() error
}

// ErrUnavailable wraps why a source cannot read GPUs at all.
var ErrUnavailable = errors.New("GPU source unavailable")

// down is a source that never works, carrying the reason.
type down struct {
	name string
	err  error
}

// Down returns a source that reports err on every read.
func Down(name string, err error) Source { return down{name, err} }

func (d down) Name() string                           { return d.name }
func (d down) Read(context.Context) ([]Sample, error) { return nil, d.err }
func (d down) Close() error                           { return nil }

// Collector exports a source's fields under dcgm-exporter's names, and
// tokenprobe_gpu_source_up. A failing source never fails the scrape.
type Collector struct {
	src     Source
	fields  []Field
	timeout time.Duration
	log     *slog.Logger

	mu      sync.Mutex
	lastErr string
}

// UpName is the gauge that says whether the GPU source reads.
const UpName = "tokenprobe_gpu_source_up"

var upDesc = prometheus.NewDesc(UpName, "1 when the GPU source (label source) read its GPUs at the last scrape, 0 when it is missing or failing; GPU series are absent then.", []string{"source"}, nil)

// NewCollector exports fields (all known when empty) read from src.
func NewCollector(src Source, fields []Field, log *slog.Logger) *Collector {
	if len(fields) == 0 {
		fields = Fields
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Collector{src: src, fields: fields, timeout: 5 * time.Second, log: log}
}

// Describe sends only the up gauge: GPU series depend on what the GPUs
// support, so the collector is unchecked for them.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) { ch <- upDesc }

// Collect reads the source once.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	samples, err := c.src.Read(ctx)
	up := 1.0
	if err != nil {
		up = 0
		c.noteErr(err)
	} else {
		c.noteErr(nil)
	}
	ch <- prometheus.MustNewConstMetric(upDesc, prometheus.GaugeValue, up, c.src.Name())
	for _, f := range c.fields {
		desc := prometheus.NewDesc(f.Name, f.Help, Labels, nil)
		vt := prometheus.GaugeValue
		if f.Type == "counter" {
			vt = prometheus.CounterValue
		}
		for _, s := range samples {
			if v, ok := s.Values[f.Name]; ok {
				ch <- prometheus.MustNewConstMetric(desc, vt, v, s.GPU.labels()...)
			}
		}
	}
}

// noteErr logs a change of state once, not every scrape.
func (c *Collector) noteErr(err error) {
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if msg == c.lastErr {
		return
	}
	c.lastErr = msg
	if err != nil {
		c.log.Warn("GPU series disabled", "source", c.src.Name(), "reason", msg)
	} else {
		c.log.Info("GPU source reads", "source", c.src.Name())
	}
}

// Status says whether the source reads, and why not, for the status page.
func (c *Collector) Status() (string, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.src.Name(), c.lastErr
}

// Only is src reduced to the GPUs named in which, by UUID or index: the
// GPUs that serve one endpoint, so that its run reports (utilisation,
// energy per output token) count those alone. With which empty it is src.
func Only(src Source, which []string) Source {
	if src == nil || len(which) == 0 {
		return src
	}
	want := map[string]bool{}
	for _, w := range which {
		want[w] = true
	}
	return only{Source: src, want: want}
}

type only struct {
	Source
	want map[string]bool
}

func (o only) Read(ctx context.Context) ([]Sample, error) {
	all, err := o.Source.Read(ctx)
	if err != nil {
		return nil, err
	}
	var out []Sample
	for _, s := range all {
		if o.want[s.GPU.UUID] || o.want[strconv.FormatUint(uint64(s.GPU.Index), 10)] {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("none of the endpoint's GPUs (%s) is among the %d the source sees", strings.Join(slices.Sorted(maps.Keys(o.want)), ", "), len(all))
	}
	return out, nil
}
