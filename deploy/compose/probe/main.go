// Command probe is the health check of the snowchaos container image,
// whose distroless final stage has no shell, curl or wget:
//
//	probe http://127.0.0.1:8080/healthz
//
// It GETs each URL in turn (3 s timeout each) and exits 0 when every answer
// is 2xx, else 1 with the reason on stderr. It is a static binary built
// from source beside snowchaos by the Dockerfile.
package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

// timeout bounds each request.
const timeout = 3 * time.Second

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

// run checks every URL in args and returns the exit code.
func run(args []string, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: probe URL...")
		return 2
	}
	for _, u := range args {
		if err := check(context.Background(), u, timeout); err != nil {
			fmt.Fprintln(stderr, "probe:", err)
			return 1
		}
	}
	return 0
}

// check GETs url and returns nil for a 2xx answer.
func check(ctx context.Context, url string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("%s: HTTP %d: %s", url, resp.StatusCode, body)
	}
	return nil
}
