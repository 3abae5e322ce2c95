// Command etcdserver is a one-member etcd server (the etcd module's
// embedded server, the version the lease package's client speaks) that
// takes the etcd binary's flags, for machines without the etcd package:
// the multi-host runs (harness/netns) start it in the store's namespace.
//
//	go build -o bin/netns-etcd ./internal/testenv/etcdtest/etcdserver
//	SNOWCHAOS_ETCD_BIN=bin/netns-etcd ...
//
// It stops on SIGTERM or SIGINT. Data is written without fsync: it is for
// test runs only.
package main

import (
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

func main() { os.Exit(run()) }

func run() int {
	cfg := embed.NewConfig()
	fs := flag.NewFlagSet("etcdserver", flag.ContinueOnError)
	fs.StringVar(&cfg.Name, "name", "default", "member name")
	fs.StringVar(&cfg.Dir, "data-dir", "", "data directory (required)")
	lc := fs.String("listen-client-urls", "http://127.0.0.1:2379", "client URLs (comma separated)")
	ac := fs.String("advertise-client-urls", "", "advertised client URLs (empty: the listen ones)")
	lp := fs.String("listen-peer-urls", "http://127.0.0.1:2380", "peer URLs")
	ap := fs.String("initial-advertise-peer-urls", "", "advertised peer URLs (empty: the listen ones)")
	ic := fs.String("initial-cluster", "", "initial cluster (empty: this member alone)")
	fs.StringVar(&cfg.LogLevel, "log-level", "error", "log level")
	if err := fs.Parse(os.Args[1:]); err != nil {
		return 2
	}
	if cfg.Dir == "" {
		fmt.Fprintln(os.Stderr, "etcdserver: --data-dir is required")
		return 2
	}
	urls := func(flagName, s string) []url.URL {
		var out []url.URL
		for _, p := range strings.Split(s, ",") {
			u, err := url.Parse(p)
			if err != nil || u.Host == "" {
				fmt.Fprintf(os.Stderr, "etcdserver: --%s %q: not a URL\n", flagName, p)
				os.Exit(2)
			}
			out = append(out, *u)
		}
		return out
	}
	cfg.ListenClientUrls = urls("listen-client-urls", *lc)
	cfg.AdvertiseClientUrls = cfg.ListenClientUrls
	if *ac != "" {
		cfg.AdvertiseClientUrls = urls("advertise-client-urls", *ac)
	}
	cfg.ListenPeerUrls = urls("listen-peer-urls", *lp)
	cfg.AdvertisePeerUrls = cfg.ListenPeerUrls
	if *ap != "" {
		cfg.AdvertisePeerUrls = urls("initial-advertise-peer-urls", *ap)
	}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	if *ic != "" {
		cfg.InitialCluster = *ic
	}
	cfg.Logger = "zap"
	cfg.UnsafeNoFsync = true
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "etcdserver: %v\n", err)
		return 1
	}
	defer e.Close()
	select {
	case <-e.Server.ReadyNotify():
		fmt.Fprintln(os.Stderr, "etcdserver: ready to serve client requests")
	case <-time.After(60 * time.Second):
		fmt.Fprintln(os.Stderr, "etcdserver: not ready within 60s")
		return 1
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	select {
	case <-sig:
	case err := <-e.Err():
		fmt.Fprintf(os.Stderr, "etcdserver: %v\n", err)
		return 1
	}
	return 0
}
