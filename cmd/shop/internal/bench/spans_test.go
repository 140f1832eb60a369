package bench

import (
	"context"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// TestAggregatorCountsSpansByName makes spans with known durations through a real SDK
// provider and checks the aggregator's count, median and mean per name.
func TestAggregatorCountsSpansByName(t *testing.T) {
	agg := newSpanAggregator()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(agg))
	defer tp.Shutdown(context.Background())
	tracer := tp.Tracer("bench-test")
	base := time.Now()
	span := func(name string, d time.Duration) {
		_, s := tracer.Start(context.Background(), name, trace.WithTimestamp(base))
		s.End(trace.WithTimestamp(base.Add(d)))
	}
	for _, d := range []time.Duration{1, 2, 6} {
		span("phase charge", d*time.Millisecond)
	}
	span("idempotency reserve", 20*time.Millisecond)

	got := agg.stats()
	want := []SpanStat{ // most time in all first: reserve's 20 ms before charge's 9 ms
		{Name: "idempotency reserve", Count: 1, P50Ms: 20, MeanMs: 20},
		{Name: "phase charge", Count: 3, P50Ms: 2, MeanMs: 3},
	}
	if len(got) != len(want) {
		t.Fatalf("stats = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("stats[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
	agg.reset()
	if got := agg.stats(); len(got) != 0 {
		t.Errorf("after reset: %+v, want nothing", got)
	}
}

// TestSwitchSamplerRecordsOnlyWhileOn checks that spans started with the switch off reach
// no processor, and that children follow their root's decision.
func TestSwitchSamplerRecordsOnlyWhileOn(t *testing.T) {
	agg := newSpanAggregator()
	sampler := &switchSampler{}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.ParentBased(sampler)), sdktrace.WithSpanProcessor(agg))
	defer tp.Shutdown(context.Background())
	tracer := tp.Tracer("bench-test")

	_, off := tracer.Start(context.Background(), "while off")
	off.End()
	sampler.on.Store(true)
	ctx, root := tracer.Start(context.Background(), "root")
	sampler.on.Store(false) // the window closes while the trace runs: its child is still kept
	_, child := tracer.Start(ctx, "child")
	child.End()
	root.End()

	names := map[string]int{}
	for _, s := range agg.stats() {
		names[s.Name] = s.Count
	}
	if names["while off"] != 0 || names["root"] != 1 || names["child"] != 1 {
		t.Errorf("recorded %v, want root and child once each and nothing while off", names)
	}
}
