// Package otlp pushes request results to an OpenTelemetry collector over
// OTLP (gRPC or HTTP): the GenAI semantic-convention client instruments as
// exponential histograms, and tokenprobe.* instruments for goodput, SLO
// attainment, in-flight requests and dispatch lag.
package otlp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/semconv/v1.41.0/genaiconv"
	"go.opentelemetry.io/otel/trace"

	"github.com/tokenprobe/tokenprobe/probe"
	"github.com/tokenprobe/tokenprobe/probe/openai"
	"github.com/tokenprobe/tokenprobe/probe/ratelimit"
	"github.com/tokenprobe/tokenprobe/probe/result"
	"github.com/tokenprobe/tokenprobe/probe/slo"
	"github.com/tokenprobe/tokenprobe/probe/stats"
)

// Config says where and how to push. Empty fields fall back to the
// standard OTEL_EXPORTER_OTLP_* environment variables, then to the
// exporters' defaults (localhost:4318 for HTTP, localhost:4317 for gRPC).
type Config struct {
	Protocol string // "http" (default) or "grpc"
	Endpoint string // host:port, or a URL for HTTP
	Insecure bool
	Headers  map[string]string
	Interval time.Duration // export interval (default 15s)
	Timeout  time.Duration // one export (default 10s)
	// Instance names this probe (service.instance.id); default: hostname.
	Instance string
	Version  string
	// Traces exports a span per sampled request (result.Trace.Sampled)
	// and per run, to the same collector.
	Traces bool
	// TraceState is the W3C tracestate the spans carry (the one each
	// request sent), none when empty.
	TraceState string
	// Location, when set, is the resource's tokenprobe.location: where
	// the probe runs (--probe.location).
	Location string
	// Dropped, when set, hears of every span and metric point that an
	// export failed to deliver, or that shutdown gave up on (signal is
	// SignalTraces or SignalMetrics): tokenprobe_otlp_dropped_total.
	Dropped func(signal string, n int64)
}

// Enabled reports whether OTLP export is asked for by the environment.
func EnvEnabled() bool {
	return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT") != ""
}

// EnvHeaderValues returns the header values of OTEL_EXPORTER_OTLP_HEADERS
// and OTEL_EXPORTER_OTLP_METRICS_HEADERS ("k=v,k2=v2", values URL-encoded,
// as the specification writes them): credentials, to be redacted wherever
// a collector's answer is quoted.
func EnvHeaderValues() []string {
	var out []string
	for _, name := range []string{"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_METRICS_HEADERS"} {
		for pair := range strings.SplitSeq(os.Getenv(name), ",") {
			_, v, ok := strings.Cut(pair, "=")
			if !ok {
				continue
			}
			v = strings.TrimSpace(v)
			if dec, err := url.PathUnescape(v); err == nil && dec != v {
				out = append(out, dec)
			}
			out = append(out, v)
		}
	}
	return out
}

// LogErrors sends the OpenTelemetry SDK's errors (a failed push, with what
// the collector answered) to log, in place of the SDK's default of the
// standard logger: log redacts secrets a collector may echo back.
func LogErrors(log *slog.Logger) {
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("otlp push failed", "err", err)
	}))
}

// Exporter is a probe.Sink that records into an OpenTelemetry meter.
type Exporter struct {
	losses   *losses
	provider *sdkmetric.MeterProvider
	tracer   *tracer // nil without Config.Traces
	// sim exports the built-in simulators' server spans, as a service of
	// their own (tokenprobe-sim); nil without Config.Traces.
	sim *sdktrace.TracerProvider

	duration, ttfc, tpoc, lag metric.Float64Histogram
	tokenUsage                metric.Int64Histogram
	requests, good, sloReqs   metric.Int64Counter
	checks                    metric.Int64Counter
	cost                      metric.Float64Counter
	// rateLimit are the limit, remaining and reset gauges, by
	// ratelimit.Field.
	rateLimit [3]metric.Float64Gauge

	mu     sync.Mutex
	series map[seriesKey]*series
	live   map[*probe.Run]struct{}
	// breakdowns are the last run's TTFT parts per profile and endpoint.
	breakdowns map[[2]string][]breakdownPoint
	reg        metric.Registration
}

type breakdownPoint struct {
	seconds float64
	attrs   metric.MeasurementOption
}

type seriesKey struct {
	profile, endpoint, model string
	level                    float64
}

