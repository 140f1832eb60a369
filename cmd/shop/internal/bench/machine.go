package bench

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// loadAverage is /proc/loadavg's 1, 5 and 15 minute averages; nil where it cannot be read
// (not Linux).
func loadAverage() []float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return nil
	}
	fields := strings.Fields(string(b))
	var avg []float64
	for _, f := range fields[:min(3, len(fields))] {
		v, err := strconv.ParseFloat(f, 64)
		if err != nil {
			return nil
		}
		avg = append(avg, v)
	}
	return avg
}

// Memory is the process's resident memory (/proc/self/status), in MiB: everything the
// process holds, the in-process gateway included.
type Memory struct {
	// IdleRSSMiB is VmRSS with one started, idle stack (the sustained phase's, before its load).
	IdleRSSMiB float64 `json:"idle_rss_mib"`
	// LoadRSSMiB is the highest VmRSS sampled during the sustained phase.
	LoadRSSMiB float64 `json:"load_rss_mib"`
	// PeakMiB is VmHWM at the end: the run's peak, when two stacks ran at once included.
	PeakMiB float64 `json:"peak_hwm_mib"`
}

// memoryStatus reads VmRSS and VmHWM from /proc/self/status, in MiB; zeros where it cannot.
func memoryStatus() (rss, hwm float64) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		fields := strings.Fields(value) // "123456 kB"
		if len(fields) == 0 {
			continue
		}
		kb, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			continue
		}
		switch name {
		case "VmRSS":
			rss = kb / 1024
		case "VmHWM":
			hwm = kb / 1024
		}
	}
	return rss, hwm
}

// rssSampler records the highest VmRSS seen while it runs.
type rssSampler struct {
	stop chan struct{}
	done chan struct{}
	max  float64
}

func sampleRSS(every time.Duration) *rssSampler {
	s := &rssSampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			rss, _ := memoryStatus()
			s.max = max(s.max, rss)
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// Stop ends the sampling and returns the highest VmRSS seen, in MiB.
func (s *rssSampler) Stop() float64 {
	close(s.stop)
	<-s.done
	return s.max
}

// progress is the line on stderr that says what the run is doing: one line rewritten in
// place on a terminal, plain lines otherwise (a log, CI).
type progress struct {
	mu     sync.Mutex
	w      io.Writer
	tty    bool
	began  time.Time
	budget time.Duration
}

func newProgress(w io.Writer, budget time.Duration) *progress {
	tty := false
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			tty = true
		}
	}
	return &progress{w: w, tty: tty, began: time.Now(), budget: budget}
}

// say shows what the run does now, with the time spent and the budget.
func (p *progress) say(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	line := fmt.Sprintf("bench %4.0fs/%s: %s", time.Since(p.began).Seconds(), p.budget, fmt.Sprintf(format, args...))
	if p.tty {
		fmt.Fprintf(p.w, "\r%-99.99s", line)
		return
	}
	fmt.Fprintln(p.w, line)
}

// done ends the progress line.
func (p *progress) done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty {
		fmt.Fprintf(p.w, "\r%-99s\r", "")
	}
}
