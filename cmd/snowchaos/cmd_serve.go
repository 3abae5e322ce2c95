package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/lease"
	"github.com/snowchaos/snowchaos/node"
	"github.com/snowchaos/snowchaos/ntpcheck"
	"github.com/snowchaos/snowchaos/server"
	"github.com/snowchaos/snowchaos/server/service"
)

func init() {
	register(command{name: "serve", summary: "serve IDs over HTTP (serve -h)", run: runServe})
}

const serveUsage = `usage: snowchaos serve [flags]

Serves a Snowflake generator over HTTP: GET /v1/id, /v1/ids?count=N,
/v1/decode/{id}, /v1/info, /healthz, /readyz, /metrics, and with an admin
token the fault API under /admin/v1/faults. Prints "listening on ADDR" once
it accepts connections (so --listen 127.0.0.1:0 can be used), and shuts down
gracefully on SIGTERM or SIGINT: in-flight requests finish, the generator
persists its final mark, the lease is released.

Every flag can also be set by the environment: --max-wait by
SNOWCHAOS_MAX_WAIT, and so on (the flag wins). Prefer SNOWCHAOS_ADMIN_TOKEN
(or --admin-token-file) to --admin-token, which other users can read in the
process list.

With --lease the node reports its clock through the lease store with
every renewal, and at start compares its clock with the median of the
live peers' (the other holders'): off by more than --peer-clock-max-skew,
it releases its lease and exits 2, naming the peers and the skew.

A stored mark ahead of the clock (--checkpoint, or the lease's) holds the
node: it issues no ID until its clock passes the mark, which serve logs at
start (WARN when longer than --max-wait: not ready until then); a fresh
start's own reservation is not such a mark. A mark at or beyond the end of
the layout's lifetime is refused.

--lease and leases list --dsn take the same URLs: memory, postgres://...,
etcd://host:port[,host:port][/prefix/], zk://host:port[,host:port][/root].

Exit codes: 0 clean shutdown, 1 serving failed, 2 bad flags or environment
(including a stored mark beyond the layout's lifetime, and a start the
lease or the peer clock check refused), 130 or 143 when a second SIGINT or
SIGTERM cut the graceful shutdown short.

flags:
`

// serveFlags holds the parsed flags of serve.
type serveFlags struct {
	listen, adminAddr       string
	adminToken, adminFile   string
	adminAllowRemote        bool
	worker                  int64
	layout, epoch, policy   string
	maxWait, maxLead        time.Duration
	reserve                 time.Duration
	noReserve               bool
	checkpoint              string
	maxBatch                int
	requestTimeout          time.Duration
	shutdownTimeout         time.Duration
	readHeaderTimeout       time.Duration
	readTimeout             time.Duration
	idleTimeout             time.Duration
	maxConns                int
	leaseURL, holder        string
	leaseTTL                time.Duration
	leaseSkew               time.Duration
	peerSkew                time.Duration
	markAtRenewal           bool // settable only in a -tags negativecontrols build
	ntpServers              string
	ntpMaxOffset, ntpEvery  time.Duration
	clockOffset             time.Duration
	logLevel                string
	faultClock              bool
	tracingServiceName      string
	leaseSchema, leaseTable string
	noFence                 bool // settable only in a -tags negativecontrols build
}