// series caches the attribute sets of one label set: building them costs
// allocations that an observation should not pay.
type series struct {
	base, input, output metric.MeasurementOption
	// baseRecord is base as a ready slice: passing opts... reuses it,
	// where a fresh variadic argument would be allocated per gap.
	baseRecord  []metric.RecordOption
	byOutcome   [result.WrongAnswer + 1]metric.MeasurementOption
	byReason    map[result.Reason]metric.MeasurementOption
	met, missed map[slo.Kind]metric.MeasurementOption
	// checks are an answer check's pass and fail attribute sets, made
	// at its first verdict under the exporter's lock.
	checks map[string]*[2]metric.MeasurementOption
	set    func(...attribute.KeyValue) metric.MeasurementOption
	// attrs are base's attributes, and op its GenAI operation, for a
	// request's span.
	attrs []attribute.KeyValue
	op    string
	// cost is the spend's attribute set, made for its first currency;
	// rateLimit the gauges' sets by kind, as /metrics labels them
	// (profile, endpoint and kind alone).
	cost      metric.AddOption
	currency  string
	rateLimit [ratelimit.NumKinds]metric.RecordOption
}

// New starts a meter provider that pushes with cfg.
func New(ctx context.Context, cfg Config) (*Exporter, error) {
	inner, err := newExporter(ctx, cfg)
	if err != nil {
		return nil, err
	}
	l := newLosses(cfg.Dropped)
	exp := countingMetrics{inner, l}
	if cfg.Interval <= 0 {
		cfg.Interval = 15 * time.Second
	}
	if cfg.Instance == "" {
		cfg.Instance, _ = os.Hostname()
	}
	attrs := []attribute.KeyValue{
		semconv.ServiceName("tokenprobe"),
		semconv.ServiceVersion(cfg.Version),
		semconv.ServiceInstanceID(cfg.Instance),
	}
	if cfg.Location != "" {
		attrs = append(attrs, attribute.String("tokenprobe.location", cfg.Location))
	}
	res, err := resource.New(ctx,
		resource.WithSchemaURL(semconv.SchemaURL),
		resource.WithAttributes(attrs...),
		// Not WithTelemetrySDK: its detector speaks a newer semconv schema
		// than v1.41.0, the last with the gen_ai constants, and resources
		// of two schemas do not merge.
		resource.WithFromEnv(),
	)
	if err != nil {
		return nil, fmt.Errorf("otlp resource: %w", err)
	}
	// Exponential histograms: the OTLP counterpart of Prometheus native
	// histograms, with no bucket layout to choose.
	expo := sdkmetric.NewView(sdkmetric.Instrument{Kind: sdkmetric.InstrumentKindHistogram},
		sdkmetric.Stream{Aggregation: sdkmetric.AggregationBase2ExponentialHistogram{MaxSize: 160, MaxScale: 20}})
	provider := sdkmetric.NewMeterProvider(
		sdkmetric.WithResource(res),
		sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp, sdkmetric.WithInterval(cfg.Interval))),
		sdkmetric.WithView(expo),
	)
	e, err := newInstruments(provider)
	if err != nil {
		_ = provider.Shutdown(ctx)
		return nil, err
	}
	e.losses = l
	if cfg.Traces {
		if e.tracer, err = newTracer(ctx, cfg, res, l); err != nil {
			_ = provider.Shutdown(ctx)
			return nil, err
		}
		if e.sim, err = TracerProvider(ctx, cfg, "tokenprobe-sim"); err != nil {
			_ = provider.Shutdown(ctx)
			_ = e.tracer.provider.Shutdown(ctx)
			return nil, err
		}
	}
	return e, nil
}

// SimTracer is the tracer of the built-in simulators' server spans (a
// simulator block in the configuration), each a child of the request's,
// as vLLM's are: nil without Config.Traces.
func (e *Exporter) SimTracer() trace.Tracer {
	if e == nil || e.sim == nil {
		return nil
	}
	return e.sim.Tracer("github.com/tokenprobe/tokenprobe/internal/sim")
}

// signalURL is an endpoint given as a URL, with a collector's bare
// address meaning what the generic OTEL_EXPORTER_OTLP_ENDPOINT means: the
// signal goes to its own path (/v1/metrics, /v1/traces). ok is false for
// a host:port, which the exporters take as it is.
func signalURL(endpoint, path string) (string, bool) {
	u, err := url.Parse(endpoint)
	if err != nil || u.Scheme == "" {
		return "", false
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = path
	}
	return u.String(), true
}

