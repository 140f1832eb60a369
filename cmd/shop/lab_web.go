package main

import (
	"context"
	"io"

	"checkoutlab/models"
	"checkoutlab/payments/lab"
)

// labWeb runs the failure lab for the browser (handlers.LabPages): each run on a fresh
// in-process stack with a temporary SQLite database, whatever database this shop uses, so a
// run never touches the shop's own data.
type labWeb struct{}

func (labWeb) Scenarios() []lab.Scenario { return lab.Scenarios }

func (labWeb) Run(ctx context.Context, name string, mode lab.Mode) (lab.Result, error) {
	s, ok := lab.Find(name)
	if !ok {
		return lab.Result{}, models.Errorf(models.KindNotFound, models.ErrNotFound.Code, "no lab scenario %q", name)
	}
	return runScenario(ctx, s, mode, "", io.Discard), nil
}
