//go:build linux

package remote

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/harness/target"
	"github.com/snowchaos/snowchaos/verify/pgoracle"
)

// The multi-client verdict: every ID a netns node returns to a load
// client also goes, tagged with the client, to the Postgres oracle
// (verify/pgoracle, on $SNOWCHAOS_PG_DSN or the machine's Postgres), a
// judge that shares nothing with the harness's verifier. At the end of the
// run the harness asks it (target.Judge) and checks that the two agree
// exactly; the oracle names the clients that received each duplicate.
// When the verification sink (snowchaos verify) is available, it is one
// more judge fed the same way: an idJudge.

// idJudge records the IDs each load client received and judges them at
// the end of a run.
type idJudge interface {
	// add records ids received by client.
	add(client int, ids []generator.ID)
	// judge returns the verdict (once; it frees the judge's resources).
	judge(ctx context.Context) target.Judgement
	// close frees the judge's resources without a verdict.
	close()
}

// oracleJudge is the Postgres oracle as an idJudge.
type oracleJudge struct {
	o   *pgoracle.Oracle
	why string // set when the oracle could not start
}

// newOracleJudge connects the oracle; when Postgres cannot be reached the
// judge answers unknown, naming why.
func newOracleJudge(ctx context.Context) *oracleJudge {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	o, err := pgoracle.New(ctx, pgoracle.Config{ApplicationName: "snowchaos-netns", Writers: 1})
	if err != nil {
		return &oracleJudge{why: fmt.Sprintf("no Postgres for the oracle at %s ($%s): %v", redact(pgoracle.DSN("")), pgoracle.EnvDSN, err)}
	}
	return &oracleJudge{o: o}
}

// redact hides a DSN's password.
func redact(dsn string) string {
	if i := strings.Index(dsn, "@"); i >= 0 {
		if j := strings.Index(dsn, "://"); j >= 0 && j < i {
			if k := strings.Index(dsn[j+3:i], ":"); k >= 0 {
				return dsn[:j+3+k] + ":xxx" + dsn[i:]
			}
		}
	}
	return dsn
}

func (j *oracleJudge) add(client int, ids []generator.ID) {
	if j.o != nil && len(ids) > 0 {
		_ = j.o.Add(int16(client), ids) // a failed write makes the verdict unknown
	}
}

func (j *oracleJudge) judge(ctx context.Context) target.Judgement {
	v := target.Judgement{Name: "postgres oracle"}
	if j.o == nil {
		v.Unknown = j.why
		return v
	}
	defer j.close()
	res, err := j.o.Finish(ctx)
	if err != nil {
		v.Unknown = err.Error()
		return v
	}
	if res.Verdict == pgoracle.VerdictUnknown {
		v.Unknown = res.Reason
		return v
	}
	v.IDs, v.Duplicates = res.Submitted, res.Duplicates
	var parts []string
	for i, d := range res.Details {
		if i == 3 {
			parts = append(parts, fmt.Sprintf("and %d more", len(res.Details)-3))
			break
		}
		parts = append(parts, fmt.Sprintf("%s x%d to clients %v", d.ID, d.Count, d.Sources))
	}
	v.Detail = strings.Join(parts, ", ")
	return v
}

func (j *oracleJudge) close() {
	if j.o != nil {
		j.o.Close()
		j.o = nil
	}
}

// Judge implements target.Judge: the oracle's verdict on the run's IDs.
func (t *Netns) Judge(ctx context.Context, run string) target.Judgement {
	r, err := t.lookup(run)
	if err != nil {
		return target.Judgement{Name: "postgres oracle", Unknown: err.Error()}
	}
	return r.judge.judge(ctx)
}