func newExporter(ctx context.Context, cfg Config) (sdkmetric.Exporter, error) {
	switch cfg.Protocol {
	case "", "http", "http/protobuf":
		return otlpmetrichttp.New(ctx, options(cfg, "/v1/metrics", optionSet[otlpmetrichttp.Option, otlpmetrichttp.RetryConfig]{
			otlpmetrichttp.WithEndpointURL, otlpmetrichttp.WithEndpoint, otlpmetrichttp.WithInsecure, otlpmetrichttp.WithHeaders, otlpmetrichttp.WithTimeout, otlpmetrichttp.WithRetry})...)
	case "grpc":
		return otlpmetricgrpc.New(ctx, options(cfg, "", optionSet[otlpmetricgrpc.Option, otlpmetricgrpc.RetryConfig]{
			nil, otlpmetricgrpc.WithEndpoint, otlpmetricgrpc.WithInsecure, otlpmetricgrpc.WithHeaders, otlpmetricgrpc.WithTimeout, otlpmetricgrpc.WithRetry})...)
	}
	return nil, fmt.Errorf("unknown OTLP protocol %q (http or grpc)", cfg.Protocol)
}

// optionSet is one OTLP exporter package's option constructors: the
// metric and trace exporters, over HTTP and gRPC, take the same settings
// under four types.
type optionSet[O any, R retryConfig] struct {
	endpointURL func(string) O // nil: no URL form (gRPC)
	endpoint    func(string) O
	insecure    func() O
	headers     func(map[string]string) O
	timeout     func(time.Duration) O
	retry       func(R) O
}

// retryConfig is any of the four exporters' RetryConfig: each package
// declares its own type of the same struct.
type retryConfig interface {
	~struct {
		Enabled                                      bool
		InitialInterval, MaxInterval, MaxElapsedTime time.Duration
	}
}

// retryWithin is a retry policy whose retries end d after the first
// attempt began.
type retryWithin struct {
	Enabled                                      bool
	InitialInterval, MaxInterval, MaxElapsedTime time.Duration
}

// exportTimeout is one export attempt's default (the exporters' own), and
// retriesFor how many attempts' time an export may spend retrying.
const (
	exportTimeout = 10 * time.Second
	retriesFor    = 2
)

// options are cfg's settings for one exporter; path is its signal's path
// when the endpoint is a URL without one (/v1/metrics, /v1/traces).
func options[O any, R retryConfig](cfg Config, path string, s optionSet[O, R]) []O {
	var opts []O
	if cfg.Endpoint != "" {
		u, ok := "", false
		if s.endpointURL != nil {
			u, ok = signalURL(cfg.Endpoint, path)
		}
		if ok {
			opts = append(opts, s.endpointURL(u))
		} else {
			opts = append(opts, s.endpoint(cfg.Endpoint))
		}
	}
	if cfg.Insecure {
		opts = append(opts, s.insecure())
	}
	if len(cfg.Headers) > 0 {
		opts = append(opts, s.headers(cfg.Headers))
	}
	timeout := exportTimeout
	if cfg.Timeout > 0 {
		timeout = cfg.Timeout
		opts = append(opts, s.timeout(cfg.Timeout))
	}
	// The exporters retry a failed export for up to a minute by default,
	// each attempt with its own timeout: against a collector that never
	// answers, every export then held its batch, and the spans behind it,
	// for a minute. Bounded here: one export is at most about three
	// attempts' time.
	d := retriesFor * timeout
	opts = append(opts, s.retry(R(retryWithin{Enabled: true, InitialInterval: min(d/4, time.Second), MaxInterval: d / 2, MaxElapsedTime: d})))
	return opts
}