// newServeFlagSet declares serve's flags on a new FlagSet.
func newServeFlagSet(f *serveFlags) *flag.FlagSet {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.StringVar(&f.listen, "listen", "127.0.0.1:8080", "address to serve the API on (host:port; port 0 picks a free one)")
	fs.StringVar(&f.adminAddr, "admin-addr", "", "separate address for the admin fault API (empty: on --listen)")
	fs.StringVar(&f.adminToken, "admin-token", "", "bearer token enabling the admin fault API (empty: no admin API)")
	fs.StringVar(&f.adminFile, "admin-token-file", "", "file holding the admin token")
	fs.BoolVar(&f.adminAllowRemote, "admin-allow-remote", false, "allow the admin API on a non-loopback address")
	fs.BoolVar(&f.faultClock, "fault-clock", false, "run the generator on a fault clock even without an admin token")
	fs.Int64Var(&f.worker, "worker", 0, "worker (node) ID; with --lease, the preferred one")
	fs.StringVar(&f.layout, "layout", "41/10/12", "bit layout: a preset ("+presetNames()+") or any T/N/S[@tick] with T+N+S = 63")
	fs.StringVar(&f.epoch, "epoch", "", "layout epoch, RFC 3339 (empty: the preset's, 2025-01-01T00:00:00Z)")
	fs.StringVar(&f.policy, "policy", "wait", "rewind policy: wait, refuse or logical")
	fs.DurationVar(&f.maxWait, "max-wait", time.Second, "per-call wait bound (rewinds and sequence exhaustion)")
	fs.DurationVar(&f.maxLead, "max-lead", time.Second, "logical policy's lead bound")
	fs.DurationVar(&f.reserve, "reserve", 0, "how far ahead the persisted mark is reserved (0: 1s)")
	fs.BoolVar(&f.noReserve, "no-reserve", false, "reserve nothing ahead: each mark names the tick it is written for (an fsync per tick; for tests of the start fence)")
	fs.StringVar(&f.checkpoint, "checkpoint", "", "file persisting the high-water mark across restarts")
	fs.IntVar(&f.maxBatch, "max-batch", server.DefaultMaxBatch, "largest count /v1/ids accepts")
	fs.DurationVar(&f.requestTimeout, "request-timeout", server.DefaultRequestTimeout, "deadline of each ID request")
	fs.DurationVar(&f.shutdownTimeout, "shutdown-timeout", server.DefaultShutdownTimeout, "bound on the graceful shutdown")
	fs.DurationVar(&f.readHeaderTimeout, "read-header-timeout", server.DefaultReadHeaderTimeout, "time to read a request's headers (at most 10m)")
	fs.DurationVar(&f.readTimeout, "read-timeout", 0, "time to read a whole request (0: twice --read-header-timeout; at most 10m)")
	fs.DurationVar(&f.idleTimeout, "idle-timeout", server.DefaultIdleTimeout, "how long an idle keep-alive connection stays open (at most 1h)")
	fs.IntVar(&f.maxConns, "max-conns", 0, "connections kept open at most; at the limit the longest-idle one is closed, and when none is idle a new one gets 503 (closed without one while 8 refusals are in flight) (0: the open-file limit less 64)")
	fs.StringVar(&f.leaseURL, "lease", "", "worker-ID lease store: memory, postgres://..., etcd://host:port[,host:port][/prefix/] or zk://host:port[,host:port][/root] (empty: none)")
	fs.StringVar(&f.holder, "holder", "", "lease holder identity (empty: $POD_NAME, $HOSTNAME or the host name)")
	fs.DurationVar(&f.leaseTTL, "lease-ttl", lease.DefaultTTL, "lease duration")
	fs.DurationVar(&f.leaseSkew, "lease-skew-budget", 0, "extra wait past the previous holder's recorded mark on taking over its worker ID, at most "+lease.MaxSkewBudget.String()+": for marks that lag what was issued (README: handoff guard); clock offsets need none")
	fs.DurationVar(&f.peerSkew, "peer-clock-max-skew", lease.DefaultPeerClockMaxSkew, "with --lease, refuse to start (exit 2) when the clock is off the median of the live peers' clocks, as reported through the lease store, by more than this, at most "+lease.MaxPeerClockSkew.String()+" (0: no check)")
	fs.StringVar(&f.leaseSchema, "lease-schema", "", "Postgres lease schema (empty: public)")
	fs.StringVar(&f.leaseTable, "lease-table", "", "Postgres lease table (empty: worker_leases)")
	fs.StringVar(&f.ntpServers, "ntp-server", "", "NTP servers to watch (comma separated); the node is not ready while the offset passes --ntp-max-offset")
	fs.DurationVar(&f.ntpMaxOffset, "ntp-max-offset", ntpcheck.DefaultStepThreshold, "NTP offset budget, exported as snowflake_ntp_offset_budget_seconds (0: the step threshold)")
	fs.DurationVar(&f.ntpEvery, "ntp-interval", ntpcheck.DefaultInterval, "NTP check interval")
	fs.DurationVar(&f.clockOffset, "clock-offset", 0, "start with the wall clock stepped by this much (implies --fault-clock)")
	fs.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	fs.StringVar(&f.tracingServiceName, "service-name", "snowchaos-serve", "OpenTelemetry service.name fallback (tracing is on when OTEL_EXPORTER_OTLP_ENDPOINT is set)")
	addControlFlags(fs, f)
	return fs
}

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var f serveFlags
	fs := newServeFlagSet(&f)
	if code, ok := parseFlags(fs, args, stderr, serveUsage); !ok {
		return code
	}
	if err := applyEnv(fs, os.Getenv); err != nil {
		fmt.Fprintf(stderr, "snowchaos serve: %v\n", err)
		return exitInvalid
	}
	svc, err := buildService(ctx, &f, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "snowchaos serve: %v\n", err)
		return exitInvalid
	}
	defer svc.Close()
	return listenAndServe(ctx, svc, &f, stdout, stderr)
}

