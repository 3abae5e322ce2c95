package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/snowchaos/snowchaos/generator"
)

func init() {
	register(command{name: "gen", summary: "generate IDs, one per line", run: runGen})
}

// genClock is the clock gen uses; tests replace it.
var genClock = generator.SystemClock

// runGen implements `snowchaos gen`.
func runGen(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flagSet("gen", "gen [-n N] [--layout NAME] [--epoch RFC3339] [--node N] [--policy wait|refuse|logical] [--checkpoint FILE]", stderr)
	var lf layoutFlags
	lf.register(fs)
	n := fs.Int64("n", 1, "how many IDs to print (>= 1)")
	node := fs.Int64("node", 0, "node (worker) ID, 0..2^NodeBits-1")
	policy := fs.String("policy", "wait", "rewind policy: wait, refuse or logical")
	maxWait := fs.Duration("max-wait", time.Second, "deadline per call for rewind and exhaustion waits")
	checkpoint := fs.String("checkpoint", "", "file holding the reserved high-water mark, so reruns never repeat an ID")
	rest, err := parseInterleaved(fs, args)
	if err != nil {
		return flagExit(err)
	}
	bad := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "snowchaos gen: "+format+"\n", a...)
		return exitInvalid
	}
	if len(rest) > 0 {
		return bad("unexpected argument %q (use -n N)", rest[0])
	}
	if *n < 1 {
		return bad("-n = %d, want >= 1", *n)
	}
	if *maxWait <= 0 {
		return bad("--max-wait = %v, want > 0", *maxWait)
	}
	l, err := lf.layout()
	if err != nil {
		return bad("%v", err)
	}
	p, err := generator.ParsePolicy(*policy)
	if err != nil {
		return bad("--policy: %v", err)
	}
	s := generator.Settings{Layout: l, Node: *node, Policy: p, MaxWait: *maxWait, Clock: genClock()}
	if *checkpoint != "" {
		s.Checkpoint = generator.NewFileCheckpoint(*checkpoint)
	}
	g, err := generator.New(s)
	if err != nil {
		if errors.Is(err, generator.ErrNodeRange) {
			return bad("--node: %v", err)
		}
		return bad("%v", err)
	}
	w := bufio.NewWriter(stdout)
	buf := make([]generator.ID, min(*n, 4096))
	line := make([]byte, 0, 24)
	code := exitOK
	for left := *n; left > 0; {
		k, err := g.NextNContext(ctx, buf[:min(left, int64(len(buf)))])
		for _, id := range buf[:k] {
			line = strconv.AppendInt(line[:0], int64(id), 10)
			line = append(line, '\n')
			w.Write(line)
		}
		left -= int64(k)
		if err == nil && ctx.Err() != nil {
			err = ctx.Err()
		}
		if err != nil {
			fmt.Fprintf(stderr, "snowchaos gen: after %d IDs: %v\n", *n-left, err)
			code = exitFailure
			break
		}
	}
	if err := w.Flush(); err != nil {
		fmt.Fprintf(stderr, "snowchaos gen: %v\n", err)
		code = exitFailure
	}
	if err := g.Close(); err != nil {
		fmt.Fprintf(stderr, "snowchaos gen: %v\n", err)
		code = exitFailure
	}
	return code
}
