// Package report writes what a one-shot run produced: the console table in
// the shape AIPerf users know, the JSON summary, and per-request records.
package report

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/tokenprobe/tokenprobe/probe/stats"
)

// Text writes the summary as a table followed by the run's totals.
func Text(w io.Writer, s *stats.Summary, levelName string) {
	fmt.Fprintf(w, "profile %s · endpoint %s · model %s", s.Profile, s.Endpoint, s.Model)
	switch {
	case len(s.ServedModels) > 1:
		// A gateway's fallback answering some requests: each model that
		// answered, with its share.
		parts := make([]string, 0, len(s.ServedModels)+1)
		total := s.ServedOther
		for _, m := range s.ServedModels {
			total += m.Requests
		}
		for _, m := range s.ServedModels {
			parts = append(parts, fmt.Sprintf("%s %d of %d", stats.ServerText(m.Name), m.Requests, total))
		}
		if s.ServedOther > 0 {
			parts = append(parts, fmt.Sprintf("others %d", s.ServedOther))
		}
		fmt.Fprintf(w, " (answers name %s)", strings.Join(parts, ", "))
	case s.ServedModel != "":
		// Escaped again: a summary.json written before it was is read by
		// merge and compare.
		fmt.Fprintf(w, " (answers name %s)", stats.ServerText(s.ServedModel))
	}
	switch {
	case len(s.LevelRange) == 2:
		fmt.Fprintf(w, " · staged: %s %g to %g in %d stages", levelName, s.LevelRange[0], s.LevelRange[1], len(s.Stages))
	case levelName != "":
		fmt.Fprintf(w, " · %s %g", levelName, s.Level)
	}
	fmt.Fprintln(w)
	if s.Interrupted {
		fmt.Fprintln(w, "INTERRUPTED: the run was stopped before its end; the figures are of what it measured")
	}
	if s.Error != "" {
		fmt.Fprintf(w, "RUN ERROR: %s\n", s.Error)
	}
	fmt.Fprintln(w)
	if len(s.Stages) > 1 {
		fmt.Fprintln(w, "Every stage pooled (each stage's figures follow the totals):")
	}
	fmt.Fprintf(w, "%-34s %10s %10s %10s %10s %10s %10s %10s %10s\n", "Metric", "avg", "min", "max", "p50", "p90", "p95", "p99", "std")
	rows := []struct {
		name string
		d    stats.Dist
	}{
		{"Time to first token (ms)", s.TTFT},
		{"Time to second token (ms)", s.TTST},
		{"Time to first output token (ms)", s.TTFO},
		{"Inter-token latency (ms)", s.ITL},
		{"Inter-chunk latency (ms)", s.InterChunk},
		{"Request latency (ms)", s.E2E},
		{"Output tokens/s per user", s.UserTPS},
		{"Input sequence length (tokens)", s.ISL},
		{"Output sequence length (tokens)", s.OSL},
	}
	for _, r := range rows {
		if r.d.Count == 0 {
			fmt.Fprintf(w, "%-34s %10s\n", r.name, "n/a")
			continue
		}
		d := r.d
		fmt.Fprintf(w, "%-34s %10s %10s %10s %10s %10s %10s %10s %10s\n", r.name,
			num(d.Avg), num(d.Min), num(d.Max), num(d.P50), num(d.P90), num(d.P95), num(d.P99), num(d.Std))
	}
	fmt.Fprintln(w)
	kv := func(k, format string, args ...any) {
		fmt.Fprintf(w, "%-28s "+format+"\n", append([]any{k}, args...)...)
	}
	if s.Verdict != "" {
		kv("Verdict", "%s", s.Verdict)
	}
	kv("Requests", "%d (%d success, %d error, %d cancelled, %d wrong answers)", s.Requests, s.Success, s.Errors, s.Cancelled, s.WrongAnswers)
	if w := s.Warmup; w != nil && (w.Errors > 0 || w.WrongAnswers > 0 || s.Aborted) {
		// In no figure, but they count for the failure policy: a run
		// aborted in its warmup showed "Requests 0" and no reason.
		errs := ""
		if len(w.ByReason) > 0 {
			errs = " (" + reasons(w.ByReason) + ")"
		}
		kv("Warmup", "%d (%d success, %d error%s, %d cancelled, %d wrong answers), in no figure here", w.Requests, w.Success, w.Errors, errs, w.Cancelled, w.WrongAnswers)
	}
	kv("Benchmark duration", "%.2f s", s.DurationSeconds)
	if m := s.Merged; m != nil {
		kv("Merged from", "%d shards, their first requests %.0f ms apart", m.Shards, m.StartSpreadMs)
	}
	kv("Request throughput", "%.2f req/s", s.RequestThroughput)
	if s.OutputTokens == 0 && s.InputTokens > 0 { // embeddings: what goes in is the work
		kv("Input token throughput", "%.1f tokens/s", s.InputTokenThroughput)
	} else {
		kv("Output token throughput", "%.1f tokens/s", s.OutputTokenThroughput)
	}
	kv("Goodput", "%.2f req/s (%d good requests)", s.Goodput, s.Good)
	verdict := ""
	switch {
	case s.Search != nil && s.Objective > 0:
		// A search overshoots the capacity on purpose: its steps' pooled
		// attainment is no verdict, and PASSED beside a figure under the
		// objective read as a contradiction. Its verdict is the capacity.
		verdict = fmt.Sprintf(" over every step (objective %.1f%%: the search's verdict is its capacity, below)", s.Objective*100)
	case s.Objective > 0:
		word := "FAILED"
		switch {
		case s.Passed:
			word = "PASSED"
		case s.Undecided:
			word = "NOT ENOUGH EVIDENCE"
		}
		verdict = fmt.Sprintf(" (objective %.1f%%: %s)", s.Objective*100, word)
		if e := s.Evidence; e != nil && e.Counted > 0 {
			verdict = fmt.Sprintf(", 95%% interval %s to %s of %d requests", stats.Pct(e.Attainment.Low), stats.Pct(e.Attainment.High), e.Counted) + verdict
		}
	}
	if len(s.SLOThresholds) == 0 && s.Objective == 0 {
		// 100% of nothing reads as a pass: say there was nothing to meet.
		kv("SLO attainment", "no SLO (every request answered in full and right counts as good)")
	} else {
		kv("SLO attainment", "%.1f%%%s", s.Attainment*100, verdict)
	}
	for _, k := range sortedKeys(s.PerSLO) {
		kv("  "+k, "%.1f%%", s.PerSLO[k]*100)
	}
	if s.WrongAnswers > 0 {
		state := "within it"
		if s.WrongAnswersOver() {
			state = "FAILED"
		}
		kv("Wrong answers", "%.1f%% of the requests (tolerance %.1f%%: %s)", 100*s.WrongShare(), 100*s.MaxWrongRatio, state)
	}
	if pc := s.PrefixCache; pc != nil {
		kv("Prefix cache", "%s", PrefixCacheLine(pc))
	}
	if mi := s.ModelIdentity; mi != nil {
		kv("Model identity", "%s", IdentityLine(mi))
		if m := mi.Moved; m != nil && m.LogprobDistance > 0 {
			kv("  moved most", "prompt %d %q: answered %q as the reference did, its log-probabilities %.5f nats a token from the reference's", m.Index+1, m.Prompt, m.Answer, m.LogprobDistance)
		} else if m != nil {
			kv("  moved most", "prompt %d %q: answered %q, the reference %q", m.Index+1, m.Prompt, m.Answer, m.Reference)
		}
	}
	kv("Errors by reason", "%s", reasons(s.ByReason))
	Failures(w, s.Failures, "  ")
	if s.Currency != "" {
		kv("Cost", "%.4f %s at the endpoint's price (%s tokens in, %s out)", s.Cost, s.Currency, humanCount(float64(s.InputTokens)), humanCount(float64(s.OutputTokens)))
	}
	for _, rl := range s.RateLimits {
		kv("Rate limit ("+rl.Kind+")", "%s", RateLimitLine(rl))
	}
	Checks(w, s.Checks, "  ")
	if s.FailureWaitSeconds > 0 {
		kv("Waited after failures", "%.1f s over all workers (backoff and Retry-After; in no latency figure)", s.FailureWaitSeconds)
	}
	if s.Retried > 0 {
		kv("Sent twice", "%d requests: the server had closed the kept-alive connection each was first sent on (its TTFT includes the first attempt)", s.Retried)
	}
	if len(s.Dropped) > 0 {
		kv("Arrivals not sent", "%s (retry_after: the server's Retry-After was in force)", reasons(s.Dropped))
	}
	kv("Dispatch lag p99", "%.3f ms", s.DispatchLag.P99)
	if p := s.Probe; p != nil {
		state := "ran promptly"
		if p.Starved {
			state = "STARVED, so it cannot vouch for this run's timing: " + p.Why + "; a miss within its delay is not counted against the server"
		}
		steal := ""
		if p.StealPercent >= 0 {
			steal = fmt.Sprintf(", CPU steal %.1f%%", p.StealPercent)
		}
		kv("Probe's own delay", "p50 %s, p99 %s, max %s over %d wake-ups%s: %s", stats.FormatMillis(p.DelayP50Ms), stats.FormatMillis(p.DelayP99Ms), stats.FormatMillis(p.DelayMaxMs), p.Samples, steal, state)
	}
	if s.InputLengthError.Count > 0 {
		kv("Input length vs intended", "%+.1f tokens avg (server usage minus intended)", s.InputLengthError.Avg)
	}
	if g := s.GPU; g != nil {
		switch g.Samples {
		case 0:
			kv("GPU", "%s: no readings (%s)", g.Source, g.Err)
		default:
			sm := "SM active not read (a profiling field: DCGM only)"
			if g.SMActiveAvg != nil && g.SMActivePeak != nil {
				sm = fmt.Sprintf("SM active avg %.2f peak %.2f", *g.SMActiveAvg, *g.SMActivePeak)
			}
			kv("GPU", "%s, %d GPUs, %d readings: utilisation avg %.0f%% peak %.0f%%, %s",
				g.Source, g.GPUs, g.Samples, g.UtilAvg, g.UtilPeak, sm)
			kv("GPU power and memory", "avg %.0f W, peak %.0f W; framebuffer peak %.0f MiB", g.PowerAvg, g.PowerPeak, g.MemUsedPeak)
			if g.EnergyJoules > 0 {
				kv("GPU energy", "%.0f J: %.3f J per output token, %.2f output tokens per J", g.EnergyJoules, g.JoulesPerOutputToken, g.OutputTokensPerJoule)
			}
		}
	}
	if s.Server != nil {
		Server(w, s.Server)
	}
	if len(s.Stages) > 0 {
		Stages(w, s.Stages, levelName)
	}
	if sr := s.Search; sr != nil {
		fmt.Fprintln(w)
		var tried []string
		for _, st := range sr.Tried {
			mark := "missed"
			switch {
			case st.Passed:
				mark = "met"
			case st.Evidence.Outcome == stats.Undecided:
				mark = "not enough evidence"
			}
			tried = append(tried, fmt.Sprintf("%g %s (%.0f%% of %d, 95%% interval %s to %s)", st.Level, mark, 100*st.Attainment,
				st.Evidence.Counted, stats.Pct(st.Evidence.Attainment.Low), stats.Pct(st.Evidence.Attainment.High)))
		}
		state := fmt.Sprintf("found in %d steps, within %g%%", sr.Steps, 100*sr.Precision)
		if !sr.Done {
			state = fmt.Sprintf("NOT FOUND: %d steps ran out (or the run stopped) before the bracket narrowed; the best level known", sr.Steps)
		}
		verdict := "FAILED: no level it tried met the objective"
		switch {
		case s.Passed:
			verdict = "PASSED: a level was shown to meet the objective"
		case s.Undecided:
			verdict = "NOT ENOUGH EVIDENCE: no level it tried was shown to meet the objective, and some had too few requests to tell"
		}
		kv("Capacity search", "%s %g: %s (%s)", levelName, sr.Capacity, state, verdict)
		kv("  steps, in order", "%s", strings.Join(tried, ", "))
	}
	if k := s.Knee; k != nil {
		fmt.Fprintln(w)
		switch {
		case s.Objective == 0:
			kv("Capacity at SLO", "n/a (no slo.objective)")
		case k.CapacityAtSLO == 0 && k.StoppedBy == stats.Undecided:
			kv("Capacity at SLO", "not shown: the first level had not enough evidence to tell (%s)", stageEvidence(s.Stages, k.StoppedAt))
		case k.CapacityAtSLO == 0:
			kv("Capacity at SLO", "none: the first level already misses the objective")
		case k.StoppedBy == stats.Undecided:
			kv("Capacity at SLO", "%s %g at least: %g had not enough evidence to tell (%s)", levelName, k.CapacityAtSLO, k.StoppedAt, stageEvidence(s.Stages, k.StoppedAt))
		default:
			kv("Capacity at SLO", "%s %g", levelName, k.CapacityAtSLO)
		}
		switch {
		case k.CliffLevel > 0:
			kv("TTFT cliff", "at %s %g: TTFT p50 x%.1f (95%% interval x%.1f to x%.1f), ITL p50 x%.2f (a queue, not a slower model)", levelName, k.CliffLevel, k.TTFTRatio, k.TTFTRatioInterval.Low, k.TTFTRatioInterval.High, k.ITLRatio)
		case k.UnprovenCliff > 0:
			kv("TTFT cliff", "not shown: at %s %g TTFT p50 reached x%g with ITL flat, but not at the low end of its interval (too few requests, or the probe's own delay)", levelName, k.UnprovenCliff, stats.CliffTTFT)
		default:
			kv("TTFT cliff", "none (no level had TTFT p50 x%g of the first's with ITL under x%g): %s", stats.CliffTTFT, stats.CliffITL, k.Reading())
		}
	}
}