// buildService turns the flags into the served node, logging to stderr.
func buildService(ctx context.Context, f *serveFlags, stderr io.Writer) (*service.Service, error) {
	level := slog.LevelInfo
	if err := level.UnmarshalText([]byte(f.logLevel)); err != nil {
		return nil, fmt.Errorf("--log-level %q: %v", f.logLevel, err)
	}
	cfg, err := serviceConfig(f)
	if err != nil {
		return nil, err
	}
	cfg.Log = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	return service.New(ctx, cfg)
}

// serviceConfig checks serve's flags and turns them into the served
// node's configuration; errors name the flag.
func serviceConfig(f *serveFlags) (service.Config, error) {
	var cfg service.Config
	token, err := server.CleanToken(f.adminToken)
	if err != nil {
		return cfg, fmt.Errorf("--admin-token (or SNOWCHAOS_ADMIN_TOKEN): %v", err)
	}
	if f.adminFile != "" {
		b, err := os.ReadFile(f.adminFile)
		if err != nil {
			return cfg, fmt.Errorf("--admin-token-file: %v", err)
		}
		if token, _ = server.CleanToken(string(b)); token == "" {
			return cfg, fmt.Errorf("--admin-token-file %s is empty", f.adminFile)
		}
	}
	if token != "" && !f.adminAllowRemote {
		addr := f.listen
		if f.adminAddr != "" {
			addr = f.adminAddr
		}
		if err := server.CheckListenAddr(addr); err != nil {
			return cfg, err
		}
	}
	if f.adminAddr != "" && token == "" {
		return cfg, errors.New("--admin-addr needs an admin token")
	}

	layout, err := generator.ParseLayout(f.layout)
	if err != nil {
		return cfg, fmt.Errorf("--layout: %v", err)
	}
	if f.epoch != "" {
		e, err := time.Parse(time.RFC3339Nano, f.epoch)
		if err != nil {
			return cfg, fmt.Errorf("--epoch %q is not an RFC 3339 time", f.epoch)
		}
		layout.Epoch = e.UTC()
	}
	policy, err := generator.ParsePolicy(f.policy)
	if err != nil {
		return cfg, fmt.Errorf("--policy: %v", err)
	}
	if err := checkServeFlags(f, layout); err != nil {
		return cfg, err
	}
	reserve := f.reserve
	if f.noReserve {
		if reserve != 0 {
			return cfg, fmt.Errorf("--no-reserve with --reserve %v: give one of them", reserve)
		}
		reserve = generator.NoReserve
	}
	cfg.Node = node.Config{
		Settings: generator.Settings{
			Layout: layout, Node: f.worker, Policy: policy, MaxWait: f.maxWait, MaxLead: f.maxLead, Reserve: reserve,
		},
		FaultClock:  token != "" || f.faultClock,
		ClockOffset: f.clockOffset,
	}
	cfg.CheckpointPath = f.checkpoint
	cfg.ServiceName = f.tracingServiceName
	cfg.Server = server.Config{
		AdminToken: token, AdminAllowRemote: f.adminAllowRemote,
		MaxBatch: f.maxBatch, RequestTimeout: f.requestTimeout, ShutdownTimeout: f.shutdownTimeout,
		ReadHeaderTimeout: f.readHeaderTimeout, ReadTimeout: f.readTimeout, IdleTimeout: f.idleTimeout, MaxConns: f.maxConns,
	}

	if f.leaseSkew < 0 || f.leaseSkew > lease.MaxSkewBudget {
		return cfg, fmt.Errorf("--lease-skew-budget %v outside [0, %v]", f.leaseSkew, lease.MaxSkewBudget)
	}
	if f.leaseSkew != 0 && f.leaseURL == "" {
		return cfg, errors.New("--lease-skew-budget needs --lease")
	}
	if f.peerSkew < 0 || f.peerSkew > lease.MaxPeerClockSkew {
		return cfg, fmt.Errorf("--peer-clock-max-skew %v outside [0, %v]", f.peerSkew, lease.MaxPeerClockSkew)
	}
	if f.peerSkew != lease.DefaultPeerClockMaxSkew && f.leaseURL == "" {
		return cfg, errors.New("--peer-clock-max-skew needs --lease")
	}
	if f.leaseURL != "" {
		cfg.Lease = &service.Lease{URL: f.leaseURL, Schema: f.leaseSchema, Table: f.leaseTable, Keeper: node.Lease{
			Holder: f.holder, TTL: f.leaseTTL, SkewBudget: f.leaseSkew, PeerClockMaxSkew: f.peerSkew,
			Controls: node.Controls{NoMarkWriteThrough: f.markAtRenewal, NoFence: f.noFence},
		}}
		if f.peerSkew == 0 {
			cfg.Lease.Keeper.PeerClockMaxSkew = -1
		}
	}
	if f.ntpServers != "" {
		servers, err := ntpcheck.ParseServerList(f.ntpServers)
		if err != nil {
			return cfg, fmt.Errorf("--ntp-server: %v", err)
		}
		cfg.NTP = &service.NTP{Servers: servers, MaxOffset: f.ntpMaxOffset, Interval: f.ntpEvery}
	}
	return cfg, nil
}

// listenAndServe listens where the flags say, prints the addresses and serves
// svc until ctx is done.
func listenAndServe(ctx context.Context, svc *service.Service, f *serveFlags, stdout, stderr io.Writer) int {
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		fmt.Fprintf(stderr, "snowchaos serve: %v\n", err)
		return exitInvalid
	}
	var adminLn net.Listener
	if f.adminAddr != "" {
		if adminLn, err = net.Listen("tcp", f.adminAddr); err != nil {
			ln.Close()
			fmt.Fprintf(stderr, "snowchaos serve: admin: %v\n", err)
			return exitInvalid
		}
	}
	fmt.Fprintf(stdout, "listening on %s\n", ln.Addr())
	if adminLn != nil {
		fmt.Fprintf(stdout, "admin listening on %s\n", adminLn.Addr())
	}
	if s, ok := stdout.(interface{ Sync() error }); ok {
		s.Sync()
	}
	if err := svc.Serve(ctx, ln, adminLn); err != nil {
		fmt.Fprintf(stderr, "snowchaos serve: %v\n", err)
		if errors.Is(err, server.ErrAdminRemote) || errors.Is(err, server.ErrConfig) {
			return exitInvalid
		}
		return exitFailure
	}
	return exitOK
}
