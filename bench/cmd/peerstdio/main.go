// Command peerstdio serves a Go peer library over the exec target's stdio
// protocol, unmodified: it reads a count per line and answers that many
// IDs, one per line ("refused: ..." where the library returns an error).
// The worker ID comes from $WORKER_ID.
//
//	WORKER_ID=1 peerstdio sonyflake|sonyflake-v2|bwmarrin
//
// The harness builds it with the runtime clock overlay (exec target,
// clock: go), so a wall-clock fault reaches the library's own time.Now.
// Layouts: sonyflake v1/v2 39/16/8 in 10 ms units from 2024-01-01;
// bwmarrin 41/10/12 from 2024-01-01.
package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/bwmarrin/snowflake"
	"github.com/sony/sonyflake"
	sonyflakev2 "github.com/sony/sonyflake/v2"
)

var epoch = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: WORKER_ID=n peerstdio sonyflake|sonyflake-v2|bwmarrin")
		os.Exit(2)
	}
	w, err := strconv.ParseInt(os.Getenv("WORKER_ID"), 10, 64)
	if err != nil || w < 0 || w > 1023 {
		fmt.Fprintf(os.Stderr, "WORKER_ID must be 0..1023, found %q\n", os.Getenv("WORKER_ID"))
		os.Exit(2)
	}
	next, err := newGenerator(os.Args[1], w)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	in, out := bufio.NewScanner(os.Stdin), bufio.NewWriter(os.Stdout)
	fmt.Fprintln(out, "ready")
	out.Flush()
	for in.Scan() {
		if strings.TrimSpace(in.Text()) == "time" { // the process's own clock reading
			fmt.Fprintln(out, time.Now().UnixNano())
			out.Flush()
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(in.Text()))
		if err != nil || n < 1 || n > 1_000_000 {
			fmt.Fprintf(out, "error: request %q: want a count 1..1000000\n", in.Text())
			out.Flush()
			continue
		}
		for i := 0; i < n; i++ {
			id, err := next()
			if err != nil {
				fmt.Fprintf(out, "refused: %s\n", strings.ReplaceAll(err.Error(), "\n", " "))
				break
			}
			fmt.Fprintln(out, id)
		}
		out.Flush()
	}
}

func newGenerator(name string, w int64) (func() (uint64, error), error) {
	switch name {
	case "sonyflake":
		sf, err := sonyflake.New(sonyflake.Settings{StartTime: epoch, MachineID: func() (uint16, error) { return uint16(w), nil }})
		if err != nil {
			return nil, err
		}
		return sf.NextID, nil
	case "sonyflake-v2":
		sf, err := sonyflakev2.New(sonyflakev2.Settings{StartTime: epoch, MachineID: func() (int, error) { return int(w), nil }})
		if err != nil {
			return nil, err
		}
		return func() (uint64, error) { id, err := sf.NextID(); return uint64(id), err }, nil
	case "bwmarrin":
		snowflake.Epoch = epoch.UnixMilli()
		n, err := snowflake.NewNode(w)
		if err != nil {
			return nil, err
		}
		return func() (uint64, error) { return uint64(n.Generate().Int64()), nil }, nil
	}
	return nil, errors.New("unknown generator " + name + " (sonyflake, sonyflake-v2, bwmarrin)")
}