// stageEvidence is the evidence of the stage at level, in words.
func stageEvidence(stages []stats.Summary, level float64) string {
	for _, st := range stages {
		if st.Level != level || st.Evidence == nil {
			continue
		}
		e := st.Evidence
		out := fmt.Sprintf("%d requests, attainment 95%% interval %s to %s", e.Counted, stats.Pct(e.Attainment.Low), stats.Pct(e.Attainment.High))
		if e.RequestsToDecide > 0 {
			out += fmt.Sprintf("; about %d would decide it", e.RequestsToDecide)
		} else if e.Why != "" {
			out += "; " + e.Why
		}
		return out
	}
	return "no requests"
}

// Stages writes one line per stage: latency read against load, where a
// TTFT cliff shows as TTFT climbing while ITL stays flat. Where the
// server's metrics were read, its queue, running and waiting requests and
// KV cache usage follow, so the knee is explained: waiting rises above 0
// at the level where TTFT leaves its floor.
func Stages(w io.Writer, stages []stats.Summary, levelName string) {
	server := false
	for _, st := range stages {
		server = server || st.Server != nil
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "%-12s %9s %11s %11s %11s %11s %11s %11s %11s", levelName, "requests", "TTFT p50", "TTFT p95", "ITL p50",
		"ITL p95", "req/s", "goodput", "attainment")
	if server {
		fmt.Fprintf(w, " %11s %9s %9s %9s", "srv queue", "running", "waiting", "KV cache")
	}
	fmt.Fprintln(w)
	for _, st := range stages {
		fmt.Fprintf(w, "%-12g %9d %11s %11s %11s %11s %11.2f %11.2f %10.1f%%", st.Level, st.Requests,
			Millis(st.TTFT, st.TTFT.P50), Millis(st.TTFT, st.TTFT.P95), Millis(st.ITL, st.ITL.P50), Millis(st.ITL, st.ITL.P95),
			st.RequestThroughput, st.Goodput, st.Attainment*100)
		if server {
			queue, running, waiting, kv := "n/a", "n/a", "n/a", "n/a"
			if sv := st.Server; sv != nil {
				if sv.Queue != nil {
					queue = stats.FormatMillis(sv.Queue.Mean)
				}
				if sv.Running != nil {
					running = fmt.Sprintf("%.1f", sv.Running.Avg)
				}
				if sv.Waiting != nil {
					waiting = fmt.Sprintf("%.1f", sv.Waiting.Avg)
				}
				if sv.KVCache != nil {
					kv = fmt.Sprintf("%.0f%%", 100*sv.KVCache.Avg)
				}
			}
			fmt.Fprintf(w, " %11s %9s %9s %9s", queue, running, waiting, kv)
		}
		fmt.Fprintln(w)
	}
}

