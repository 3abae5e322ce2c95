package generator

import (
	"context"
	"errors"
	"testing"
)

type stubCheckpoint struct {
	mark    int64
	loadErr error
	saveErr error
	saves   int
}

func (m *stubCheckpoint) Load() (int64, error) { return m.mark, m.loadErr }
func (m *stubCheckpoint) Save(_ context.Context, mark int64) error {
	if m.saveErr != nil {
		return m.saveErr
	}
	m.mark = mark
	m.saves++
	return nil
}

func TestCheckpointsLoadsTheLargestAndSavesAll(t *testing.T) {
	a, b := &stubCheckpoint{mark: 10}, &stubCheckpoint{mark: 25}
	c := Checkpoints(a, b)
	if got, err := c.Load(); err != nil || got != 25 {
		t.Fatalf("Load = %d, %v; want 25, nil", got, err)
	}
	if err := c.Save(context.Background(), 40); err != nil {
		t.Fatal(err)
	}
	if a.mark != 40 || b.mark != 40 {
		t.Fatalf("marks after Save(40): %d, %d", a.mark, b.mark)
	}
	if one := Checkpoints(a); one != Checkpointer(a) {
		t.Fatal("Checkpoints with one argument should return it")
	}
}

func TestCheckpointsErrors(t *testing.T) {
	boom := errors.New("boom")
	a, b := &stubCheckpoint{mark: 10}, &stubCheckpoint{loadErr: boom}
	if _, err := Checkpoints(a, b).Load(); !errors.Is(err, boom) {
		t.Fatalf("Load error = %v, want boom", err)
	}
	a, b = &stubCheckpoint{saveErr: boom}, &stubCheckpoint{}
	if err := Checkpoints(a, b).Save(context.Background(), 5); !errors.Is(err, boom) {
		t.Fatalf("Save error = %v, want boom", err)
	}
	if b.saves != 0 {
		t.Fatal("Save went on past the first failure")
	}
}
