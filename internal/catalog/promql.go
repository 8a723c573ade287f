package catalog

import "fmt"

// Quantile is the PromQL of quantile p of a histogram by the labels in by,
// over window, that answers under every scrape setting: from the native
// histogram where Prometheus keeps one (protobuf with native histograms
// on, the classic buckets kept or not), else from the classic buckets
// (the text format, or native histograms off). sel is a label selector's
// inside ("" for none).
func Quantile(p float64, metric, by, sel, window string) string {
	return fmt.Sprintf(`histogram_quantile(%[1]g, sum by (%[2]s) (rate(%[3]s{%[4]s}[%[5]s]))) or histogram_quantile(%[1]g, sum by (%[2]s, le) (rate(%[3]s_bucket{%[4]s}[%[5]s])))`,
		p, by, metric, sel, window)
}
