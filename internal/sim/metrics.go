package sim

import (
	"bytes"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"
)

// The buckets vLLM's V1 engine uses (vllm/v1/metrics/loggers.py), so that
// what tokenprobe reads from the simulator is as coarse as what it reads
// from a real server.
var (
	vllmTTFTBuckets    = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0}
	vllmITLBuckets     = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0}
	vllmPhaseBuckets   = []float64{0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0}
	vllmLengthBuckets  = prometheus.ExponentialBuckets(1, 2, 16)
	kvTokensPerSlot    = 4096.0
	vllmDefaultLabels  = []string{"model_name", "engine"}
	vllmFinishedLabels = []string{"model_name", "engine", "finished_reason"}
)

// serverMetrics are the series a vLLM server exposes, computed from the
// simulator's own queueing model: the queue time is the time a request
// waited for a slot, and the server's TTFT runs from the request's arrival
// (its queue included) to its first token, as vLLM's does
// (vllm/v1/metrics/stats.py: the first token latency is the time since
// the request's arrival_time), so the gap to what a client measures is
// what lies outside the server.
type serverMetrics struct {
	reg    *prometheus.Registry
	habits MetricsHabits
	// families are the labelled families, for the HELP and TYPE lines a
	// lazy server writes for those not yet observed.
	families []family

	queue, prefill, decode, inference, e2e, ttft, itl, tpot prometheus.Observer
	promptLen, genLen                                       prometheus.Observer
	promptTokens, genTokens, prefixQueries, prefixHits      adder
	success                                                 adder

	// kvTokens is the prompt and output tokens of the running requests,
	// the KV cache they would hold.
	kvTokens atomic.Int64
	// queueNanos and queued are the exact queue time, the truth that
	// tests hold the scraped histograms to.
	queueNanos, queued atomic.Int64
}

type family struct{ name, help, typ string }

// adder is what the simulator does with a counter.
type adder interface {
	Add(float64)
	Inc()
}

// lazyCounter creates its series at its first Add, as a lazy server does.
type lazyCounter struct {
	vec    *prometheus.CounterVec
	labels prometheus.Labels
}

func (c lazyCounter) Add(v float64) { c.vec.With(c.labels).Add(v) }
func (c lazyCounter) Inc()          { c.vec.With(c.labels).Inc() }

func newServerMetrics(h *Handler) *serverMetrics {
	m := &serverMetrics{reg: prometheus.NewRegistry(), habits: h.cfg.Metrics}
	labels := prometheus.Labels{"model_name": h.cfg.Model, "engine": "0"}
	lazy := m.habits.Lazy
	hist := func(name, help string, buckets []float64) prometheus.Observer {
		v := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, vllmDefaultLabels)
		m.reg.MustRegister(v)
		m.families = append(m.families, family{name, help, "histogram"})
		if lazy {
			return prometheus.ObserverFunc(func(x float64) { v.With(labels).Observe(x) })
		}
		return v.With(labels)
	}
	counter := func(name, help string) adder {
		v := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, vllmDefaultLabels)
		m.reg.MustRegister(v)
		m.families = append(m.families, family{name, help, "counter"})
		if lazy {
			return lazyCounter{vec: v, labels: labels}
		}
		return v.With(labels)
	}
	gauge := func(name, help string, f func() float64) {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: labels}, f))
	}
	m.queue = hist("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", vllmPhaseBuckets)
	m.prefill = hist("vllm:request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request.", vllmPhaseBuckets)
	m.decode = hist("vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.", vllmPhaseBuckets)
	m.inference = hist("vllm:request_inference_time_seconds", "Histogram of time spent in RUNNING phase for request.", vllmPhaseBuckets)
	m.e2e = hist("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", vllmPhaseBuckets)
	m.ttft = hist("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", vllmTTFTBuckets)
	m.itl = hist("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", vllmITLBuckets)
	m.tpot = hist("vllm:request_time_per_output_token_seconds", "Histogram of time_per_output_token_seconds per request.", vllmITLBuckets)
	m.promptLen = hist("vllm:request_prompt_tokens", "Number of prefill tokens processed.", vllmLengthBuckets)
	m.genLen = hist("vllm:request_generation_tokens", "Number of generation tokens processed.", vllmLengthBuckets)
	m.promptTokens = counter("vllm:prompt_tokens_total", "Number of prefill tokens processed.")
	m.genTokens = counter("vllm:generation_tokens_total", "Number of generation tokens processed.")
	m.prefixQueries = counter("vllm:prefix_cache_queries_total", "Prefix cache queries, in terms of number of queried tokens.")
	m.prefixHits = counter("vllm:prefix_cache_hits_total", "Prefix cache hits, in terms of number of cached tokens.")
	counter("vllm:num_preemptions_total", "Cumulative number of preemption from the engine.") // the model never preempts
	success := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "vllm:request_success_total", Help: "Count of successfully processed requests."}, vllmFinishedLabels)
	m.reg.MustRegister(success)
	m.families = append(m.families, family{"vllm:request_success_total", "Count of successfully processed requests.", "counter"})
	successLabels := prometheus.Labels{"model_name": h.cfg.Model, "engine": "0", "finished_reason": "length"}
	if lazy {
		m.success = lazyCounter{vec: success, labels: successLabels}
	} else {
		m.success = success.With(successLabels)
	}
	// A restart shows as a new start time, as prometheus_client's process
	// collector gives it on a real server.
	started := float64(time.Now().UnixNano()) / 1e9
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "process_start_time_seconds", Help: "Start time of the process since unix epoch in seconds."},
		func() float64 { return started }))
	gauge("vllm:num_requests_running", "Number of requests in model execution batches.", func() float64 { r, _ := h.slots.load(); return float64(r) })
	gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", func() float64 { _, w := h.slots.load(); return float64(w) })
	capacity := kvTokensPerSlot * float64(h.cfg.Slots)
	gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", func() float64 {
		return min(float64(m.kvTokens.Load())/capacity, 1)
	})

	// The simulator's own series, under its own prefix.
	simGauge := func(name, help string, f func() float64) {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f))
	}
	simGauge("tokenprobe_sim_running_requests", "Requests holding a slot.", func() float64 { r, _ := h.slots.load(); return float64(r) })
	simGauge("tokenprobe_sim_waiting_requests", "Requests waiting for a slot.", func() float64 { _, w := h.slots.load(); return float64(w) })
	simGauge("tokenprobe_sim_slots", "Requests that run at once.", func() float64 { return float64(h.cfg.Slots) })
	m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "tokenprobe_sim_requests_total", Help: "Requests received."},
		func() float64 { return float64(h.requests.Load()) }))
	m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "tokenprobe_sim_faults_total", Help: "Faults injected."},
		func() float64 { return float64(h.faults.Load()) }))
	return m
}

