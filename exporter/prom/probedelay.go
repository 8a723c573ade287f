package prom

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tokenprobe/tokenprobe/internal/catalog"
	"github.com/tokenprobe/tokenprobe/internal/probehealth"
)

var probeDelayDesc = prometheus.NewDesc(catalog.ProbeDelay.Name, catalog.ProbeDelay.Help, nil, nil)

// probeDelayCollector exports the process's scheduling delay
// (internal/probehealth) as a histogram, read at scrape time: the
// monitor's counts are the process's, not any one run's.
type probeDelayCollector struct{}

func (probeDelayCollector) Describe(ch chan<- *prometheus.Desc) { ch <- probeDelayDesc }

func (probeDelayCollector) Collect(ch chan<- prometheus.Metric) {
	count, sum, buckets := probehealth.Cumulative(catalog.ProbeDelay.Buckets)
	ch <- prometheus.MustNewConstHistogram(probeDelayDesc, count, sum, buckets)
}