func newInstruments(p *sdkmetric.MeterProvider) (*Exporter, error) {
	m := p.Meter("github.com/tokenprobe/tokenprobe", metric.WithSchemaURL(semconv.SchemaURL))
	e := &Exporter{provider: p, series: map[seriesKey]*series{}, live: map[*probe.Run]struct{}{}, breakdowns: map[[2]string][]breakdownPoint{}}
	dur, err1 := genaiconv.NewClientOperationDuration(m)
	ttfc, err2 := genaiconv.NewClientOperationTimeToFirstChunk(m)
	tpoc, err3 := genaiconv.NewClientOperationTimePerOutputChunk(m)
	usage, err4 := genaiconv.NewClientTokenUsage(m)
	e.duration, e.ttfc, e.tpoc, e.tokenUsage = dur.Inst(), ttfc.Inst(), tpoc.Inst(), usage.Inst()
	var err5, err6, err7, err8, err9 error
	e.lag, err5 = m.Float64Histogram("tokenprobe.dispatch_lag", metric.WithUnit("s"),
		metric.WithDescription("How late the probe sent each request against its schedule: the probe's own health."))
	e.requests, err6 = m.Int64Counter("tokenprobe.requests", metric.WithUnit("{request}"),
		metric.WithDescription("Requests finished, by tokenprobe.outcome (success, error, cancelled, wrong_answer) and error.type."))
	e.good, err7 = m.Int64Counter("tokenprobe.requests.good", metric.WithUnit("{request}"),
		metric.WithDescription("Requests that succeeded and met every SLO: goodput is its rate, SLO attainment its ratio to successes and errors."))
	e.sloReqs, err8 = m.Int64Counter("tokenprobe.slo.requests", metric.WithUnit("{request}"),
		metric.WithDescription("Requests counted against one SLO threshold (tokenprobe.slo), tokenprobe.slo.result met or missed."))
	var err11 error
	e.checks, err11 = m.Int64Counter("tokenprobe.answer.checks", metric.WithUnit("{request}"),
		metric.WithDescription("Answers judged by each answer check (tokenprobe.check), tokenprobe.check.result pass or fail; a failure makes the request a wrong_answer."))
	var err12, err13, err14, err15 error
	e.cost, err12 = m.Float64Counter("tokenprobe.cost", metric.WithUnit("{currency}"),
		metric.WithDescription("What the probe's answered requests cost at the endpoint's price, in tokenprobe.currency: the probe's own spend."))
	e.rateLimit[ratelimit.Limit], err13 = m.Float64Gauge("tokenprobe.rate_limit.limit", metric.WithUnit("{request_or_token}"),
		metric.WithDescription("The provider's rate limit in its window, by tokenprobe.rate_limit.kind, as the endpoint's last answer that said it."))
	e.rateLimit[ratelimit.Remaining], err14 = m.Float64Gauge("tokenprobe.rate_limit.remaining", metric.WithUnit("{request_or_token}"),
		metric.WithDescription("What remains of the rate limit in its window, by tokenprobe.rate_limit.kind, as the endpoint's last answer said."))
	e.rateLimit[ratelimit.Reset], err15 = m.Float64Gauge("tokenprobe.rate_limit.reset", metric.WithUnit("s"),
		metric.WithDescription("Seconds until the rate limit's window is full again, by tokenprobe.rate_limit.kind, at the endpoint's last answer that said it."))
	inFlight, err9 := m.Int64ObservableGauge("tokenprobe.requests.in_flight", metric.WithUnit("{request}"),
		metric.WithDescription("Requests sent and not yet finished."))
	breakdown, err10 := m.Float64ObservableGauge("tokenprobe.ttft.breakdown", metric.WithUnit("s"),
		metric.WithDescription("Where the last run's TTFT went, from the server's own metrics: its queue, its prefill, and elsewhere."))
	for _, err := range []error{err1, err2, err3, err4, err5, err6, err7, err8, err9, err10, err11, err12, err13, err14, err15} {
		if err != nil {
			return nil, err
		}
	}
	reg, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		e.mu.Lock()
		defer e.mu.Unlock()
		for run := range e.live {
			o.ObserveInt64(inFlight, run.Progress().InFlight, metric.WithAttributes(
				attribute.String("tokenprobe.profile", run.Profile), attribute.String("tokenprobe.endpoint", run.Endpoint.Name)))
		}
		for _, points := range e.breakdowns {
			for _, p := range points {
				o.ObserveFloat64(breakdown, p.seconds, p.attrs)
			}
		}
		return nil
	}, inFlight, breakdown)
	if err != nil {
		return nil, err
	}
	e.reg = reg
	return e, nil
}

