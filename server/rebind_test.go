package server

import (
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/node"
	"github.com/snowchaos/snowchaos/node/nodetest"
)

// TestRebindWindowOverHTTP serves a node held in the middle of a rebind
// (the generator bound to its lost lease closed, the successor not yet
// served): the ID routes and /readyz answer the lease change's 503, never
// the closed generator's error, and neither does any request racing the
// rebind; once the successor serves, the node issues on its new worker.
func TestRebindWindowOverHTTP(t *testing.T) {
	r := nodetest.NewRebind(t, node.Config{})
	n := serveTestNode(t, false, r.Node, Config{Logger: slog.New(slog.DiscardHandler)})

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var closed []string
	for w := range 4 {
		path := "/v1/id"
		if w%2 == 1 {
			path = "/v1/ids?count=3"
		}
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := n.client.Get(n.url + path)
				if err != nil {
					continue
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if strings.Contains(string(b), generator.ErrClosed.Error()) || strings.Contains(resp.Header.Get(PartialHeader), generator.ErrClosed.Error()) {
					mu.Lock()
					closed = append(closed, path+": "+string(b))
					mu.Unlock()
				}
			}
		})
	}
	r.Hold(t)
	for _, path := range []string{"/v1/id", "/v1/ids?count=2", "/readyz"} {
		code, hdr, body := n.do(t, "GET", path, nil, "")
		short := errUnavailable
		if path == "/readyz" {
			short = errNotReady
		}
		wantError(t, code, hdr, body, http.StatusServiceUnavailable, short, "lease changed")
	}
	r.Release()
	close(stop)
	wg.Wait()
	if len(closed) > 0 {
		t.Errorf("%d requests racing the rebind got the closed generator's error, first: %s", len(closed), closed[0])
	}
	code, _, body := n.do(t, "GET", "/v1/id", nil, "")
	if code != 200 {
		t.Fatalf("after the rebind: %d %s", code, body)
	}
	id, err := generator.ParseID(strings.TrimSpace(body))
	if err != nil || generator.DefaultLayout().Decode(id).Node != 1 {
		t.Fatalf("after the rebind: ID %s (%v) not on worker 1", body, err)
	}
	if code, _, body := n.do(t, "GET", "/v1/info", nil, ""); code != 200 || !strings.Contains(body, `"node":1,`) {
		t.Fatalf("after the rebind /v1/info: %d %s, want node 1", code, body)
	}
}
