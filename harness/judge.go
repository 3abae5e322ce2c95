package harness

import (
	"context"
	"fmt"
	"time"

	"github.com/snowchaos/snowchaos/harness/target"
)

// judgeTimeout bounds a second judge's verdict (the oracle's final
// count).
const judgeTimeout = time.Minute

// judge asks a target that keeps its own record of the IDs (target.Judge)
// for its verdict; nil for other targets.
func (r *run) judge() *target.Judgement {
	j, ok := r.tgt.(target.Judge)
	if !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), judgeTimeout)
	defer cancel()
	v := j.Judge(ctx, r.runID)
	return &v
}

// judgeCheck is the check that a second judge agrees with the verifier:
// the same number of IDs and exactly the same number of duplicates. A
// judge that could not judge is shown (with its reason) and not counted.
func judgeCheck(j target.Judgement, f Figures) Check {
	c := Check{Expr: j.Name + " agrees with the verifier"}
	if j.Unknown != "" {
		c.Info, c.Verdict, c.Reason = true, Unknown, j.Unknown
		c.Observed = "no verdict"
		return c
	}
	c.Observed = fmt.Sprintf("%d IDs, %d duplicates (verifier: %d IDs, %d duplicates)", j.IDs, j.Duplicates, f.IDs, f.Duplicates)
	if j.Detail != "" {
		c.Observed += "; " + j.Detail
	}
	c.Verdict = Pass
	if j.IDs != f.IDs || j.Duplicates != f.Duplicates {
		c.Verdict = Fail
	}
	return c
}
