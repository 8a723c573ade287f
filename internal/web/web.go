// Package web is the daemon's HTTP surface: the status page, a page per
// run, /metrics, health and readiness, the running configuration, the runs
// API, and the lifecycle endpoints (reload, run now) when enabled.
package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tokenprobe/tokenprobe/internal/catalog"
	"github.com/tokenprobe/tokenprobe/internal/daemon"
	"github.com/tokenprobe/tokenprobe/internal/report"
	"github.com/tokenprobe/tokenprobe/internal/scheduler"
	"github.com/tokenprobe/tokenprobe/probe/stats"
)

// Options configure the handler.
type Options struct {
	// Lifecycle enables POST /-/reload and POST /api/v1/runs.
	Lifecycle bool
	Gatherer  prometheus.Gatherer
	// Registerer, when set, takes the counter of refused requests
	// (tokenprobe_web_requests_refused_total).
	Registerer prometheus.Registerer
	Logger     *slog.Logger
	Version    string
	// AllowedHosts, when set, are the only Host names served (the port
	// aside): a page elsewhere that rebinds its DNS name to this address
	// gets 403, not the status page or the lifecycle API.
	AllowedHosts []string
}

// Handler serves d.
func Handler(d *daemon.Daemon, o Options) http.Handler {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	m := catalog.WebRefused
	refused := prometheus.NewCounterVec(prometheus.CounterOpts{Name: m.Name, Help: m.Help}, m.Labels)
	for _, reason := range []string{refusedCrossSite, refusedHost, refusedLifecycleOff} {
		refused.WithLabelValues(reason)
	}
	if o.Registerer != nil {
		o.Registerer.MustRegister(refused)
	}
	s := &server{d: d, o: o, cross: http.NewCrossOriginProtection(), refused: refused}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.status)
	mux.HandleFunc("GET /runs/{id}", s.run)
	mux.Handle("GET /metrics", promhttp.HandlerFor(o.Gatherer, promhttp.HandlerOpts{EnableOpenMetrics: true, ErrorLog: slog.NewLogLogger(o.Logger.Handler(), slog.LevelError)}))
	mux.HandleFunc("GET /-/healthy", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "Healthy") })
	mux.HandleFunc("GET /-/ready", s.ready)
	mux.HandleFunc("POST /-/reload", s.lifecycle(s.reload))
	mux.HandleFunc("PUT /-/reload", s.lifecycle(s.reload))
	mux.HandleFunc("GET /config", s.config)
	mux.HandleFunc("GET /api/v1/runs", s.runs)
	mux.HandleFunc("POST /api/v1/runs", s.lifecycle(s.runNow))
	mux.HandleFunc("GET /api/v1/model-identity", s.identity)
	mux.HandleFunc("DELETE /api/v1/model-identity", s.lifecycle(s.forgetIdentity))
	if len(o.AllowedHosts) == 0 {
		return mux
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		if !slices.ContainsFunc(o.AllowedHosts, func(a string) bool { return strings.EqualFold(a, host) }) {
			refused.WithLabelValues(refusedHost).Inc()
			http.Error(w, "host not allowed (--web.allowed-hosts)", http.StatusForbidden)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

type server struct {
	d *daemon.Daemon
	o Options
	// cross refuses state-changing requests a browser sends from another
	// site (Sec-Fetch-Site, else Origin against Host): a page the
	// operator opens must not start load against production endpoints.
	cross *http.CrossOriginProtection
	// refused counts what is refused with 403, in place of a log line
	// each: a page that keeps posting must not flood the log.
	refused *prometheus.CounterVec
}

// Why a request was refused (the counter's reason label).
const (
	refusedCrossSite    = "cross_site"
	refusedHost         = "host"
	refusedLifecycleOff = "lifecycle_disabled"
)

func (s *server) lifecycle(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.o.Lifecycle {
			s.refused.WithLabelValues(refusedLifecycleOff).Inc()
			http.Error(w, "Lifecycle API is not enabled (start tokenprobe with --web.enable-lifecycle).", http.StatusForbidden)
			return
		}
		if err := s.cross.Check(r); err != nil {
			s.refused.WithLabelValues(refusedCrossSite).Inc()
			http.Error(w, "refused: a cross-site request ("+err.Error()+"); call the lifecycle API from the command line or the same site", http.StatusForbidden)
			return
		}
		if len(s.o.AllowedHosts) == 0 && fromBrowser(r) && !localHost(r.Host) {
			// DNS rebinding: a page of another site whose name now points
			// here is "same-site" to the browser. Without a list of this
			// daemon's names, a browser's state-changing request is
			// served only under an address or this host's own names.
			s.refused.WithLabelValues(refusedHost).Inc()
			http.Error(w, "refused: a browser's request under the name "+strconv.Quote(r.Host)+", which may be another site's rebound to this address; list this daemon's names in --web.allowed-hosts, or use its address", http.StatusForbidden)
			return
		}
		h(w, r)
	}
}

func (s *server) ready(w http.ResponseWriter, _ *http.Request) {
	if !s.d.Ready() {
		http.Error(w, "Service Unavailable", http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintln(w, "Ready")
}

func (s *server) reload(w http.ResponseWriter, _ *http.Request) {
	if err := s.d.Reload(); err != nil {
		http.Error(w, "failed to reload config: "+err.Error(), http.StatusInternalServerError)
		return
	}
	fmt.Fprintln(w, "configuration reloaded")
}

func (s *server) config(w http.ResponseWriter, _ *http.Request) {
	b, err := s.d.ConfigYAML()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write(b)
}

type runsResponse struct {
	Runs   []daemon.RunRecord `json:"runs"`
	Failed []daemon.RunRecord `json:"older_failed_runs"`
}

func (s *server) runs(w http.ResponseWriter, _ *http.Request) {
	recent, failed := s.d.History().Runs()
	writeJSON(w, http.StatusOK, runsResponse{Runs: nonNil(recent), Failed: nonNil(failed)})
}

func nonNil(rs []daemon.RunRecord) []daemon.RunRecord {
	if rs == nil {
		return []daemon.RunRecord{}
	}
	return rs
}

func (s *server) runNow(w http.ResponseWriter, r *http.Request) {
	profile := r.URL.Query().Get("profile")
	if profile == "" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "the profile parameter is required"})
		return
	}
	started, err := s.d.RunNow(profile, r.URL.Query().Get("endpoint"))
	switch {
	case errors.Is(err, scheduler.ErrUnknown):
		writeJSON(w, http.StatusNotFound, map[string]string{"error": err.Error()})
	case len(started) == 0:
		// Nothing started: say why, and never "accepted".
		writeJSON(w, http.StatusConflict, map[string]any{"error": "no run started: " + err.Error()})
	default:
		var runs, queued []startedRun
		for _, st := range started {
			sr := startedRun{Started: st, URL: fmt.Sprintf("/runs/%d", st.ID)}
			if st.Queued {
				queued = append(queued, sr)
			} else {
				runs = append(runs, sr)
			}
		}
		resp := map[string]any{}
		if runs != nil {
			resp["started"] = runs
		}
		if queued != nil {
			// Accepted all the same: each starts under its id once the
			// runs it is behind end.
			resp["queued"] = queued
		}
		if err != nil {
			resp["not_started"] = err.Error()
		}
		writeJSON(w, http.StatusAccepted, resp)
	}
}

