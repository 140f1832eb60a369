package idempotency

import (
	"net/http"
	"testing"
	"time"
)

func TestPreferredWait(t *testing.T) {
	for _, c := range []struct {
		prefer []string
		want   time.Duration // 0: no wait preference
	}{
		{nil, 0},
		{[]string{"wait=2"}, 2 * time.Second},
		{[]string{"WAIT = 3"}, 3 * time.Second},
		{[]string{`wait="4"`}, 4 * time.Second},
		{[]string{"wait=60"}, MaxWait},
		{[]string{"wait=99999999999999999999"}, 0}, // not a number we can read: ignored
		{[]string{"respond-async, wait=1"}, time.Second},
		{[]string{"handling=lenient; a=b", "wait=2;x=y"}, 2 * time.Second},
		{[]string{"wait=1, wait=5"}, time.Second}, // only the first counts
		{[]string{"wait=abc"}, 0},
		{[]string{"wait=0"}, 0},
		{[]string{"wait=-1"}, 0},
		{[]string{"wait=+1"}, 0},
		{[]string{"wait="}, 0},
		{[]string{"waiting=2"}, 0},
		{[]string{"return=minimal"}, 0},
	} {
		h := http.Header{}
		for _, v := range c.prefer {
			h.Add(HeaderPrefer, v)
		}
		got, ok := preferredWait(h)
		if ok != (c.want > 0) || got != c.want {
			t.Errorf("Prefer %q: got %v (ok %v), want %v", c.prefer, got, ok, c.want)
		}
	}
}

func TestRetryAfterEstimate(t *testing.T) {
	const lease = 30 * time.Second
	const endpoint = "POST /api/v1/checkout"
	t.Run("NoHistory", func(t *testing.T) {
		var m Middleware
		if got := m.retryAfter(endpoint, lease); got != "1" {
			t.Fatalf("got %s, want 1", got)
		}
	})
	t.Run("QuickOperations", func(t *testing.T) {
		var m Middleware
		for i := range 100 {
			m.durations.record(endpoint, time.Duration(i+1)*time.Millisecond)
		}
		if got := m.durations.p90(endpoint); got != 95*time.Millisecond {
			t.Fatalf("p90 of the last 50 (51…100 ms): got %v, want 95ms", got)
		}
		if got := m.retryAfter(endpoint, lease); got != "1" {
			t.Fatalf("got %s, want 1", got)
		}
	})
	t.Run("SlowOperations", func(t *testing.T) {
		var m Middleware
		for i := range 10 {
			m.durations.record(endpoint, 2500*time.Millisecond+time.Duration(i)*time.Millisecond)
		}
		m.durations.record("POST /api/v1/orders", 10*time.Millisecond) // another endpoint's pace
		if got := m.retryAfter(endpoint, lease); got != "3" {
			t.Fatalf("got %s, want 3 (2.5 s rounded up)", got)
		}
		if got := m.retryAfter("POST /api/v1/orders", lease); got != "1" {
			t.Fatalf("another endpoint: got %s, want 1", got)
		}
		if got := m.retryAfter(endpoint, 1200*time.Millisecond); got != "2" {
			t.Fatalf("at most the rest of the lease: got %s, want 2", got)
		}
	})
}
