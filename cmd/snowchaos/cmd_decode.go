package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/snowchaos/snowchaos/generator"
)

func init() {
	register(command{name: "decode", summary: "split IDs into time, node and sequence", run: runDecode})
}

// timeFormat is RFC 3339 in UTC with milliseconds.
const timeFormat = "2006-01-02T15:04:05.000Z07:00"

// layoutFlags are the --layout and --epoch flags shared by decode and gen.
type layoutFlags struct {
	name  string
	epoch string
}

func (lf *layoutFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&lf.name, "layout", "41/10/12", "layout: a preset (41/10/12, 41/5+5/12, 42/8/13, 41/12/10, 39/10/14, 39/16/8@10ms; aliases default, sonyflake) or any T/N/S[@tick] with T+N+S = 63")
	fs.StringVar(&lf.epoch, "epoch", generator.DefaultEpoch.Format(time.RFC3339), "epoch of the time field, RFC 3339")
}

// layout resolves the flags to a validated layout.
func (lf *layoutFlags) layout() (generator.Layout, error) {
	l, err := generator.ParseLayout(lf.name)
	if err != nil {
		return l, fmt.Errorf("--layout: %w", err)
	}
	e, err := time.Parse(time.RFC3339Nano, lf.epoch)
	if err != nil {
		return l, fmt.Errorf("--epoch %q is not an RFC 3339 time (like 2025-01-01T00:00:00Z)", lf.epoch)
	}
	l.Epoch = e.UTC()
	if err := l.Validate(); err != nil {
		return l, fmt.Errorf("--epoch: %w", err)
	}
	return l, nil
}

// decoded is the JSON form of one decoded ID.
type decoded struct {
	ID         generator.ID `json:"id"`
	Layout     string       `json:"layout"`
	Tick       int64        `json:"tick"`
	Time       string       `json:"time"`
	Node       int64        `json:"node"`
	Datacenter *int64       `json:"datacenter,omitempty"`
	Worker     *int64       `json:"worker,omitempty"`
	Seq        int64        `json:"seq"`
}

// runDecode implements `snowchaos decode`.
func runDecode(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flagSet("decode", "decode [--layout NAME] [--epoch RFC3339] [--node-split] [--json] <id>...", stderr)
	var lf layoutFlags
	lf.register(fs)
	split := fs.Bool("node-split", false, "show the node as datacenter/worker (the layout's split, or the node field halved, datacenter high)")
	asJSON := fs.Bool("json", false, "print one JSON object per ID")
	ids, err := parseInterleaved(fs, args)
	if err != nil {
		return flagExit(err)
	}
	l, err := lf.layout()
	if err != nil {
		fmt.Fprintf(stderr, "snowchaos decode: %v\n", err)
		return exitInvalid
	}
	if *split && l.DatacenterBits == 0 {
		l.DatacenterBits = (l.NodeBits + 1) / 2
	}
	if len(ids) == 0 {
		fmt.Fprintln(stderr, "snowchaos decode: no IDs given")
		fs.Usage()
		return exitInvalid
	}
	parsed := make([]generator.ID, 0, len(ids))
	bad := false
	for _, s := range ids {
		id, err := generator.ParseID(s)
		if err != nil {
			fmt.Fprintf(stderr, "snowchaos decode: %v\n", err)
			bad = true
			continue
		}
		parsed = append(parsed, id)
	}
	if bad {
		return exitInvalid
	}
	w := bufio.NewWriter(stdout)
	enc := json.NewEncoder(w)
	for _, id := range parsed {
		p := l.Decode(id)
		if p.Time.Year() > 9999 {
			fmt.Fprintf(stderr, "snowchaos decode: ID %d is beyond the layout's lifetime\n", id)
			return exitInvalid
		}
		ts := p.Time.UTC().Format(timeFormat)
		showSplit := l.DatacenterBits > 0
		if *asJSON {
			d := decoded{ID: id, Layout: l.Name, Tick: p.Tick, Time: ts, Node: p.Node, Seq: p.Seq}
			if showSplit {
				d.Datacenter, d.Worker = &p.Datacenter, &p.Worker
			}
			if err := enc.Encode(d); err != nil {
				fmt.Fprintf(stderr, "snowchaos decode: %v\n", err)
				return exitFailure
			}
			continue
		}
		line := []string{strconv.FormatInt(int64(id), 10), "time=" + ts, "tick=" + strconv.FormatInt(p.Tick, 10), "node=" + strconv.FormatInt(p.Node, 10)}
		if showSplit {
			line = append(line, "datacenter="+strconv.FormatInt(p.Datacenter, 10), "worker="+strconv.FormatInt(p.Worker, 10))
		}
		line = append(line, "seq="+strconv.FormatInt(p.Seq, 10))
		fmt.Fprintln(w, strings.Join(line, " "))
	}
	if err := w.Flush(); err != nil {
		fmt.Fprintf(stderr, "snowchaos decode: %v\n", err)
		return exitFailure
	}
	return exitOK
}
