// Package faketime drives libfaketime (Debian packages faketime and
// libfaketime) from the harness: a process started with Env runs with its
// wall clock read from a timestamp file that a File rewrites live, while
// its monotonic clock stays the host's. It is the route by which clock
// faults reach an unmodified program in any language whose clock reads go
// through the C library (Node.js, Python, the JVM, Ruby, dynamically
// linked Rust and C); Go programs read the clock through the vDSO and need
// the goclock route instead.
//
// Cost: with FAKETIME_NO_CACHE every wall-clock reading opens, reads and
// closes the file (measured by BenchmarkNodeDateNow). libfaketime's cache
// (FAKETIME_CACHE_DURATION) re-reads the file at most once per whole second
// of real time, so a fault written mid-second would land up to a second
// late, at an instant the harness cannot know: the cache is off, and
// faults are exact to the file's rename.
//
// Rates: libfaketime runs the faked clock as S + O + (t - S)·R, where S is
// the real time its constructor ran in the process and "+O xR" is the
// file's content. Debian's libfaketime 0.9.10 keeps S nowhere another
// process can read it, so a File takes it from the caller: the real time
// the process was started (exec returned), which precedes S by the dynamic
// loader's work. A rate's offset is then off by that gap times |R-1|: a few
// microseconds for a slew or drift of hundreds of ppm; steps, leaps and
// freezes (rate 1) do not depend on S at all.
//
// libfaketime is GPL-2.0: it is run, never linked.
package faketime

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"

	"github.com/snowchaos/snowchaos/harness/extclock"
)

// Library paths searched by Find, Debian's first. The synchronized build
// (libfaketimeMT) comes first: with FAKETIME_NO_CACHE the plain build
// parses the timestamp file into static buffers that concurrent threads
// share, so a multi-threaded process now and then reads a wrong offset or
// aborts on a half-parsed one. Seen with snowchaos check's step-back-5ms
// on the Java wrapper of docs/check.md, with the JVM's threads spinning
// (see Env) so that the race was common: the plain build left a step
// unconfirmed in 3 of 8 runs (the JVM read an offset of +5.2 ms or -0.1
// ms where the step set -5 ms or -10 ms) and aborted the JVM once; the
// synchronized build read every step right.
var libraryPaths = func() []string {
	var out []string
	for _, name := range []string{"libfaketimeMT.so.1", "libfaketime.so.1"} {
		for _, dir := range []string{"/usr/lib/x86_64-linux-gnu/faketime", "/usr/lib/aarch64-linux-gnu/faketime", "/usr/lib/faketime", "/usr/local/lib/faketime"} {
			out = append(out, filepath.Join(dir, name))
		}
	}
	return out
}()

// EnvLibrary overrides the library Find returns.
const EnvLibrary = "SNOWCHAOS_LIBFAKETIME"

// ErrNotInstalled: libfaketime is not installed.
var ErrNotInstalled = errors.New("faketime: libfaketimeMT.so.1 or libfaketime.so.1 not found (apt-get install faketime libfaketime, or set $" + EnvLibrary + ")")

// Find returns the path of libfaketime: the synchronized build
// (libfaketimeMT.so.1) where it is installed, else libfaketime.so.1.
func Find() (string, error) {
	if p := os.Getenv(EnvLibrary); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("faketime: $%s: %w", EnvLibrary, err)
		}
		return p, nil
	}
	for _, p := range libraryPaths {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", ErrNotInstalled
}

// Env returns the environment variables that run a process under
// libfaketime with its wall clock read from the timestamp file path on
// every reading and its monotonic clock untouched. An LD_PRELOAD already in
// base is kept after libfaketime.
//
// FAKETIME_FORCE_MONOTONIC_FIX=0: libfaketime wraps pthread_cond_timedwait,
// and on glibc 2.30 and later its default rebases a wait on a
// CLOCK_MONOTONIC condition variable by the difference between the real
// and the faked monotonic clock, which with the monotonic clock left
// unfaked ends the wait at once: a JVM's service threads (VM Thread, G1
// Service, the compilers, the sweeper) then spin, each reading the
// timestamp file about 1,500 times a second while idle (strace -f -e
// trace=openat on an idle java under libfaketime: 45,967 reads in 5 s with
// the fix, 166 without), and the generator's own thread queues behind
// them (ten IDs in 15 ms at the median instead of 0.6 ms). Without the
// fix a monotonic wait keeps its deadline, exactly so while the clock's
// rate is 1.
func Env(lib, path string, base []string) []string {
	out := make([]string, 0, len(base)+7)
	preload := lib
	for _, kv := range base {
		k, v, _ := bytes.Cut([]byte(kv), []byte("="))
		switch string(k) {
		case "LD_PRELOAD":
			if len(v) > 0 {
				preload += ":" + string(v)
			}
			continue
		case "FAKETIME", "FAKETIME_TIMESTAMP_FILE", "FAKETIME_NO_CACHE", "FAKETIME_CACHE_DURATION",
			"FAKETIME_DONT_FAKE_MONOTONIC", "FAKETIME_FMT", "FAKETIME_SHARED", "FAKETIME_XRESET", "FAKETIME_DONT_RESET",
			"FAKETIME_FORCE_MONOTONIC_FIX":
			continue // ours decide
		}
		out = append(out, kv)
	}
	return append(out,
		"LD_PRELOAD="+preload,
		"FAKETIME_TIMESTAMP_FILE="+path,
		"FAKETIME_NO_CACHE=1",
		"FAKETIME_DONT_FAKE_MONOTONIC=1",
		"FAKETIME_FORCE_MONOTONIC_FIX=0",
		"FAKETIME_FMT=%s",
	)
}

