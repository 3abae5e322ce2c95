package exec

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/snowchaos/snowchaos/harness/target"
)

// maxBody bounds an HTTP answer.
const maxBody = 64 << 20

// get sends GET u to process p and returns the status and the body,
// bounded by maxBody.
func (n *node) get(ctx context.Context, p *proc, u string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("exec: node %s: %w", n.spec.Name, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		return 0, nil, fmt.Errorf("exec: node %s: reading %s: %w", n.spec.Name, u, err)
	}
	if len(body) > maxBody {
		return 0, nil, fmt.Errorf("exec: node %s: %s answered more than %d bytes", n.spec.Name, u, maxBody)
	}
	return resp.StatusCode, body, nil
}

// requestHTTP asks over HTTP. A status other than 200 is a refused call;
// a 200 whose body is not exactly the IDs asked for, each of the declared
// kind, is a protocol violation (the process keeps running: HTTP answers
// cannot fall out of step).
func (n *node) requestHTTP(ctx context.Context, p *proc, dst ids) (int, error) {
	if err := p.usable(); err != nil {
		return 0, err
	}
	count := dst.len()
	u := n.expand(n.x.URL, p.port, count)
	status, body, err := n.get(ctx, p, u)
	if err != nil {
		return 0, err
	}
	if status != http.StatusOK {
		return 0, fmt.Errorf("%w: exec: node %s: %s answered %d %s: %.200s", target.ErrRefused, n.spec.Name, u, status, http.StatusText(status), body)
	}
	got, err := ParseResponse(n.x.Format, n.x.Field, body)
	if err != nil {
		return 0, n.violate(p, fmt.Sprintf("%s answered 200 with a body that is not %s of IDs: %v (body %q)", u, n.x.Format, err, clip(string(body))))
	}
	if len(got) != count {
		return 0, n.violate(p, fmt.Sprintf("%s answered %d IDs for %d asked for", u, len(got), count))
	}
	for i, s := range got {
		v, err := ParseID(n.kind, s)
		if err != nil {
			return i, n.violate(p, fmt.Sprintf("ID %d of %s's answer is not a %s ID: %v", i+1, u, n.kind, err))
		}
		dst.put(i, v)
	}
	return count, nil
}

// readingHTTP asks process p for its clock reading at the time URL.
func (n *node) readingHTTP(ctx context.Context, p *proc, wait time.Duration) (reading, error) {
	if err := p.usable(); err != nil {
		return reading{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	u := n.expand(n.x.TimeURL, p.port, 0)
	t0, _ := realClock.Now()
	status, body, err := n.get(ctx, p, u)
	t1, _ := realClock.Now()
	if err != nil {
		return reading{}, err
	}
	if status != http.StatusOK {
		return reading{}, fmt.Errorf("%w: %s answered %d %s", ErrNotReading, u, status, http.StatusText(status))
	}
	wall, res, err := ParseReading(string(body))
	if err != nil {
		return reading{}, err
	}
	return reading{wall: wall, res: res, t0: t0, t1: t1}, nil
}
