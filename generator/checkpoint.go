package generator

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// FileCheckpoint is a Checkpointer that keeps the mark in one small text
// file. Save writes a temporary file in the same directory, fsyncs it,
// renames it over the target and fsyncs the directory, so after a crash the
// file holds either the old mark or the new one, never a torn write. Each
// Save costs two fsyncs (typically milliseconds) and a goroutine, so that
// it can return by its context's deadline while the disk stalls; the
// generator calls it about once per Settings.Reserve/2. Safe for
// concurrent use: reads and writes take turns.
type FileCheckpoint struct {
	path string
	turn chan struct{} // holds a token while a read or write is under way
}

var _ Checkpointer = (*FileCheckpoint)(nil)

// NewFileCheckpoint returns a checkpointer for path. The file is created on
// the first Save; its directory must exist.
func NewFileCheckpoint(path string) *FileCheckpoint {
	return &FileCheckpoint{path: path, turn: make(chan struct{}, 1)}
}

// Path returns the file the mark is kept in.
func (c *FileCheckpoint) Path() string { return c.path }

// Load returns the stored mark (Unix ms), or 0 when the file does not
// exist. A file that does not hold one non-negative decimal integer is an
// error naming the file and its content, wrapping ErrCheckpoint.
func (c *FileCheckpoint) Load() (int64, error) {
	c.turn <- struct{}{}
	defer func() { <-c.turn }()
	b, err := os.ReadFile(c.path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrCheckpoint, err)
	}
	s := strings.TrimSpace(string(b))
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("%w: %s holds %s, want a non-negative Unix ms mark", ErrCheckpoint, c.path, quoteInput(s))
	}
	return v, nil
}

// Save durably replaces the stored mark with markMs: temporary file,
// fsync, rename, fsync of the directory. When ctx ends first it returns
// at once; a write already begun then completes in the background (before
// any later Save starts). Errors wrap ErrCheckpoint.
func (c *FileCheckpoint) Save(ctx context.Context, markMs int64) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %s: not written: %w", ErrCheckpoint, c.path, context.Cause(ctx))
	}
	select {
	case c.turn <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("%w: %s: not written, an earlier write is still under way: %w", ErrCheckpoint, c.path, context.Cause(ctx))
	}
	done := make(chan error, 1)
	go func() {
		defer func() { <-c.turn }()
		done <- c.saveLocked(markMs)
	}()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("%w: %s: %v", ErrCheckpoint, c.path, err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w: %s: write not finished: %w", ErrCheckpoint, c.path, context.Cause(ctx))
	}
}

func (c *FileCheckpoint) saveLocked(markMs int64) error {
	dir := filepath.Dir(c.path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(c.path)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if _, err := f.WriteString(strconv.FormatInt(markMs, 10) + "\n"); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, c.path); err != nil {
		return err
	}
	ok = true
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Checkpoints combines checkpointers, for example a local file and a
// worker-ID lease that carries the mark across hosts. Load returns the
// largest stored mark (so no incarnation's mark is ever ignored) and fails
// if any of them fails; Save writes to each in order under the one
// context (so their writes share its deadline) and stops at the first
// error. With one argument it returns that checkpointer.
func Checkpoints(cs ...Checkpointer) Checkpointer {
	if len(cs) == 1 {
		return cs[0]
	}
	return multiCheckpoint(cs)
}

type multiCheckpoint []Checkpointer

func (m multiCheckpoint) Load() (int64, error) {
	var mark int64
	for _, c := range m {
		x, err := c.Load()
		if err != nil {
			return 0, err
		}
		mark = max(mark, x)
	}
	return mark, nil
}

func (m multiCheckpoint) Save(ctx context.Context, markMs int64) error {
	for _, c := range m {
		if err := c.Save(ctx, markMs); err != nil {
			return err
		}
	}
	return nil
}
