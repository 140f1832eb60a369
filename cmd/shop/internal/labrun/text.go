package labrun

import (
	"fmt"
	"io"
	"strings"

	"checkoutlab/payments/lab"
)

// laneWidth is the width of one lane in the text timeline: 7 + 5×9 + 48 = 100 columns.
const laneWidth = 9

// printTimeline prints r's timeline as a sequence diagram in text (--timeline): a column per
// lane, every message an arrow from its sender to its receiver (a request ─, a response ╌,
// a webhook ═, a job ·), every mark a ◆ on its lane, ⚑ before a decisive event.
func printTimeline(w io.Writer, r lab.Result) {
	head := fmt.Sprintf("%7s", "ms")
	for _, l := range lab.Lanes {
		head += center(l, laneWidth)
	}
	fmt.Fprintln(w, head)
	col := map[string]int{}
	for i, l := range lab.Lanes {
		col[l] = i
	}
	var last int64
	for i, ev := range r.Events {
		if i > 0 && ev.AtMS-last > 1000 {
			fmt.Fprintf(w, "%7s%s ⋯ %s later\n", "", lanes(), lab.Gap(ev.AtMS-last))
		}
		last = ev.AtMS
		track := []rune(lanes())
		switch {
		case ev.Message >= 0 && ev.Message < len(r.Messages):
			m := r.Messages[ev.Message]
			from, to := col[m.From]*laneWidth+laneWidth/2, col[m.To]*laneWidth+laneWidth/2
			line := map[string]rune{lab.MessageResponse: '╌', lab.MessageWebhook: '═', lab.MessageJob: '·'}[m.Kind]
			if line == 0 {
				line = '─'
			}
			for x := min(from, to); x <= max(from, to); x++ {
				track[x] = line
			}
			track[to] = '▶'
			if to < from {
				track[to] = '◀'
			}
		case ev.Mark:
			track[col[ev.Lane]*laneWidth+laneWidth/2] = '◆'
		default:
			track[col[ev.Lane]*laneWidth+laneWidth/2] = '•'
		}
		label := ev.Label
		if ev.Decisive {
			label = "⚑ " + label
		}
		fmt.Fprintln(w, clip(fmt.Sprintf("%7d%s %s", ev.AtMS, string(track), label), tableWidth))
	}
}

// lanes is an empty track: each lane's line in the middle of its column.
func lanes() string {
	return strings.Repeat(center("│", laneWidth), len(lab.Lanes))
}

func center(s string, width int) string {
	n := len([]rune(s))
	left := (width - n) / 2
	return strings.Repeat(" ", left) + s + strings.Repeat(" ", width-n-left)
}