// RateLimitLine says what a provider's rate limit of one kind was during
// a run and the probe's own share of it.
func RateLimitLine(rl stats.RateLimit) string {
	var b strings.Builder
	if rl.Limit > 0 {
		fmt.Fprintf(&b, "limit %s/min, ", humanCount(rl.Limit))
	}
	fmt.Fprintf(&b, "least remaining %s", humanCount(rl.MinRemaining))
	if rl.MinShare != nil {
		fmt.Fprintf(&b, " (%.1f%%)", 100**rl.MinShare)
	}
	fmt.Fprintf(&b, "; the probe used %s/min", humanCount(rl.ProbePerMinute))
	if rl.ProbeShare != nil {
		fmt.Fprintf(&b, " (%.1f%% of the limit)", 100**rl.ProbeShare)
	}
	return b.String()
}

func humanCount(v float64) string { return strconv.FormatFloat(math.Round(v*10)/10, 'f', -1, 64) }

// Failures writes each error reason with its count, statuses, most
// frequent message and hint, one block each, every line after indent.
func Failures(w io.Writer, fs []stats.Failure, indent string) {
	for _, f := range fs {
		statuses := ""
		if len(f.Statuses) > 0 {
			var parts []string
			for _, code := range sortedKeys(f.Statuses) {
				parts = append(parts, fmt.Sprintf("HTTP %s ×%d", code, f.Statuses[code]))
			}
			statuses = " (" + strings.Join(parts, ", ") + ")"
		}
		fmt.Fprintf(w, "%s%s: %d%s\n", indent, f.Reason, f.Count, statuses)
		fmt.Fprintf(w, "%s  most frequent (%d of %d): %s\n", indent, f.MessageCount, f.Count, f.Message)
		if f.Hint != "" {
			fmt.Fprintf(w, "%s  hint: %s\n", indent, f.Hint)
		}
	}
}

