// Command withzk runs a command with a ZooKeeper server on a loopback
// address: the one already answering there, or else the Debian package's,
// started for the command in a temporary directory and killed by its PID
// when the command ends. make run-http uses it for the scenarios that
// lease worker IDs from zk://127.0.0.1:2181.
//
//	go run ./internal/testenv/zktest/withzk [-addr 127.0.0.1:2181] -- CMD [ARG...]
//
// Without Java or ZooKeeper it warns and runs the command anyway (the
// scenarios that need the server then fail, naming it). Its exit code is
// the command's.
package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/snowchaos/snowchaos/internal/testenv/zktest"
)

func main() { os.Exit(run()) }

func run() int {
	addr := flag.String("addr", "127.0.0.1:2181", "loopback address of the ZooKeeper server")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: withzk [-addr 127.0.0.1:2181] -- CMD [ARG...]\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		return 2
	}
	host, port, err := net.SplitHostPort(*addr)
	p, perr := strconv.Atoi(port)
	if err != nil || perr != nil || (host != "127.0.0.1" && host != "localhost") {
		fmt.Fprintf(os.Stderr, "withzk: -addr %q: want 127.0.0.1:PORT\n", *addr)
		return 2
	}
	if out, err := zktest.FourLetter(*addr, "srvr", time.Second); err == nil && out != "" {
		fmt.Fprintf(os.Stderr, "withzk: using the ZooKeeper already on %s\n", *addr)
		return command(flag.Args())
	}
	dir, err := os.MkdirTemp("", "withzk-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "withzk: %v\n", err)
		return 2
	}
	defer os.RemoveAll(dir)
	zs, err := zktest.Launch(dir, zktest.Options{Port: p})
	if err != nil {
		fmt.Fprintf(os.Stderr, "withzk: no ZooKeeper on %s, running without one: %v\n", *addr, err)
		return command(flag.Args())
	}
	defer zs.Kill()
	fmt.Fprintf(os.Stderr, "withzk: ZooKeeper on %s (pid %d)\n", zs.Addr, zs.PID())
	return command(flag.Args())
}

// command runs args with this process's streams, passing on SIGINT and
// SIGTERM, and returns its exit code.
func command(args []string) int {
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "withzk: %v\n", err)
		return 2
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for {
		select {
		case s := <-sigs:
			_ = cmd.Process.Signal(s)
		case err := <-done:
			if err == nil {
				return 0
			}
			if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() >= 0 {
				return ee.ExitCode()
			}
			fmt.Fprintf(os.Stderr, "withzk: %v\n", err)
			return 1
		}
	}
}
