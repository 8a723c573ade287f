package gpu

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Scrape reads GPU series from a running dcgm-exporter's /metrics, for
// run reports when tokenprobe runs away from the GPUs.
type Scrape struct {
	URL    string
	client *http.Client
}

// NewScrape reads url (http://host:9400/metrics).
func NewScrape(url string) *Scrape {
	return &Scrape{URL: url, client: &http.Client{Timeout: 5 * time.Second}}
}

func (s *Scrape) Name() string { return "dcgm-exporter" }
func (s *Scrape) Close() error { s.client.CloseIdleConnections(); return nil }

func (s *Scrape) Read(ctx context.Context) ([]Sample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/plain; version=0.0.4")
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: HTTP %d", s.URL, resp.StatusCode)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.URL, err)
	}
	byUUID := map[string]*Sample{}
	var order []string
	for name, mf := range families {
		if _, known := ByName(name); !known {
			continue
		}
		for _, m := range mf.Metric {
			l := map[string]string{}
			for _, lp := range m.Label {
				l[lp.GetName()] = lp.GetValue()
			}
			key := l["UUID"] + "/" + l["gpu"]
			smp := byUUID[key]
			if smp == nil {
				idx, _ := strconv.ParseUint(l["gpu"], 10, 32)
				smp = &Sample{GPU: GPU{Index: uint(idx), UUID: l["UUID"], PCIBusID: l["pci_bus_id"], Device: l["device"],
					ModelName: l["modelName"], Hostname: l["Hostname"]}, Values: map[string]float64{}}
				byUUID[key] = smp
				order = append(order, key)
			}
			switch {
			case m.Gauge != nil:
				smp.Values[name] = m.Gauge.GetValue()
			case m.Counter != nil:
				smp.Values[name] = m.Counter.GetValue()
			case m.Untyped != nil:
				smp.Values[name] = m.Untyped.GetValue()
			}
		}
	}
	if len(order) == 0 {
		return nil, fmt.Errorf("%s: no DCGM series", s.URL)
	}
	out := make([]Sample, 0, len(order))
	slices.Sort(order)
	for _, k := range order {
		out = append(out, *byUUID[k])
	}
	return out, nil
}