// RunStarted makes a run's in-flight requests observable.
func (e *Exporter) RunStarted(run *probe.Run) {
	if e.tracer != nil {
		e.tracer.runStarted(run)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.live[run] = struct{}{}
}

// RunFinished stops observing a run and keeps where its TTFT went (or
// forgets the last run's, when this one has no breakdown).
func (e *Exporter) RunFinished(run *probe.Run, f probe.Finished) {
	if e.tracer != nil {
		e.tracer.runFinished(run, f)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.live, run)
	key := [2]string{run.Profile, run.Endpoint.Name}
	delete(e.breakdowns, key)
	if f.Summary == nil || f.Summary.Server == nil || f.Summary.Server.Breakdown == nil {
		return
	}
	b := f.Summary.Server.Breakdown
	var points []breakdownPoint
	add := func(phase, stat string, ms float64) {
		points = append(points, breakdownPoint{seconds: ms / 1000, attrs: metric.WithAttributes(
			attribute.String("tokenprobe.profile", run.Profile), attribute.String("tokenprobe.endpoint", run.Endpoint.Name),
			attribute.String("tokenprobe.ttft.phase", phase), attribute.String("tokenprobe.statistic", stat),
			attribute.Bool("tokenprobe.ttft.dominant", phase == b.Dominant))})
	}
	for stat, sp := range map[string]*stats.Split{"mean": &b.Mean, "p50": b.P50} {
		if sp == nil {
			continue
		}
		add("queue", stat, sp.Queue)
		add("elsewhere", stat, sp.Elsewhere)
		if sp.Prefill != nil {
			add("prefill", stat, *sp.Prefill)
		}
		if sp.Outside != nil {
			add("server_other", stat, *sp.ServerOther)
			add("outside_server", stat, *sp.Outside)
		}
	}
	e.breakdowns[key] = points
}

// Observe records one measured request.
func (e *Exporter) Observe(r *result.Request, v slo.Verdict) {
	s := e.get(r)
	ctx := context.Background()
	if e.tracer != nil {
		e.tracer.observe(r, v, s.attrs, s.op)
	}
	if r.Outcome == result.Error {
		e.requests.Add(ctx, 1, s.byReason[r.Reason])
	} else {
		e.requests.Add(ctx, 1, s.byOutcome[r.Outcome])
	}
	e.lag.Record(ctx, r.DispatchLag().Seconds(), s.base)
	for _, c := range r.Checks {
		i := 0
		if !c.Pass {
			i = 1
		}
		e.checks.Add(ctx, 1, e.checkAttrs(s, c.Name)[i])
	}
	if v.Counted {
		if v.Good {
			e.good.Add(ctx, 1, s.base)
		}
		for _, k := range slo.Kinds {
			if v.Checked[k] {
				if v.Met[k] {
					e.sloReqs.Add(ctx, 1, s.met[k])
				} else {
					e.sloReqs.Add(ctx, 1, s.missed[k])
				}
			}
		}
	}
	switch r.Outcome {
	case result.Error:
		e.duration.Record(ctx, r.End.Sub(r.Start).Seconds(), s.byReason[r.Reason])
	case result.Success, result.WrongAnswer:
		e.duration.Record(ctx, r.E2E.Seconds(), s.base)
		if r.HasTTFT() {
			e.ttfc.Record(ctx, r.TTFT.Seconds(), s.base)
		}
		for _, g := range r.Gaps {
			e.tpoc.Record(ctx, g.Seconds(), s.baseRecord...)
		}
		e.tokenUsage.Record(ctx, int64(r.InputTokens), s.input)
		e.tokenUsage.Record(ctx, int64(r.OutputTokens), s.output)
	}
	if r.Cost > 0 {
		e.cost.Add(ctx, r.Cost, e.costAttrs(s, r))
	}
	if rl := r.RateLimit; rl != nil {
		for _, k := range ratelimit.Kinds {
			for f, g := range e.rateLimit {
				if v, ok := rl.Get(k, ratelimit.Field(f), r.End); ok {
					g.Record(ctx, v, s.rateLimit[k])
				}
			}
		}
	}
}

// costAttrs is the spend's attribute set of s in r's currency: made at
// the first request with a cost, and again only if the currency changes
// (a reload's new price).
func (e *Exporter) costAttrs(s *series, r *result.Request) metric.AddOption {
	e.mu.Lock()
	defer e.mu.Unlock()
	if s.cost == nil || s.currency != r.Currency {
		s.cost, s.currency = metric.WithAttributes(attribute.String("tokenprobe.profile", r.Profile), attribute.String("tokenprobe.endpoint", r.Endpoint),
			attribute.String("tokenprobe.currency", r.Currency)), r.Currency
	}
	return s.cost
}

func (e *Exporter) get(r *result.Request) *series {
	k := seriesKey{r.Profile, r.Endpoint, r.Model, r.Level}
	e.mu.Lock()
	defer e.mu.Unlock()
	if s := e.series[k]; s != nil {
		return s
	}
	// The API's protocol names the operation and the provider as the
	// conventions do (the Responses and Messages APIs are chat).
	api := openai.Of(openai.API(r.API))
	op, provider := semconv.GenAIOperationNameKey.String(api.Operation), semconv.GenAIProviderNameKey.String(api.Provider)
	base := []attribute.KeyValue{
		op, provider, semconv.GenAIRequestModel(r.Model),
		attribute.String("tokenprobe.profile", r.Profile), attribute.String("tokenprobe.endpoint", r.Endpoint),
		attribute.Float64("tokenprobe.load_level", r.Level),
	}
	if host, port := hostPort(r.URL); host != "" {
		base = append(base, semconv.ServerAddress(host))
		if port > 0 {
			base = append(base, semconv.ServerPort(port))
		}
	}
	set := func(extra ...attribute.KeyValue) metric.MeasurementOption {
		return metric.WithAttributeSet(attribute.NewSet(append(append([]attribute.KeyValue{}, base...), extra...)...))
	}
	s := &series{
		attrs:    base,
		op:       op.Value.AsString(),
		base:     set(),
		input:    set(semconv.GenAITokenTypeInput),
		output:   set(semconv.GenAITokenTypeOutput),
		byReason: map[result.Reason]metric.MeasurementOption{},
		met:      map[slo.Kind]metric.MeasurementOption{},
		missed:   map[slo.Kind]metric.MeasurementOption{},
		checks:   map[string]*[2]metric.MeasurementOption{},
		set:      set,
	}
	s.baseRecord = []metric.RecordOption{s.base}
	for _, o := range result.Outcomes {
		s.byOutcome[o] = set(attribute.String("tokenprobe.outcome", o.String()))
	}
	for _, reason := range result.Reasons {
		s.byReason[reason] = set(attribute.String("tokenprobe.outcome", "error"), semconv.ErrorTypeKey.String(reason.String()))
	}
	for _, kind := range slo.Kinds {
		s.met[kind] = set(attribute.String("tokenprobe.slo", kind.String()), attribute.String("tokenprobe.slo.result", "met"))
		s.missed[kind] = set(attribute.String("tokenprobe.slo", kind.String()), attribute.String("tokenprobe.slo.result", "missed"))
	}
	for _, kind := range ratelimit.Kinds {
		s.rateLimit[kind] = metric.WithAttributes(attribute.String("tokenprobe.profile", r.Profile), attribute.String("tokenprobe.endpoint", r.Endpoint),
			attribute.String("tokenprobe.rate_limit.kind", kind.String()))
	}
	e.series[k] = s
	return s
}

// checkAttrs are the pass and fail attribute sets of check name in s.
func (e *Exporter) checkAttrs(s *series, name string) *[2]metric.MeasurementOption {
	e.mu.Lock()
	defer e.mu.Unlock()
	c := s.checks[name]
	if c == nil {
		check := attribute.String("tokenprobe.check", name)
		c = &[2]metric.MeasurementOption{s.set(check, attribute.String("tokenprobe.check.result", "pass")),
			s.set(check, attribute.String("tokenprobe.check.result", "fail"))}
		s.checks[name] = c
	}
	return c
}

func hostPort(raw string) (string, int) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "", 0
	}
	host, portStr, err := net.SplitHostPort(u.Host)
	if err != nil {
		host = u.Host
		switch u.Scheme {
		case "https":
			portStr = "443"
		case "http":
			portStr = "80"
		}
	}
	port, _ := strconv.Atoi(portStr)
	return host, port
}

// Shutdown pushes what is left and stops the providers, within ctx: a
// collector that never answers holds it no longer. The spans it could not
// push by then are counted dropped, as failed exports are.
func (e *Exporter) Shutdown(ctx context.Context) error {
	if e.reg != nil {
		_ = e.reg.Unregister()
	}
	// The exports still waiting on the collector when the deadline passed
	// end too: nothing of the exporter goes on after Shutdown.
	defer e.losses.cancel()
	// At once, not one after the other: a collector that never answers
	// must not leave the last metrics no time of their own.
	var wg sync.WaitGroup
	var terr, serr error
	if e.tracer != nil {
		wg.Go(func() {
			terr = e.tracer.provider.Shutdown(ctx)
			e.losses.settle()
		})
	}
	if e.sim != nil {
		wg.Go(func() { serr = e.sim.Shutdown(ctx) })
	}
	merr := e.provider.Shutdown(ctx)
	wg.Wait()
	return errors.Join(merr, terr, serr)
}

// ForceFlush pushes now.
func (e *Exporter) ForceFlush(ctx context.Context) error {
	var terr error
	if e.tracer != nil {
		terr = e.tracer.provider.ForceFlush(ctx)
	}
	return errors.Join(e.provider.ForceFlush(ctx), terr)
}