// File is the timestamp file of one process: an extclock.Sink that
// rewrites it (write a temporary file, rename) on every state.
type File struct {
	// Path is the timestamp file.
	Path string

	mu    sync.Mutex
	start int64 // S estimate, Unix ns; 0: unknown
}

var _ extclock.Sink = (*File)(nil)

// NewFile returns the timestamp file at path, writing the no-fault state
// so a process started with Env(path) reads the real time until the first
// Publish.
func NewFile(path string) (*File, error) {
	f := &File{Path: path}
	return f, f.write("+0 x1")
}

// SetStart gives the real time (Unix ns) the process reading the file was
// started, from which rates are computed; call it again after a restart.
func (f *File) SetStart(ns int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.start = ns
}

// Publish implements extclock.Sink.
func (f *File) Publish(s extclock.State) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s.Frozen {
		return f.write(formatAbs(s.At + int64(s.Offset)))
	}
	o := int64(s.Offset)
	if s.PPB != 0 {
		if f.start == 0 {
			return errors.New("faketime: a clock rate needs the process's start time (SetStart)")
		}
		// S + O + (t-S)·R = t + Offset + (t-At)·(R-1)  =>  O = Offset + (S-At)·(R-1)
		o += extclock.Scale(f.start-s.At, s.PPB)
	}
	return f.write(Format(o, s.PPB))
}

// Format returns the libfaketime specification of a relative offset of o
// ns and a rate 1 + ppb/1e9, rate always explicit (libfaketime keeps the
// last rate it read when a specification has none).
func Format(o, ppb int64) string {
	sign := "+"
	if o < 0 {
		sign, o = "-", -o
	}
	rate := 1 + float64(ppb)/1e9
	return fmt.Sprintf("%s%d.%09d x%s", sign, o/1e9, o%1e9, strconv.FormatFloat(rate, 'f', -1, 64))
}

// formatAbs returns an absolute (frozen) time in FAKETIME_FMT=%s form.
func formatAbs(ns int64) string {
	return fmt.Sprintf("%d.%09d", ns/1e9, ns%1e9)
}

// write replaces the file's content atomically.
func (f *File) write(content string) error {
	tmp, err := os.CreateTemp(filepath.Dir(f.Path), ".faketime-*")
	if err != nil {
		return err
	}
	_, err = tmp.WriteString(content + "\n")
	if e := tmp.Close(); err == nil {
		err = e
	}
	if err == nil {
		err = os.Rename(tmp.Name(), f.Path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("faketime: writing %s: %w", f.Path, err)
	}
	return nil
}

// ShmDir is where libfaketime keeps its per-process shared memory.
var ShmDir = "/dev/shm"

// RemoveShm deletes the shared memory and semaphore libfaketime made for
// process pid, which a process killed with SIGKILL leaves behind (and which
// a later process with the same pid would trip over). Call it only once
// pid has been reaped.
func RemoveShm(pid int) {
	os.Remove(filepath.Join(ShmDir, "faketime_shm_"+strconv.Itoa(pid)))
	os.Remove(filepath.Join(ShmDir, "sem.faketime_sem_"+strconv.Itoa(pid)))
}

// ProbeCommand is the clock probe for a libfaketime process: perl, under
// the same library and a timestamp file of its own, printing its wall
// clock (Time::HiRes, microseconds) for every line it reads. (bash's
// $EPOCHREALTIME is not a choice: libfaketime does not reach it.)
var ProbeCommand = []string{"perl", "-MTime::HiRes=time", "-e", `$| = 1; while (<STDIN>) { printf "%.6f\n", time }`}

// StartTime returns the real time (Unix ns) libfaketime's clock rates are
// anchored on in the processes that descend from pid, the first process
// started under the library: its constructor writes that instant into
// the shared memory it creates (/dev/shm/faketime_shm_<pid>), and every
// process that inherits the environment (a wrapper's exec, a child)
// takes it from there instead of its own start. The struct is laid out as
// Debian's 0.9.10 (and later) declares it: two 64-bit counters, then the
// start time's CLOCK_REALTIME timespec. The segment is mapped rather than
// read: the library sizes it to its first counter only and keeps the rest
// in the mapping's page.
//
// An error says the segment does not exist (the process never loaded the
// library: a statically linked program, or one that cleared LD_PRELOAD)
// or holds no start time yet.
func StartTime(pid int) (int64, error) {
	path := filepath.Join(ShmDir, "faketime_shm_"+strconv.Itoa(pid))
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("faketime: %w", err)
	}
	defer f.Close()
	const size = 80 // sizeof(struct ft_shared_s) on linux/amd64 and arm64
	b, err := syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return 0, fmt.Errorf("faketime: mapping %s: %w", path, err)
	}
	defer syscall.Munmap(b)
	sec := int64(binary.LittleEndian.Uint64(b[16:]))
	nsec := int64(binary.LittleEndian.Uint64(b[24:]))
	if nsec < 0 || nsec >= 1e9 || sec <= 0 {
		return 0, fmt.Errorf("faketime: %s holds no start time yet (%d s %d ns)", path, sec, nsec)
	}
	return sec*1e9 + nsec, nil
}
