package bench

import (
	"slices"
	"time"
)

// Spread is one figure measured in several rounds: the median of the rounds and its range.
// Medians of per-round figures, not figures of the pooled requests: a round that drift on the
// shared machine made slow moves the median little, and the range shows how much it moved.
type Spread struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	N      int     `json:"rounds"`
}

// spreadOf summarises the rounds' values; no value gives the zero Spread.
func spreadOf(values []float64) Spread {
	if len(values) == 0 {
		return Spread{}
	}
	s := slices.Clone(values)
	slices.Sort(s)
	return Spread{Median: median(s), Min: s[0], Max: s[len(s)-1], N: len(s)}
}

// median of sorted values: the middle one, or the mean of the two middle ones.
func median(sorted []float64) float64 {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

// percentile is the nearest-rank percentile p (0–100) of latencies, in milliseconds; 0
// without latencies.
func percentile(latencies []time.Duration, p float64) float64 {
	if len(latencies) == 0 {
		return 0
	}
	s := slices.Clone(latencies)
	slices.Sort(s)
	rank := int(p/100*float64(len(s))+0.5) - 1 // nearest rank, 1-based, made 0-based
	rank = min(max(rank, 0), len(s)-1)
	return ms(s[rank])
}

// ms is d in milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// ratios divides a[i] by b[i], round by round; a round whose divisor is 0 is left out.
func ratios(a, b []float64) []float64 {
	var r []float64
	for i := range min(len(a), len(b)) {
		if b[i] > 0 {
			r = append(r, a[i]/b[i])
		}
	}
	return r
}
