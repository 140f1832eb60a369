package bench

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// SpanStat is the time spent in the spans of one name.
type SpanStat struct {
	Name   string  `json:"name"`
	Count  int     `json:"count"`
	P50Ms  float64 `json:"p50_ms"`
	MeanMs float64 `json:"mean_ms"`
}

// spanAggregator is a SpanProcessor that keeps, per span name, the durations of the spans
// that ended: enough for a count, a median and a mean, and nothing is exported.
type spanAggregator struct {
	mu        sync.Mutex
	durations map[string][]time.Duration
}

var _ sdktrace.SpanProcessor = (*spanAggregator)(nil)

func newSpanAggregator() *spanAggregator {
	return &spanAggregator{durations: map[string][]time.Duration{}}
}

func (a *spanAggregator) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

// OnEnd records the span's duration under its name.
func (a *spanAggregator) OnEnd(s sdktrace.ReadOnlySpan) {
	d := s.EndTime().Sub(s.StartTime())
	a.mu.Lock()
	defer a.mu.Unlock()
	a.durations[s.Name()] = append(a.durations[s.Name()], d)
}

func (a *spanAggregator) Shutdown(context.Context) error   { return nil }
func (a *spanAggregator) ForceFlush(context.Context) error { return nil }

// reset forgets every span recorded so far.
func (a *spanAggregator) reset() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.durations = map[string][]time.Duration{}
}

// stats is one SpanStat per name, the names with the most time in all first.
func (a *spanAggregator) stats() []SpanStat {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []SpanStat
	total := map[string]time.Duration{}
	for name, ds := range a.durations {
		var sum time.Duration
		for _, d := range ds {
			sum += d
		}
		total[name] = sum
		out = append(out, SpanStat{Name: name, Count: len(ds), P50Ms: percentile(ds, 50),
			MeanMs: ms(sum) / float64(len(ds))})
	}
	slices.SortFunc(out, func(x, y SpanStat) int {
		if c := -int(total[x.Name] - total[y.Name]); c != 0 {
			return c
		}
		return compareStrings(x.Name, y.Name)
	})
	return out
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// switchSampler samples every trace while it is on, and none while off: the throughput
// figures are measured with it off, so that they do not pay for tracing; only the phase
// timing window turns it on.
type switchSampler struct{ on atomic.Bool }

func (s *switchSampler) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	decision := sdktrace.Drop
	if s.on.Load() {
		decision = sdktrace.RecordAndSample
	}
	return sdktrace.SamplingResult{Decision: decision, Tracestate: trace.SpanContextFromContext(p.ParentContext).TraceState()}
}

func (s *switchSampler) Description() string { return "shop bench: on only in the phase timing window" }

// tracing is the benchmark's own tracer provider, installed as the global one before any
// stack starts, so that the shop's spans reach its aggregator.
type tracing struct {
	provider *sdktrace.TracerProvider
	sampler  *switchSampler
	spans    *spanAggregator
	previous trace.TracerProvider
}

// installTracing makes a provider whose sampler is off and sets it as otel's global one.
// A span whose parent was sampled is sampled too (ParentBased), so a trace begun in the
// window is whole even if the window closes while it runs.
func installTracing() *tracing {
	t := &tracing{sampler: &switchSampler{}, spans: newSpanAggregator(), previous: otel.GetTracerProvider()}
	t.provider = sdktrace.NewTracerProvider(
		sdktrace.WithSampler(sdktrace.ParentBased(t.sampler)),
		sdktrace.WithSpanProcessor(t.spans))
	otel.SetTracerProvider(t.provider)
	return t
}

// uninstall puts the previous global provider back.
func (t *tracing) uninstall() {
	otel.SetTracerProvider(t.previous)
	_ = t.provider.Shutdown(context.Background())
}