// identity answers the model-identity reference a profile's runs against
// an endpoint are held to, as a reference file pins it; 404 while none is
// learned.
func (s *server) identity(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	ref, err := s.d.IdentityReference(q.Get("profile"), q.Get("endpoint"))
	switch {
	case err != nil:
		writeJSON(w, http.StatusNotFound, map[string]string{"error": err.Error()})
	case ref == nil:
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no reference is learned yet: it is learned from the profile's first complete runs"})
	default:
		writeJSON(w, http.StatusOK, ref)
	}
}

// forgetIdentity drops a learned reference: the next complete runs learn
// it anew (after a model change the team has accepted).
func (s *server) forgetIdentity(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	switch err := s.d.ForgetIdentity(q.Get("profile"), q.Get("endpoint")); {
	case errors.Is(err, daemon.ErrNoIdentity):
		writeJSON(w, http.StatusNotFound, map[string]string{"error": err.Error()})
	case err != nil:
		writeJSON(w, http.StatusConflict, map[string]string{"error": err.Error()})
	default:
		writeJSON(w, http.StatusOK, map[string]string{"forgotten": "the next complete runs learn the reference anew"})
	}
}

// startedRun is a run POST /api/v1/runs started, with its page.
type startedRun struct {
	daemon.Started
	URL string `json:"url"`
}