func (m *serverMetrics) handler() http.Handler {
	if !m.habits.Lazy {
		return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
	}
	// A lazy server's page in the text format, as prometheus_client writes
	// it: a labelled family with no series yet is there as its HELP and
	// TYPE lines alone.
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fams, err := m.reg.Gather()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		var buf bytes.Buffer
		written := map[string]bool{}
		for _, f := range fams {
			written[f.GetName()] = true
			if _, err := expfmt.MetricFamilyToText(&buf, f); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
		}
		for _, f := range m.families {
			if !written[f.name] {
				fmt.Fprintf(&buf, "# HELP %s %s\n# TYPE %s %s\n", f.name, f.help, f.name, f.typ)
			}
		}
		w.Header().Set("Content-Type", string(expfmt.NewFormat(expfmt.TypeTextPlain)))
		_, _ = w.Write(buf.Bytes())
	})
}

// lifecycle records one request's way through the model as a vLLM server
// would: arrived, scheduled (given a slot), first token, finished.
type lifecycle struct {
	m                              *serverMetrics
	arrived, scheduled, firstToken time.Time
	lastToken                      time.Time
	inTokens, outTokens            int
	done                           bool
	// span, when set, exports the request's server span at its end.
	span func(l *lifecycle, end time.Time)
}

func (m *serverMetrics) arrive() *lifecycle { return &lifecycle{m: m, arrived: time.Now()} }

// schedule records that the request got a slot; waited says whether it
// found every slot taken.
func (l *lifecycle) schedule(inTokens int, waited bool) {
	l.scheduled = time.Now()
	l.inTokens = inTokens
	q := l.scheduled.Sub(l.arrived)
	if waited || !l.m.habits.QueueOnlyWaited {
		l.m.queue.Observe(q.Seconds())
	}
	l.m.queueNanos.Add(int64(q))
	l.m.queued.Add(1)
	l.m.kvTokens.Add(int64(inTokens))
	l.m.promptTokens.Add(float64(inTokens))
	l.m.prefixQueries.Add(float64(inTokens))
	l.m.promptLen.Observe(float64(inTokens))
}

// tokens records n tokens generated now.
func (l *lifecycle) tokens(n int) {
	now := time.Now()
	if l.firstToken.IsZero() {
		l.firstToken = now
		l.m.prefill.Observe(now.Sub(l.scheduled).Seconds())
		l.m.ttft.Observe(now.Sub(l.arrived).Seconds())
	} else {
		l.m.itl.Observe(now.Sub(l.lastToken).Seconds())
	}
	l.lastToken = now
	l.outTokens += n
	l.m.kvTokens.Add(int64(n))
	l.m.genTokens.Add(float64(n))
}

// finish records the end of a request that got a slot, once; ok says
// whether it ran to its end. It comes before the answer's last write, as
// a server records a request before the client reads its end.
func (l *lifecycle) finish(ok bool) {
	if l.done {
		return
	}
	l.done = true
	l.m.kvTokens.Add(-int64(l.inTokens + l.outTokens))
	if !ok || l.firstToken.IsZero() {
		return
	}
	now := time.Now()
	if l.span != nil {
		l.span(l, now)
	}
	l.m.decode.Observe(now.Sub(l.firstToken).Seconds())
	l.m.inference.Observe(now.Sub(l.scheduled).Seconds())
	l.m.e2e.Observe(now.Sub(l.arrived).Seconds())
	if l.outTokens > 1 {
		l.m.tpot.Observe(l.lastToken.Sub(l.firstToken).Seconds() / float64(l.outTokens-1))
	}
	l.m.genLen.Observe(float64(l.outTokens))
	l.m.success.Inc()
}

// QueueTime is the exact time requests waited for a slot, summed, and how
// many got one (zero waits included): the truth behind
// vllm:request_queue_time_seconds, whose count is smaller where only
// requests that waited are observed (MetricsHabits.QueueOnlyWaited).
func (h *Handler) QueueTime() (total time.Duration, requests int64) {
	return time.Duration(h.sm.queueNanos.Load()), h.sm.queued.Load()
}
