package pages

import "checkoutlab/web/layout"

// ChaosFormPage is /lab/chaos: the form that starts a chaos run, and the recent runs.
type ChaosFormPage struct {
	Layout    layout.Page
	CSRF      string
	Seed      int64
	Purchases int
	Replicas  int
	Switches  []string // the switches one of which may be turned off
	Busy      bool     // a run is going on: the form's button is disabled
	Runs      []ChaosRunLink
}

// ChaosRunLink is one run in the list of recent runs.
type ChaosRunLink struct {
	URL, Label, Status, Verdict string
	OK                          bool
}

// ChaosBusyPage answers a run asked for while another is running.
type ChaosBusyPage struct {
	Layout  layout.Page
	RunURL  string // the run that is going on
	FormURL string
}

// ChaosProgressView is a run's progress, shown while it runs and refreshed by htmx.
type ChaosProgressView struct {
	ProgressURL string
	Phase       string
	Done, Total int
	Answered    int
	GaveUp      int
	Faults      int
	Kills       int
	Percent     int
}

// ChaosRunPage is one chaos run: its progress while it runs, its result once judged.
type ChaosRunPage struct {
	Layout   layout.Page
	Label    string // "seed 1 · 200 purchases · 3 replicas · every protection on"
	Status   string // running, done, failed
	Error    string
	Progress ChaosProgressView

	OK, Harm                             bool
	Verdict                              string
	Database, Took, Unsettled            string
	Answered, GaveUp, Declined           int
	DoubleCharges, DuplicateOrders, Lost int
	DuplicateReceipts, StatusRegressed   int
	Suspected, Kills, Faults, Purchases  int
	Overcharge                           string // in money, "nothing" when none
	OverchargeMinor                      int64  // of all currencies together, for tests
	Checks                               []ChaosCheck
	Chart                                ChaosChart
	Worst                                []ChaosWorstLink
	Problems                             []string
	JSONURL, FormURL                     string
}

// ChaosChart is the purchases over time, with the strikes marked, its geometry computed by
// the handler.
type ChaosChart struct {
	Width, Height int
	Line          string // the polyline's points: purchases finished so far
	Dots          []ChaosDot
	Marks         []ChaosChartMark
	TotalLabel    string // the y axis' top
	TimeLabel     string // the x axis' end
}

// ChaosDot is a purchase that did not go through (declined, gave up).
type ChaosDot struct {
	X, Y    int
	Outcome string
}

// ChaosChartMark is a strike: a fault (short tick) or a replica killed (a line across).
type ChaosChartMark struct {
	X     int
	Kind  string // fault, kill, crash
	Label string
}

// ChaosWorstLink is one of the worst purchases, linked to its order's timeline.
type ChaosWorstLink struct {
	Purchase int
	OrderID  string
	Why      string
	URL      string
}

// ChaosTimelinePage is the journal of one order of a chaos run.
type ChaosTimelinePage struct {
	Layout  layout.Page
	OrderID string
	Why     string
	Rows    []ChaosRow
	RunURL  string
}

// ChaosRow is one journal event of an order's timeline.
type ChaosRow struct {
	Time, Actor, Kind, Detail string
}

// ChaosCheck is one invariant's outcome.
type ChaosCheck struct {
	Invariant string
	Holds     bool
	Detail    string
}
