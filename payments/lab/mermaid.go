package lab

import (
	"fmt"
	"strings"
)

// Mermaid writes r's timeline as a Mermaid sequenceDiagram, for slides: every message an
// arrow from its sender to its receiver (a response dashed), every mark a note over its lane,
// and a note where more than a second passed.
func Mermaid(r Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "sequenceDiagram\n    title %s (%s)\n", r.Scenario, r.Mode)
	for _, l := range Lanes {
		fmt.Fprintf(&b, "    participant %s\n", l)
	}
	var last int64
	for i, ev := range r.Events {
		if i > 0 && ev.AtMS-last > 1000 {
			fmt.Fprintf(&b, "    Note over %s,%s: %s later\n", Lanes[0], Lanes[len(Lanes)-1], Gap(ev.AtMS-last))
		}
		last = ev.AtMS
		label := mermaidText(fmt.Sprintf("%d ms %s", ev.AtMS, ev.Label))
		if ev.Decisive {
			label = "⚑ " + label
		}
		if ev.Message < 0 || ev.Message >= len(r.Messages) {
			fmt.Fprintf(&b, "    Note over %s: %s\n", ev.Lane, label)
			continue
		}
		m := r.Messages[ev.Message]
		arrow := "->>"
		if m.Kind == MessageResponse {
			arrow = "-->>"
		}
		fmt.Fprintf(&b, "    %s%s%s: %s\n", m.From, arrow, m.To, label)
	}
	return b.String()
}

// mermaidText keeps a label from ending the line or the statement early.
func mermaidText(s string) string {
	return strings.NewReplacer("\n", " ", ";", ",", "#", "no. ").Replace(s)
}

// Gap words a pause between two events: "1.7 s", "850 ms".
func Gap(ms int64) string {
	if ms < 1000 {
		return fmt.Sprintf("%d ms", ms)
	}
	return fmt.Sprintf("%.1f s", float64(ms)/1000)
}
