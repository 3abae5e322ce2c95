// Package goclock carries clock faults into unmodified Go programs, which
// read the wall clock through the vDSO and so never see libfaketime. Build
// rebuilds the program from its source with `go build -overlay`, replacing
// the runtime's time.now (runtime/time_linux_amd64.s) by the stock reading
// followed by the host clock the harness publishes in a Page: a 4 KiB file
// each process maps read-only and reads with a seqlock, so a clock reading
// costs a few atomic loads more than the stock one (BenchmarkTimeNow). The
// program's own code, and its modules, are not touched.
//
// Only linux/amd64 is covered (the runtime file replaced is specific to
// it), and the overlay is checked against the toolchain: a Go release whose
// time_linux_amd64.s no longer holds the expected symbol is refused with
// ErrToolchain rather than built wrong. A Go binary given without source
// cannot be reached by any route (IsGoBinary tells the caller so).
package goclock

import (
	"context"
	"debug/buildinfo"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"github.com/snowchaos/snowchaos/harness/extclock"
)

// EnvPage names the clock page a built program reads.
const EnvPage = "SNOWCHAOS_CLOCK_PAGE"

//go:embed overlay/snowchaos_clock.go.txt
var clockGo []byte

// Errors.
var (
	// ErrToolchain: the Go toolchain's runtime is not one the overlay fits.
	ErrToolchain = errors.New("goclock: the overlay does not fit this Go toolchain's runtime")
	// ErrPlatform: only linux/amd64 builds can be overlaid.
	ErrPlatform = errors.New("goclock: the runtime overlay covers linux/amd64 only")
)

const (
	magic    = 0x314b434f4c434353 // "SCCLOCK1", little-endian
	pageSize = 4096
	asmFile  = "time_linux_amd64.s"
	asmText  = "TEXT time·now<ABIInternal>(SB)"
)

// Overlay writes the overlay files for the Go toolchain at goroot into dir
// and returns the overlay JSON's path.
func Overlay(goroot, dir string) (string, error) {
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		return "", ErrPlatform
	}
	src := filepath.Join(goroot, "src", "runtime", asmFile)
	asm, err := os.ReadFile(src)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrToolchain, err)
	}
	if strings.Count(string(asm), asmText) != 1 {
		return "", fmt.Errorf("%w: %s does not define %q exactly once", ErrToolchain, src, asmText)
	}
	renamed := strings.Replace(string(asm), asmText, "TEXT runtime·snowchaosRealNow<ABIInternal>(SB)", 1)
	asmOut, goOut := filepath.Join(dir, asmFile), filepath.Join(dir, "snowchaos_clock.go")
	if err := os.WriteFile(asmOut, []byte(renamed), 0o644); err != nil {
		return "", err
	}
	if err := os.WriteFile(goOut, clockGo, 0o644); err != nil {
		return "", err
	}
	ov := map[string]map[string]string{"Replace": {
		src: asmOut,
		filepath.Join(goroot, "src", "runtime", "snowchaos_clock.go"): goOut,
	}}
	b, _ := json.Marshal(ov)
	path := filepath.Join(dir, "overlay.json")
	return path, os.WriteFile(path, b, 0o644)
}

// Build builds the Go package pkg (as `go build` names it, from the
// directory dir) into out with the clock overlay, using the go command on
// $PATH. The build's output is in the error.
func Build(ctx context.Context, dir, pkg, out string) error {
	goroot, err := exec.CommandContext(ctx, "go", "env", "GOROOT").Output()
	if err != nil {
		return fmt.Errorf("goclock: go env GOROOT: %w", err)
	}
	tmp, err := os.MkdirTemp("", "snowchaos-overlay-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	ov, err := Overlay(strings.TrimSpace(string(goroot)), tmp)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-overlay", ov, "-o", out, pkg)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("goclock: go build -overlay %s in %s: %w\n%s", pkg, dir, err, b)
	}
	return nil
}

// IsGoBinary reports whether the executable at path was built by Go, and
// with which version.
func IsGoBinary(path string) (bool, string) {
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return false, ""
	}
	return true, bi.GoVersion
}

// Page is the clock page of a host: an extclock.Sink that stores each
// state in a file every process built by Build maps (MAP_SHARED), under a
// sequence counter so a reader never sees half a state.
type Page struct {
	// Path is the page file.
	Path string

	mu   sync.Mutex
	mem  []byte
	seq  uint64
	gone bool
}

var _ extclock.Sink = (*Page)(nil)

// NewPage creates the page at path holding the no-fault state.
func NewPage(path string) (*Page, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := f.Truncate(pageSize); err != nil {
		return nil, err
	}
	mem, err := syscall.Mmap(int(f.Fd()), 0, pageSize, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("goclock: mapping %s: %w", path, err)
	}
	p := &Page{Path: path, mem: mem}
	if err := p.Publish(extclock.State{}); err != nil {
		return nil, err
	}
	atomic.StoreUint64(p.word(0), magic)
	return p, nil
}

func (p *Page) word(i int) *uint64 { return (*uint64)(unsafe.Pointer(&p.mem[i*8])) }

// Publish implements extclock.Sink.
func (p *Page) Publish(s extclock.State) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.gone {
		return errors.New("goclock: page closed")
	}
	frozen := uint64(0)
	if s.Frozen {
		frozen = 1
	}
	p.seq++
	atomic.StoreUint64(p.word(1), 2*p.seq-1) // odd: writing
	atomic.StoreUint64(p.word(2), uint64(s.At))
	atomic.StoreUint64(p.word(3), uint64(s.Offset))
	atomic.StoreUint64(p.word(4), uint64(s.PPB))
	atomic.StoreUint64(p.word(5), frozen)
	atomic.StoreUint64(p.word(1), 2*p.seq)
	return nil
}

// Close unmaps the page (the file stays until removed).
func (p *Page) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.gone {
		return nil
	}
	p.gone = true
	return syscall.Munmap(p.mem)
}

// probeSource is the clock probe for the Go route: built with the same
// overlay, it prints time.Now() for every line it reads.
const probeSource = `package main

import (
	"bufio"
	"fmt"
	"os"
	"time"
)

func main() {
	in, out := bufio.NewScanner(os.Stdin), bufio.NewWriter(os.Stdout)
	for in.Scan() {
		t := time.Now().UnixNano()
		fmt.Fprintf(out, "%d.%09d\n", t/1e9, t%1e9)
		out.Flush()
	}
}
`

// BuildProbe builds the Go clock probe into out with the overlay.
func BuildProbe(ctx context.Context, out string) error {
	dir, err := os.MkdirTemp("", "snowchaos-goprobe-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(probeSource), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module snowchaosprobe\n\ngo 1.21\n"), 0o644); err != nil {
		return err
	}
	return Build(ctx, dir, ".", out)
}
