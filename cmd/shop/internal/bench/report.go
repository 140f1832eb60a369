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
	fmt.Fprintf(&b, "machine: %d CPUs, %s %s\n", m.CPUs, m.GoVersion, m.OS)
	fmt.Fprintf(&b, "load average: %s at start, %s at end\n", loadText(m.LoadStart), loadText(m.LoadEnd))
	fmt.Fprintf(&b, "figures: median of %d interleaved rounds (min–max), %.2f s per measurement\n", s.Rounds, s.CellS)

	section(&b, "Creation: a new key per request; unprotected = server_idempotency off")
	var firstErrors []string
	t := table(&b)
	fmt.Fprintln(t, "endpoint\tclients\tvariant\treq/s\tp50 ms\tp99 ms\terrors")
	for _, row := range res.Creation {
		name := short(row.Endpoint)
		for _, v := range []struct {
			name string
			s    Summary
		}{{"protected", row.Protected}, {"unprotected", row.Unprotected}} {
			fmt.Fprintf(t, "%s\t%d\t%s\t%s\t%s\t%s\t%d\n", name, row.Clients, v.name, spreadNum(v.s.Throughput),
				spreadNum(v.s.P50Ms), spreadNum(v.s.P99Ms), v.s.Unexpected)
			firstErrors = append(firstErrors, v.s.FirstError)
			name = ""
		}
		fmt.Fprintf(t, "\t\tratio p/u\t%s\t\t\t\n", spreadNum(row.Ratio))
	}
	t.Flush()
	writeFirstError(&b, firstErrors)

	section(&b, "Replay: a completed key sent again (protected)")
	firstErrors = nil
	t = table(&b)
	fmt.Fprintln(t, "endpoint\tclients\treq/s\tp50 ms\tp99 ms\treplay/creation\terrors")
	for _, row := range res.Replay {
		r := row.Replay
		fmt.Fprintf(t, "%s\t%d\t%s\t%s\t%s\t%s\t%d\n", short(row.Endpoint), row.Clients, spreadNum(r.Throughput),
			spreadNum(r.P50Ms), spreadNum(r.P99Ms), spreadNum(row.RatioToCreation), r.Unexpected)
		firstErrors = append(firstErrors, r.FirstError)
	}
	t.Flush()
	writeFirstError(&b, firstErrors)

	bound := 0.0
	if len(res.SameKey) > 0 {
		bound = res.SameKey[0].BoundS
	}
	section(&b, fmt.Sprintf("Same key: %d checkouts on one fresh key at once, honouring Retry-After (bound %.0f s)",
		sameKeyClients, bound))
	t = table(&b)
	fmt.Fprintln(t, "Prefer\ttries\t201\treplays\t409s\tRetry-After max\tafter winner ms p50/p99/max\ttimeouts\ttook")
	for _, row := range res.SameKey {
		prefer := row.Prefer
		if prefer == "" {
			prefer = "(none)"
		}
		fmt.Fprintf(t, "%s\t%d\t%d\t%d\t%d\t%d s\t%s / %s / %s\t%d\t%.1f s\n", prefer, row.Requests, row.Created,
			row.Replays, row.Conflicts, row.MaxRetryAfterS, num(row.AfterWinnerP50Ms), num(row.AfterWinnerP99Ms),
			num(row.AfterWinnerMaxMs), row.TimedOut, row.TookS)
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
		fmt.Fprintf(t, "%s\t%d\t%s\t%s\n", cut(s.Name, 60), s.Count, num(s.P50Ms), num(s.MeanMs))
	}
	t.Flush()
}

func writeCounters(b *strings.Builder, c *Counters) {
	section(b, "Database counters per checkout (pg_stat_database, pg_stat_user_tables)")
	t := table(b)
	fmt.Fprintln(t, "variant\tcheckouts\tcommits\tnet\tidle/s\tshop ins/upd\tgw_ ins/upd\triver_ ins/upd")
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
	fmt.Fprintf(b, "%d checkouts, %s/s, p50 %s ms, p99 %s ms, %d unexpected\n", s.Checkouts, num(s.Throughput),
		num(s.P50Ms), num(s.P99Ms), s.Unexpected)
	t := table(b)
	fmt.Fprintln(t, "backlog\twaiting\tmade during load\tdone during load\tbehind\tseconds of work")
	for _, v := range []struct {
		name string
		b    Backlog
	}{{"webhook deliveries", s.Deliveries}, {"jobs (River)", s.Jobs}} {
		work := fmt.Sprintf("> %.0f s", s.DrainBoundS) // not drained within the bound
		if v.b.WorkS != nil {
			work = fmt.Sprintf("%s s", num(*v.b.WorkS))
		}
		fmt.Fprintf(t, "%s\t%d\t%d (%s/s)\t%d (%s/s)\t%s s\t%s\n", v.name, v.b.AtEnd, v.b.MadeDuringLoad,
			num(v.b.MadeRatePerS), v.b.DoneDuringLoad, num(v.b.DoneRatePerS), num(v.b.BehindS), work)
	}
	t.Flush()
	fmt.Fprintln(b, "waiting when the load stopped; behind = that in seconds of load; seconds of work = its drain time")
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

// writeFirstError names the first unexpected answer of a table, if it had any.
func writeFirstError(b *strings.Builder, errs []string) {
	for _, e := range errs {
		if e != "" {
			fmt.Fprintf(b, "first unexpected answer: %s\n", cut(e, 75))
			return
		}
	}
}

// num shows v with three significant digits or so: 1234, 123, 12.3, 1.23.
func num(v float64) string {
	switch {
	case v >= 100 || v <= -100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10 || v <= -10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

// spreadNum is a spread with num's digits: "6.62 (6.20–7.01)".
func spreadNum(s Spread) string {
	if s.N == 0 {
		return "not measured"
	}
	return fmt.Sprintf("%s (%s–%s)", num(s.Median), num(s.Min), num(s.Max))
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