// Checks writes each answer check's pass rate and its first failure.
func Checks(w io.Writer, cs []stats.CheckStat, indent string) {
	if len(cs) == 0 {
		return
	}
	fmt.Fprintf(w, "%-28s %s\n", "Answer checks", "passed of judged (a failure makes the request a wrong answer)")
	for _, c := range cs {
		fmt.Fprintf(w, "%s%-26s %d of %d (%.1f%%)\n", indent, c.Name, c.Pass, c.Pass+c.Fail, 100*float64(c.Pass)/float64(max(c.Pass+c.Fail, 1)))
		if c.FirstFailure != "" {
			fmt.Fprintf(w, "%s  first failure: %s\n", indent, c.FirstFailure)
		}
	}
}

// Millis is v, a figure of d, in milliseconds, or n/a when d has no
// values: a run without successes has no latency, never 0 ms.
func Millis(d stats.Dist, v float64) string {
	if d.Count == 0 {
		return "n/a"
	}
	return num(v) + " ms"
}

func num(v float64) string {
	switch {
	case v >= 1e5 || v <= -1e5:
		return fmt.Sprintf("%.0f", v)
	case v >= 100 || v <= -100:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

func reasons(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	parts := make([]string, 0, len(m))
	for _, k := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// PrefixCacheLine is a prefix-cache probe's verdict in one line: the warm
// request's speed-up over its uncached neighbours with its interval, the
// bar, and what the server said it read from its cache.
func PrefixCacheLine(pc *stats.PrefixCache) string {
	if pc.Triples == 0 {
		return "NOT ENOUGH EVIDENCE: " + pc.Why
	}
	word := map[stats.Outcome]string{stats.CacheWorking: "WORKING", stats.CacheBroken: "BROKEN"}[pc.Verdict]
	if word == "" {
		word = "NOT ENOUGH EVIDENCE"
	}
	if pc.Why != "" {
		word += " (" + pc.Why + ")"
	}
	interval := fmt.Sprintf("95%% interval %.2fx to %.2fx over %d triples", pc.Interval.Low, pc.Interval.High, pc.Triples)
	if pc.Triples < 2 {
		interval = "one triple, no interval"
	}
	line := fmt.Sprintf("warm %.2fx faster than uncached, %s (bar %.2gx): %s; TTFT p50 cold %s, warm %s, fresh %s",
		pc.Speedup, interval, pc.MinSpeedup, word,
		stats.FormatMillis(pc.ColdTTFT), stats.FormatMillis(pc.WarmTTFT), stats.FormatMillis(pc.FreshTTFT))
	if pc.ColdCached == 0 && pc.WarmCached == 0 {
		return line + "; the server reported no cached tokens"
	}
	return line + fmt.Sprintf("; cached tokens the server reported, per request: cold %.0f, warm %.0f", pc.ColdCached, pc.WarmCached)
}

// IdentityLine is a model-identity probe's verdict in one line: the
// prompts answered as the reference answers them, with the interval and
// the bar, or how far the reference is learned.
func IdentityLine(mi *stats.ModelIdentity) string {
	why := ""
	if mi.Why != "" {
		why = " (" + mi.Why + ")"
	}
	if mi.Verdict == stats.Learning {
		return fmt.Sprintf("LEARNING the reference: %d of %d runs%s", mi.LearnedRuns, mi.LearnRuns, why)
	}
	if mi.Prompts == 0 {
		return "NOT ENOUGH EVIDENCE" + why
	}
	word := map[stats.Outcome]string{stats.SameModel: "THE SAME MODEL", stats.ModelChanged: "CHANGED"}[mi.Verdict]
	if word == "" {
		word = "NOT ENOUGH EVIDENCE"
	}
	line := fmt.Sprintf("%d of %d prompts answered as the reference answers them, 95%% interval %s to %s (bar %s): %s%s",
		mi.Agreeing, mi.Prompts, stats.Pct(mi.Interval.Low), stats.Pct(mi.Interval.High), stats.Pct(mi.MinAgreement), word, why)
	if mi.Unstable > 0 {
		line += fmt.Sprintf("; %d prompts left out, answered too many ways while learning", mi.Unstable)
	}
	if l := mi.Logprobs; l != nil {
		line += fmt.Sprintf("; log-probabilities of the %d answers alike in their text %.5f nats a token from the reference's (95%% interval %.5f to %.5f), %d past %.5f",
			l.Prompts, l.Distance, l.Interval.Low, l.Interval.High, l.Moved, l.Tolerance)
	}
	return line
}
