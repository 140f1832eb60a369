package bench

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"
)

// statsFlushWait is how long to wait, after the work to be counted, before reading
// PostgreSQL's cumulative statistics. A backend flushes its counters to shared memory when it
// goes idle, but not more often than once a second (PGSTAT_MIN_INTERVAL); one that was kept
// from flushing then arms a timer and flushes 10 s later (PGSTAT_IDLE_INTERVAL) even if it
// stays idle. pg_stat_force_next_flush() would help only the session that calls it — not the
// shop's pooled connections — so the benchmark waits out the longest delay instead.
const statsFlushWait = 11 * time.Second

// Counters is commits and rows per checkout from PostgreSQL's own counters, per variant.
type Counters struct {
	Protected   CounterWindow `json:"protected"`
	Unprotected CounterWindow `json:"unprotected"`
}

// CounterWindow is the deltas of pg_stat_database and pg_stat_user_tables over a counted
// window of checkouts on one stack's database: from quiet, through the checkouts and every
// webhook and job they caused, to quiet again.
type CounterWindow struct {
	Checkouts int     `json:"checkouts"`
	WindowS   float64 `json:"window_s"`
	// Commits is xact_commit's delta; CommitsPerCheckout divides it by Checkouts.
	Commits            int64   `json:"commits"`
	CommitsPerCheckout float64 `json:"commits_per_checkout"`
	// IdleCommitsPerS is the commit rate of the idle stack (pollers: job queue, completer,
	// the gateway's sender), measured just before; NetCommitsPerCheckout takes it out.
	IdleCommitsPerS       float64 `json:"idle_commits_per_s"`
	NetCommitsPerCheckout float64 `json:"net_commits_per_checkout"`
	// Groups are rows inserted and updated per checkout: the shop's tables, the gateway's
	// (gw_) and the job queue's (river_).
	Groups []TableRows `json:"groups"`
	// Tables are the same per table, those with any row.
	Tables []TableRows `json:"tables"`
}

// TableRows is rows inserted and updated per checkout in a table or a group of tables.
type TableRows struct {
	Name     string  `json:"name"`
	Inserted float64 `json:"inserted_per_checkout"`
	Updated  float64 `json:"updated_per_checkout"`
}

// pgSnapshot is the counters at one moment.
type pgSnapshot struct {
	at      time.Time
	commits int64
	ins     map[string]int64
	upd     map[string]int64
}

// snapshot reads xact_commit through the admin connection (another database, so the read
// itself is not one of the counted commits) and the per-table counters through tables, a
// connection to the benchmark's database (its reads insert and update nothing; they add a
// commit or two to a window of hundreds of checkouts). Statistics read inside a transaction
// are cached until it ends (stats_fetch_consistency): each read here runs on one connection
// right after pg_stat_clear_snapshot(), so it never sees a stale copy.
func snapshot(ctx context.Context, admin, tables *sql.DB, dbName string) (pgSnapshot, error) {
	s := pgSnapshot{at: time.Now(), ins: map[string]int64{}, upd: map[string]int64{}}
	a, err := admin.Conn(ctx)
	if err != nil {
		return s, err
	}
	defer a.Close()
	if _, err := a.ExecContext(ctx, "SELECT pg_stat_clear_snapshot()"); err != nil {
		return s, err
	}
	if err := a.QueryRowContext(ctx, "SELECT xact_commit FROM pg_stat_database WHERE datname = $1", dbName).
		Scan(&s.commits); err != nil {
		return s, fmt.Errorf("read pg_stat_database: %w", err)
	}
	t, err := tables.Conn(ctx)
	if err != nil {
		return s, err
	}
	defer t.Close()
	if _, err := t.ExecContext(ctx, "SELECT pg_stat_clear_snapshot()"); err != nil {
		return s, err
	}
	rows, err := t.QueryContext(ctx, "SELECT relname, n_tup_ins, n_tup_upd FROM pg_stat_user_tables")
	if err != nil {
		return s, fmt.Errorf("read pg_stat_user_tables: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var ins, upd int64
		if err := rows.Scan(&name, &ins, &upd); err != nil {
			return s, err
		}
		s.ins[name], s.upd[name] = ins, upd
	}
	return s, rows.Err()
}

// counterWindow counts a window of checkouts on b: wait for quiet, measure the idle commit
// rate, run the checkouts for d at clients, let their webhooks and jobs drain, wait for the
// counters to be flushed, and take the deltas.
func (r *Runner) counterWindow(ctx context.Context, b *benchStack, clients int, d, drainBound time.Duration) (CounterWindow, error) {
	var w CounterWindow
	admin, err := r.admin(ctx)
	if err != nil {
		return w, err
	}
	tables, err := b.st.DB().DB() // the shop's own pool: its reads of pg_stat insert and update nothing
	if err != nil {
		return w, err
	}
	deliveries, jobs := deliveriesCounter(b.gwDB), jobsCounter(b.st.DB())
	drain(ctx, drainBound, map[*Backlog]counter{{}: deliveries, {}: jobs})
	sleep(ctx, statsFlushWait)
	idleFrom, err := snapshot(ctx, admin, tables, b.dbName)
	if err != nil {
		return w, err
	}
	sleep(ctx, statsFlushWait)
	from, err := snapshot(ctx, admin, tables, b.dbName)
	if err != nil {
		return w, err
	}
	w.IdleCommitsPerS = float64(from.commits-idleFrom.commits) / from.at.Sub(idleFrom.at).Seconds()

	l := createLoad(ctx, b, cell{checkoutPath, clients}, d)
	w.Checkouts = len(l.latencies)
	drain(ctx, drainBound, map[*Backlog]counter{{}: deliveries, {}: jobs})
	sleep(ctx, statsFlushWait)
	to, err := snapshot(ctx, admin, tables, b.dbName)
	if err != nil {
		return w, err
	}
	if w.Checkouts == 0 {
		return w, fmt.Errorf("no checkout succeeded in the counted window: %s", l.FirstError)
	}
	n := float64(w.Checkouts)
	w.WindowS = to.at.Sub(from.at).Seconds()
	w.Commits = to.commits - from.commits
	w.CommitsPerCheckout = float64(w.Commits) / n
	w.NetCommitsPerCheckout = (float64(w.Commits) - w.IdleCommitsPerS*w.WindowS) / n
	groups := map[string]*TableRows{"shop": {Name: "shop"}, "gateway (gw_)": {Name: "gateway (gw_)"},
		"job queue (river_)": {Name: "job queue (river_)"}}
	for name, ins := range to.ins {
		t := TableRows{Name: name, Inserted: float64(ins-from.ins[name]) / n,
			Updated: float64(to.upd[name]-from.upd[name]) / n}
		if t.Inserted == 0 && t.Updated == 0 {
			continue
		}
		w.Tables = append(w.Tables, t)
		g := groups["shop"]
		switch {
		case strings.HasPrefix(name, "gw_"):
			g = groups["gateway (gw_)"]
		case strings.HasPrefix(name, "river_"):
			g = groups["job queue (river_)"]
		}
		g.Inserted += t.Inserted
		g.Updated += t.Updated
	}
	slices.SortFunc(w.Tables, func(a, b TableRows) int { return compareStrings(a.Name, b.Name) })
	w.Groups = []TableRows{*groups["shop"], *groups["gateway (gw_)"], *groups["job queue (river_)"]}
	return w, nil
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-time.After(d):
	case <-ctx.Done():
	}
}
