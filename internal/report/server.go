package report

import (
	"fmt"
	"html"
	"html/template"
	"io"
	"strings"

	"github.com/tokenprobe/tokenprobe/probe/stats"
)

// Server writes what the server said about the run: where the client's
// TTFT went, the server's own phases, its load, and what it does not say.
func Server(w io.Writer, sv *stats.Server) {
	kv := func(k, format string, args ...any) {
		fmt.Fprintf(w, "%-28s "+format+"\n", append([]any{k}, args...)...)
	}
	fmt.Fprintln(w)
	if len(sv.Replicas) > 0 {
		kv("Server", "%s, %d replicas pooled", sv.Kind, len(sv.Replicas))
	} else {
		kv("Server", "%s, %s, %d readings", sv.Kind, sv.URL, sv.Scrapes)
	}
	for i, r := range sv.Replicas {
		// Each replica against the requests the probe sent it.
		what := r.Err
		if r.Breakdown != nil {
			what = r.Breakdown.Verdict
		} else if what == "" {
			what = r.Note
		}
		kv(fmt.Sprintf("  replica %d", i+1), "%s (%s, %.0f finished): %s", r.Replica, r.URL, r.Population, what)
	}
	if b := sv.Breakdown; b != nil {
		kv("  where TTFT went", "%s", b.Verdict)
		if p := b.P50; p != nil {
			kv("  TTFT p50 split", "%s", splitText(*p)+" (medians interpolated in the server's buckets)")
		} else if b.P50Note != "" {
			kv("  TTFT p50 split", "%s", b.P50Note)
		}
	}
	if sv.Note != "" {
		kv("  note", "%s", sv.Note)
	}
	if sv.Err != "" {
		kv("  error", "%s", sv.Err)
	}
	for _, ph := range []struct {
		name string
		p    *stats.Phase
	}{{"  queue time", sv.Queue}, {"  prefill time", sv.Prefill}, {"  server TTFT", sv.TTFT}, {"  server ITL", sv.ITL}, {"  server e2e latency", sv.E2E}} {
		if ph.p == nil {
			continue
		}
		p50 := ""
		if ph.p.P50 != nil {
			p50 = fmt.Sprintf(", p50 %s in (%s, %s]", stats.FormatMillis(*ph.p.P50), stats.FormatMillis(ph.p.P50Bucket[0]), stats.FormatMillis(ph.p.P50Bucket[1]))
		}
		over := ""
		if ph.p.Over > 0 {
			over = fmt.Sprintf(" of %.0f finished requests: the server observes only those that waited", ph.p.Over)
		}
		kv(ph.name, "mean %s%s (%.0f observations%s)", stats.FormatMillis(ph.p.Mean), p50, ph.p.Count, over)
	}
	if sv.Running != nil || sv.Waiting != nil {
		kv("  running / waiting", "%s / %s", levelText(sv.Running, 1, ""), levelText(sv.Waiting, 1, ""))
	}
	if sv.KVCache != nil {
		kv("  KV cache usage", "%s", levelText(sv.KVCache, 100, "%"))
	}
	if r := sv.PrefixCacheHitRate; r != nil {
		kv("  prefix cache hit rate", "%.1f%%", *r*100)
	}
	if p := sv.Preemptions; p != nil {
		kv("  preemptions", "%.0f", *p)
	}
	if sv.PromptTokens != nil && sv.GenerationTokens != nil {
		kv("  tokens", "%.0f prompt, %.0f generated", *sv.PromptTokens, *sv.GenerationTokens)
	}
	if len(sv.Missing) > 0 {
		kv("  not exposed", "%s", strings.Join(sv.Missing, ", "))
	}
}

func splitText(s stats.Split) string {
	out := fmt.Sprintf("%s: %s queue", stats.FormatMillis(s.TTFT), stats.FormatMillis(s.Queue))
	if s.Prefill != nil {
		out += ", " + stats.FormatMillis(*s.Prefill) + " prefill"
	}
	if s.Elsewhere < 0 {
		// Medians interpolated in the server's buckets can sum past the
		// client's: no share is negative.
		return out + ", elsewhere not measurable"
	}
	return out + ", " + stats.FormatMillis(s.Elsewhere) + " elsewhere"
}

func levelText(l *stats.Level, scale float64, unit string) string {
	if l == nil {
		return "n/a"
	}
	return fmt.Sprintf("avg %.1f%s peak %.1f%s", l.Avg*scale, unit, l.Peak*scale, unit)
}

// Breakdown draws where a run's mean TTFT went as one bar: the server's
// queue, its prefill and the rest, each as wide as its share, with the
// verdict above; or, without a breakdown, why there is none. Empty when
// the server's metrics were not read.
func Breakdown(sv *stats.Server) template.HTML {
	if sv == nil {
		return ""
	}
	var b strings.Builder
	b.WriteString(`<div class="ttft-breakdown">`)
	switch bd := sv.Breakdown; {
	case bd != nil:
		fmt.Fprintf(&b, `<p class="verdict" data-dominant="%s">%s</p>`, html.EscapeString(bd.Dominant), html.EscapeString(bd.Verdict))
		parts := []struct {
			name, color string
			ms          float64
		}{{"queue", "#cf222e", bd.Mean.Queue}, {"prefill", "#bf8700", 0}, {"elsewhere", "#57606a", bd.Mean.Elsewhere}}
		if bd.Mean.Prefill != nil {
			parts[1].ms = *bd.Mean.Prefill
		}
		total := 0.0
		for _, p := range parts {
			total += max(p.ms, 0)
		}
		// The parts carry no text: a part a few pixels wide cut its
		// name to "pr". The legend under the bar names each with its time.
		b.WriteString(`<div class="bar" style="display:flex;height:1.4em;max-width:640px;border:1px solid #ddd">`)
		for _, p := range parts {
			if p.ms <= 0 || total <= 0 {
				continue
			}
			share := 100 * p.ms / total
			fmt.Fprintf(&b, `<div class="part" data-phase="%s" title="%s %s" style="width:%.2f%%;background:%s"></div>`,
				p.name, p.name, stats.FormatMillis(p.ms), share, p.color)
		}
		b.WriteString(`</div><p class="bar-legend" style="font-size:12px;margin:.3em 0">`)
		first := true
		for _, p := range parts {
			if p.ms <= 0 || total <= 0 {
				continue
			}
			if !first {
				b.WriteString(" · ")
			}
			first = false
			fmt.Fprintf(&b, `<span class="legend-item" data-phase="%s" style="white-space:nowrap"><span style="display:inline-block;width:.8em;height:.8em;background:%s;margin-right:.3em"></span>%s %s (%.0f%%)</span>`,
				p.name, p.color, p.name, stats.FormatMillis(p.ms), 100*p.ms/total)
		}
		b.WriteString(`</p>`)
	case sv.Note != "":
		fmt.Fprintf(&b, `<p class="note">%s</p>`, html.EscapeString(sv.Note))
	}
	if sv.Err != "" {
		fmt.Fprintf(&b, `<p class="error">The server's metrics: %s</p>`, html.EscapeString(sv.Err))
	}
	b.WriteString(`</div>`)
	return template.HTML(b.String()) //nolint:gosec // every text in it is escaped above
}
