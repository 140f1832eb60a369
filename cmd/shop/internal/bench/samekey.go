package bench

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// sameKeyClients is how many requests the same-key step sends on one fresh key at once.
const sameKeyClients = 20

// SameKeyRow is the step of twenty requests on one fresh key, sent at once by clients that
// honour Retry-After: each sleeps what the header says, then tries again, until it has the
// 201 or its replay.
type SameKeyRow struct {
	// Prefer is the Prefer header sent ("" for none, or "wait=2").
	Prefer    string `json:"prefer"`
	Requests  int    `json:"requests"`  // attempts, all clients together
	Created   int    `json:"created"`   // fresh 201s: 1 when the key does its job
	Replays   int    `json:"replays"`   // 201s marked Idempotent-Replayed
	Conflicts int    `json:"conflicts"` // 409s received (and slept on)
	Other     int    `json:"other"`     // any other answer, and transport errors
	// MaxRetryAfterS is the largest Retry-After a 409 said, in seconds.
	MaxRetryAfterS int `json:"max_retry_after_s"`
	// AfterWinner is the time from the winner's 201 to each other client's final answer, ms.
	AfterWinnerP50Ms float64 `json:"after_winner_p50_ms"`
	AfterWinnerP99Ms float64 `json:"after_winner_p99_ms"`
	AfterWinnerMaxMs float64 `json:"after_winner_max_ms"`
	// TimedOut is how many clients had no final answer when the step's bound ended it.
	TimedOut int     `json:"timed_out"`
	BoundS   float64 `json:"bound_s"`
	TookS    float64 `json:"took_s"`
}

// sameKeyStep sends sameKeyClients checkouts on one fresh key at once to b, with the Prefer
// header prefer ("" for none), and follows each client until its final answer or bound.
func sameKeyStep(ctx context.Context, b *benchStack, prefer string, bound time.Duration) SameKeyRow {
	row := SameKeyRow{Prefer: prefer, BoundS: bound.Seconds()}
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	// A client of its own, pooled for the twenty: every request is one attempt (post removes
	// GetBody, so Go's transport cannot resend a request with an Idempotency-Key by itself).
	client := newShopClient(b.client.base, b.client.apiKeys, sameKeyClients)
	defer client.close()
	var header http.Header
	if prefer != "" {
		header = http.Header{"Prefer": {prefer}}
	}
	p, key := client.nextPurchase(checkoutPath), newKey()

	var (
		mu     sync.Mutex
		winner time.Time
		finals []time.Time // the other clients' final answers
		wg     sync.WaitGroup
		start  = make(chan struct{})
	)
	began := time.Now()
	for range sameKeyClients {
		wg.Go(func() {
			<-start
			for ctx.Err() == nil {
				a := client.post(ctx, checkoutPath, p, key, header)
				at := time.Now()
				mu.Lock()
				row.Requests++
				switch {
				case a.err == nil && a.status == http.StatusCreated && !a.replayed:
					row.Created++
					winner = at
					mu.Unlock()
					return
				case a.err == nil && a.status == http.StatusCreated:
					row.Replays++
					finals = append(finals, at)
					mu.Unlock()
					return
				case a.err == nil && a.status == http.StatusConflict:
					row.Conflicts++
				default:
					if ctx.Err() == nil {
						row.Other++
					}
				}
				wait := retryAfter(a.retryAfter)
				if wait > 0 {
					row.MaxRetryAfterS = max(row.MaxRetryAfterS, int(wait/time.Second))
				} else {
					wait = 100 * time.Millisecond // no header: a short pause, then again
				}
				mu.Unlock()
				select { // the header's value, never more; the step's bound ends it sooner
				case <-time.After(wait):
				case <-ctx.Done():
				}
			}
			mu.Lock()
			row.TimedOut++
			mu.Unlock()
		})
	}
	close(start)
	wg.Wait()
	row.TookS = time.Since(began).Seconds()
	if !winner.IsZero() {
		var after []time.Duration
		for _, f := range finals {
			after = append(after, max(f.Sub(winner), 0))
		}
		row.AfterWinnerP50Ms, row.AfterWinnerP99Ms, row.AfterWinnerMaxMs =
			percentile(after, 50), percentile(after, 99), percentile(after, 100)
	}
	return row
}

// retryAfter is a Retry-After header's delay in seconds; 0 if it has none or another form.
func retryAfter(h string) time.Duration {
	s, err := strconv.Atoi(h)
	if err != nil || s < 0 {
		return 0
	}
	return time.Duration(s) * time.Second
}
