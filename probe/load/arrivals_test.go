package load

import (
	"math"
	"slices"
	"testing"
	"time"
)

// ksCritical1 is the Kolmogorov-Smirnov critical value at the 1% level for
// n samples (asymptotic: 1.628 / sqrt(n)).
func ksCritical1(n int) float64 { return 1.628 / math.Sqrt(float64(n)) }

// ks returns the Kolmogorov-Smirnov statistic of samples against cdf.
func ks(samples []float64, cdf func(float64) float64) float64 {
	s := slices.Clone(samples)
	slices.Sort(s)
	n := float64(len(s))
	d := 0.0
	for i, x := range s {
		f := cdf(x)
		d = max(d, math.Abs(float64(i+1)/n-f), math.Abs(f-float64(i)/n))
	}
	return d
}

// gammaP is the regularized lower incomplete gamma function P(a, x), the
// CDF of a gamma(a, 1) variable (series and continued fraction, as in
// Numerical Recipes).
func gammaP(a, x float64) float64 {
	if x <= 0 {
		return 0
	}
	lg, _ := math.Lgamma(a)
	if x < a+1 {
		sum, term := 1/a, 1/a
		for n := 1; n < 1000; n++ {
			term *= x / (a + float64(n))
			sum += term
			if math.Abs(term) < math.Abs(sum)*1e-15 {
				break
			}
		}
		return sum * math.Exp(-x+a*math.Log(x)-lg)
	}
	b := x + 1 - a
	c, d := 1/1e-300, 1/b
	h := d
	for i := 1; i < 1000; i++ {
		an := -float64(i) * (float64(i) - a)
		b += 2
		d = an*d + b
		if math.Abs(d) < 1e-300 {
			d = 1e-300
		}
		c = b + an/c
		if math.Abs(c) < 1e-300 {
			c = 1e-300
		}
		d = 1 / d
		del := d * c
		h *= del
		if math.Abs(del-1) < 1e-15 {
			break
		}
	}
	return 1 - math.Exp(-x+a*math.Log(x)-lg)*h
}

func gaps(t *testing.T, kind string, rate, smoothness float64, n int) []float64 {
	t.Helper()
	a, err := NewArrivals(kind, rate, smoothness, 42)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]float64, n)
	for i := range out {
		out[i] = a.Next().Seconds()
	}
	return out
}

func meanRate(gaps []float64) float64 {
	sum := 0.0
	for _, g := range gaps {
		sum += g
	}
	return float64(len(gaps)) / sum
}

// Over 10,000 inter-arrival times, a KS test does not reject the target
// distribution at the 1% level, and the mean rate is within 2%.
func TestArrivalDistributions(t *testing.T) {
	const n = 10000
	cases := []struct {
		name             string
		kind             string
		rate, smoothness float64
		cdf              func(x float64) float64
	}{
		{"poisson 20/s", "poisson", 20, 0, func(x float64) float64 { return 1 - math.Exp(-20*x) }},
		{"gamma bursty", "gamma", 20, 0.5, nil},
		{"gamma poisson-like", "gamma", 5, 1, nil},
		{"gamma smooth", "gamma", 100, 4, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cdf := c.cdf
			if cdf == nil {
				shape, scale := c.smoothness, 1/(c.rate*c.smoothness)
				cdf = func(x float64) float64 { return gammaP(shape, x/scale) }
			}
			g := gaps(t, c.kind, c.rate, c.smoothness, n)
			if d, crit := ks(g, cdf), ksCritical1(n); d > crit {
				t.Errorf("KS statistic %.4f > %.4f: the distribution is rejected at 1%%", d, crit)
			}
			if r := meanRate(g); math.Abs(r-c.rate)/c.rate > 0.02 {
				t.Errorf("mean rate %.3f, want %v within 2%%", r, c.rate)
			}
		})
	}
}

// The KS check can fail: exponential gaps are rejected as gamma(4).
func TestKSRejectsTheWrongDistribution(t *testing.T) {
	g := gaps(t, "poisson", 20, 0, 10000)
	shape, scale := 4.0, 1/(20*4.0)
	if d := ks(g, func(x float64) float64 { return gammaP(shape, x/scale) }); d <= ksCritical1(10000) {
		t.Fatalf("KS accepted exponential gaps as gamma(4): %.4f", d)
	}
}

func TestGammaPMatchesKnownValues(t *testing.T) {
	// Closed forms: P(1, x) = 1 - e^-x; P(2, 2) = 1 - 3e^-2; P(0.5, x) = erf(sqrt x).
	for _, c := range []struct{ a, x, want float64 }{
		{1, 0.7, 1 - math.Exp(-0.7)}, {2, 2, 1 - 3*math.Exp(-2)}, {0.5, 1.3, math.Erf(math.Sqrt(1.3))}, {4, 9, 1 - 172*math.Exp(-9)}, // integer shape: 1 - e^-x (1 + x + x²/2 + x³/6)
	} {
		if got := gammaP(c.a, c.x); math.Abs(got-c.want) > 1e-8 {
			t.Errorf("P(%v, %v) = %.10f, want %.10f", c.a, c.x, got, c.want)
		}
	}
}

func TestConstantAndSeeded(t *testing.T) {
	a, _ := NewArrivals("constant", 4, 0, 1)
	if a.Next() != 250*time.Millisecond {
		t.Fatal("constant gap")
	}
	x, y := gaps(t, "gamma", 10, 0.3, 50), gaps(t, "gamma", 10, 0.3, 50)
	if !slices.Equal(x, y) {
		t.Fatal("same seed, different schedule")
	}
	if _, err := NewArrivals("gamma", 1, 0, 1); err == nil {
		t.Fatal("gamma without smoothness accepted")
	}
}

func BenchmarkArrivals(b *testing.B) {
	for _, kind := range []string{"constant", "poisson", "gamma"} {
		b.Run(kind, func(b *testing.B) {
			a, err := NewArrivals(kind, 1000, 0.5, 1)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				_ = a.Next()
			}
		})
	}
}
