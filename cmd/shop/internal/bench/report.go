package bench

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// writeReport prints res as text that fits 100 columns: the machine, then a table per phase,
// then the targets.
func writeReport(w io.Writer, res *Result) error {
	var b strings.Builder
	m, s := res.Machine, res.Settings
	db := m.Dialect
	if m.DatabaseVersion != "" {
		db += " " + m.DatabaseVersion
	}
	fmt.Fprintf(&b, "shop bench: %s, %d clients, budget %s, took %s\n", db, s.Clients,
		time.Duration(s.DurationS*float64(time.Second)), time.Duration(res.TookS*float64(time.Second)).Round(time.Second))
	fmt.Fprintf(&b, "machine: %d CPUs, %s %s; load average %s at start, %s at end\n", m.CPUs, m.GoVersion, m.OS,
		loadText(m.LoadStart), loadText(m.LoadEnd))
	fmt.Fprintf(&b, "figures: median of %d interleaved rounds (min–max), %.2f s per measurement\n", s.Rounds, s.CellS)

	section(&b, "Creation: a new key per request; unprotected = server_idempotency off")
	t := table(&b)
	fmt.Fprintln(t, "endpoint\tclients\tvariant\treq/s\tp50 ms\tp99 ms\tunexpected")
	for _, row := range res.Creation {
		name := short(row.Endpoint)
		for _, v := range []struct {
			name string
			s    Summary
		}{{"protected", row.Protected}, {"unprotected", row.Unprotected}} {
			fmt.Fprintf(t, "%s\t%d\t%s\t%s\t%s\t%s\t%s\n", name, row.Clients, v.name, spreadText(v.s.Throughput, "%.0f"),
				spreadText(v.s.P50Ms, "%.2f"), spreadText(v.s.P99Ms, "%.1f"), unexpectedText(v.s))
			name = ""
		}
		fmt.Fprintf(t, "\t\tratio p/u\t%s\t\t\t\n", spreadText(row.Ratio, "%.2f"))
	}
	t.Flush()

	section(&b, "Replay: a completed key sent again (protected)")
	t = table(&b)
	fmt.Fprintln(t, "endpoint\tclients\treq/s\tp50 ms\tp99 ms\treplay/creation\tunexpected")
	for _, row := range res.Replay {
		r := row.Replay
		fmt.Fprintf(t, "%s\t%d\t%s\t%s\t%s\t%s\t%s\n", short(row.Endpoint), row.Clients, spreadText(r.Throughput, "%.0f"),
			spreadText(r.P50Ms, "%.2f"), spreadText(r.P99Ms, "%.1f"), spreadText(row.RatioToCreation, "%.1f"), unexpectedText(r))
	}
	t.Flush()

	section(&b, fmt.Sprintf("Same key: %d checkouts on one fresh key at once, honouring Retry-After", sameKeyClients))
	t = table(&b)
	fmt.Fprintln(t, "Prefer\tattempts\t201\treplays\t409s\tmax Retry-After\tafter winner p50/p99/max ms\ttimed out\ttook")
	for _, row := range res.SameKey {
		prefer := row.Prefer
		if prefer == "" {
			prefer = "(none)"
		}
		fmt.Fprintf(t, "%s\t%d\t%d\t%d\t%d\t%d s\t%.0f / %.0f / %.0f\t%d of %.0fs\t%.1f s\n", prefer, row.Requests, row.Created,
			row.Replays, row.Conflicts, row.MaxRetryAfterS, row.AfterWinnerP50Ms, row.AfterWinnerP99Ms, row.AfterWinnerMaxMs,
			row.TimedOut, row.BoundS, row.TookS)
	}
	t.Flush()

	writePhases(&b, res.Phases)
	if res.Counters != nil {
		writeCounters(&b, res.Counters)
	}
	writeSustained(&b, res.Sustained, res.Memory)

	section(&b, "Targets of issue 16 (reported, not asserted)")
	t = table(&b)
	for _, tg := range res.Targets {
		verdict := "-"
		if tg.Met != nil {
			verdict = map[bool]string{true: "met", false: "NOT met"}[*tg.Met]
		}
		fmt.Fprintf(t, "%s\t%s\t%s\t%s\n", tg.Name, tg.Measured, tg.Target, verdict)
	}
	t.Flush()
	for _, e := range res.Errors {
		fmt.Fprintf(&b, "\nnot measured: %s\n", e)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func writePhases(b *strings.Builder, p PhaseTiming) {
	section(b, fmt.Sprintf("Time per phase: spans of %d checkouts in %.1f s with tracing on", p.Checkouts, p.WindowS))
	if len(p.Spans) == 0 {
		fmt.Fprintln(b, "no spans recorded")
		return
	}
	t := table(b)
	fmt.Fprintln(t, "span\tcount\tp50 ms\tmean ms")
	for _, s := range p.Spans {
		fmt.Fprintf(t, "%s\t%d\t%.2f\t%.2f\n", cut(s.Name, 60), s.Count, s.P50Ms, s.MeanMs)
	}
	t.Flush()
}

func writeCounters(b *strings.Builder, c *Counters) {
	section(b, "Database counters per checkout (pg_stat_database, pg_stat_user_tables)")
	t := table(b)
	fmt.Fprintln(t, "variant\tcheckouts\tcommits\tnet of idle\tidle commits/s\tshop ins/upd\tgw_ ins/upd\triver_ ins/upd")
	for _, v := range []struct {
		name string
		w    CounterWindow
	}{{"protected", c.Protected}, {"unprotected", c.Unprotected}} {
		groups := make([]string, 3)
		for i := range groups {
			groups[i] = "-"
			if i < len(v.w.Groups) {
				groups[i] = fmt.Sprintf("%.1f / %.1f", v.w.Groups[i].Inserted, v.w.Groups[i].Updated)
			}
		}
		fmt.Fprintf(t, "%s\t%d\t%.1f\t%.1f\t%.1f\t%s\t%s\t%s\n", v.name, v.w.Checkouts, v.w.CommitsPerCheckout,
			v.w.NetCommitsPerCheckout, v.w.IdleCommitsPerS, groups[0], groups[1], groups[2])
	}
	t.Flush()
	fmt.Fprintln(b, "rows per checkout, by table (inserted / updated):")
	t = table(b)
	fmt.Fprintln(t, "table\tprotected\tunprotected")
	for _, name := range tableNames(c) {
		fmt.Fprintf(t, "%s\t%s\t%s\n", cut(name, 40), rowsText(c.Protected, name), rowsText(c.Unprotected, name))
	}
	t.Flush()
}

func writeSustained(b *strings.Builder, s Sustained, mem Memory) {
	section(b, fmt.Sprintf("Sustained: %d clients checking out for %.0f s on a fresh stack", s.Clients, s.DurationS))
	fmt.Fprintf(b, "%d checkouts, %.0f/s, p50 %.2f ms, p99 %.2f ms, %d unexpected\n", s.Checkouts, s.Throughput,
		s.P50Ms, s.P99Ms, s.Unexpected)
	t := table(b)
	fmt.Fprintln(t, "backlog at the end\twaiting\tdone during load\t= seconds of work\tdrained after")
	for _, v := range []struct {
		name string
		b    Backlog
	}{{"webhook deliveries", s.Deliveries}, {"jobs (River)", s.Jobs}} {
		drained := fmt.Sprintf("not within %.0f s", s.DrainBoundS)
		if v.b.DrainS != nil {
			drained = fmt.Sprintf("%.1f s", *v.b.DrainS)
		}
		fmt.Fprintf(t, "%s\t%d\t%d (%.0f/s)\t%.1f s\t%s\n", v.name, v.b.AtEnd, v.b.DoneDuringLoad, v.b.RatePerS,
			v.b.WorkS, drained)
	}
	t.Flush()
	fmt.Fprintf(b, "memory (VmRSS): %.0f MiB idle, %.0f MiB under load; peak of the run (VmHWM) %.0f MiB\n",
		mem.IdleRSSMiB, mem.LoadRSSMiB, mem.PeakMiB)
}

func section(b *strings.Builder, title string) { fmt.Fprintf(b, "\n%s\n", title) }

func table(b *strings.Builder) *tabwriter.Writer { return tabwriter.NewWriter(b, 0, 0, 2, ' ', 0) }

// short is an endpoint's last path element: "checkout", "orders".
func short(path string) string { return path[strings.LastIndex(path, "/")+1:] }

func cut(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

func unexpectedText(s Summary) string {
	if s.Unexpected == 0 {
		return "0"
	}
	return fmt.Sprintf("%d: %s", s.Unexpected, cut(s.FirstError, 16))
}

func loadText(avg []float64) string {
	if len(avg) == 0 {
		return "unknown"
	}
	parts := make([]string, len(avg))
	for i, v := range avg {
		parts[i] = fmt.Sprintf("%.2f", v)
	}
	return strings.Join(parts, " ")
}

// tableNames are the tables either window touched, in order.
func tableNames(c *Counters) []string {
	seen := map[string]bool{}
	var names []string
	for _, w := range []CounterWindow{c.Protected, c.Unprotected} {
		for _, t := range w.Tables {
			if !seen[t.Name] {
				seen[t.Name] = true
				names = append(names, t.Name)
			}
		}
	}
	slices.Sort(names)
	return names
}

func rowsText(w CounterWindow, name string) string {
	for _, t := range w.Tables {
		if t.Name == name {
			return fmt.Sprintf("%.2f / %.2f", t.Inserted, t.Updated)
		}
	}
	return "-"
}
