package idempotency

import (
	"slices"
	"sync"
	"time"
)

// Retry-After on a 409 "in progress" says when the answer will probably exist. The rest of the
// owner's lease (up to IDEMPOTENCY_LEASE, 30 s) would be honest only about the worst case: a
// client that does what the header says would wait half a minute for an answer that is there
// a few milliseconds later. So the middleware keeps, per endpoint, the durations of the last
// recentDurations operations that completed in this process, and answers their 90th
// percentile, rounded up to whole seconds (the header's unit), at least 1 s and at most the
// rest of the lease (by then a crashed owner's key can be taken over).
//
// It does not subtract how long the owner has already been running: a duplicate does not know
// (the key's row says when its owner last renewed the lease, not when it started), so the
// estimate errs on the long side by at most that much. Before any operation of the endpoint
// has completed, the estimate is 1 s.

// recentDurations is how many completed operations per endpoint the estimate looks at: enough
// for a 90th percentile to mean something, few enough to follow a change of pace quickly.
const recentDurations = 50

// defaultEstimate is the estimate before an endpoint has any history.
const defaultEstimate = time.Second

// durations keeps the recent durations of completed operations per endpoint ("POST
// /api/v1/checkout"). The zero value is ready to use; it is safe for concurrent use.
type durations struct {
	mu    sync.Mutex
	rings map[string]*ring
}

// ring is the last recentDurations durations of one endpoint; next is where the next one goes.
type ring struct {
	d    [recentDurations]time.Duration
	n    int
	next int
}

// record adds the duration of an operation of endpoint that completed.
func (s *durations) record(endpoint string, took time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rings == nil {
		s.rings = map[string]*ring{}
	}
	r := s.rings[endpoint]
	if r == nil {
		r = &ring{}
		s.rings[endpoint] = r
	}
	r.d[r.next] = took
	r.next = (r.next + 1) % recentDurations
	r.n = min(r.n+1, recentDurations)
}

// p90 returns the 90th percentile of endpoint's recent durations, or defaultEstimate without
// any.
func (s *durations) p90(endpoint string) time.Duration {
	s.mu.Lock()
	r := s.rings[endpoint]
	var recent []time.Duration
	if r != nil {
		recent = slices.Clone(r.d[:r.n])
	}
	s.mu.Unlock()
	if len(recent) == 0 {
		return defaultEstimate
	}
	slices.Sort(recent)
	// The smallest duration that at least 90 % of the recent operations did not exceed.
	return recent[(len(recent)*9+9)/10-1]
}

// retryAfter is the Retry-After, in whole seconds, of a 409 for endpoint whose owner holds
// its lease for restOfLease more.
func (m *Middleware) retryAfter(endpoint string, restOfLease time.Duration) string {
	return retryAfterSeconds(min(m.durations.p90(endpoint), restOfLease))
}