// writeJSON answers v as JSON, or a 500 saying why it cannot be: a value
// JSON has no form for (a non-finite number) answered 200 with an empty
// body.
func writeJSON(w http.ResponseWriter, code int, v any) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		http.Error(w, "the answer cannot be written as JSON: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = b.WriteTo(w)
}

func (s *server) status(w http.ResponseWriter, _ *http.Request) {
	recent, failed := s.d.History().Runs()
	at, tried, err := s.d.ReloadStatus()
	gpuSource, gpuProblem, gpu := s.d.GPUStatus()
	data := map[string]any{
		"Charts": charts(recent),
		"GPU":    gpu, "GPUSource": gpuSource, "GPUProblem": gpuProblem,
		"Version": s.o.Version, "Jobs": s.d.Jobs(), "Recent": recent, "Failed": failed,
		"ReloadAt": at, "ReloadErr": err, "ReloadTried": tried, "Lifecycle": s.o.Lifecycle, "Now": time.Now(),
	}
	render(w, statusPage, data)
}

// profileCharts are the pictures of one profile on the status page: the
// curve against load of its last multi-stage run, and its recent runs.
type profileCharts struct {
	Profile string
	Curve   []template.HTML
	Trend   []template.HTML
}

// charts draws, per profile and endpoint, the same curve the one-shot HTML
// report draws and the trend of its recent runs.
func charts(recent []daemon.RunRecord) []profileCharts {
	type key struct{ profile, endpoint string }
	var order []key
	byKey := map[key][]daemon.RunRecord{}
	for i := len(recent) - 1; i >= 0; i-- { // oldest first
		r := recent[i]
		if r.Summary == nil || !r.Finished() {
			continue
		}
		k := key{r.Profile, r.Endpoint}
		if byKey[k] == nil {
			order = append(order, k)
		}
		byKey[k] = append(byKey[k], r)
	}
	sort.Slice(order, func(a, b int) bool { return order[a].profile+order[a].endpoint < order[b].profile+order[b].endpoint })
	var out []profileCharts
	for _, k := range order {
		runs := byKey[k]
		pc := profileCharts{Profile: k.profile + " on " + k.endpoint}
		last := runs[len(runs)-1].Summary
		pc.Curve = report.CliffCharts(last, levelName(last))
		if len(runs) > 1 {
			var sums []stats.Summary
			var ids []string
			for _, r := range runs {
				sums = append(sums, *r.Summary)
				ids = append(ids, "#"+strconv.FormatInt(r.ID, 10))
			}
			pc.Trend = report.Trend(k.profile, sums, ids)
		}
		if pc.Curve != nil || pc.Trend != nil {
			out = append(out, pc)
		}
	}
	return out
}

func (s *server) run(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	rec, ok := s.d.History().Get(id)
	if err != nil || !ok {
		http.Error(w, "no such run (only recent and failed runs are kept)", http.StatusNotFound)
		return
	}
	var rep bytes.Buffer
	var charts []template.HTML
	if rec.Summary != nil {
		level := levelName(rec.Summary)
		report.Text(&rep, rec.Summary, level)
		charts = append(report.CliffCharts(rec.Summary, level), report.Distributions(rec.Summary)...)
	}
	render(w, runPage, map[string]any{"Run": rec, "Report": rep.String(), "Charts": charts, "Version": s.o.Version})
}

// levelName is what a run's load levels count, as the report names them:
// "load level" for a run recorded before summaries said.
func levelName(s *stats.Summary) string {
	if s.LevelName == "" {
		return "load level"
	}
	return s.LevelName
}

func render(w http.ResponseWriter, t *template.Template, data any) {
	var buf bytes.Buffer
	if err := t.Execute(&buf, data); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = buf.WriteTo(w)
}

// fromBrowser reports whether r came from a browser: browsers send
// Sec-Fetch-Site, or at least Origin, with a state-changing request;
// curl and CI jobs send neither.
func fromBrowser(r *http.Request) bool {
	return r.Header.Get("Sec-Fetch-Site") != "" || r.Header.Get("Origin") != ""
}

// localHost reports whether a Host header names this machine by an
// address, "localhost", or its own hostname: names no other site can
// rebind.
func localHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.Trim(host, "[]"), ".")
	if net.ParseIP(host) != nil || strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost") {
		return true
	}
	name, err := os.Hostname()
	return err == nil && strings.EqualFold(host, name)
}
