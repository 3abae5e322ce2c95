// Command gendash writes snowchaos's Grafana dashboards as JSON files:
//
//	go run ./dashboards/cmd/gendash -out dashboards/json
//
// `make dashboards` runs it; the files it writes are committed, and a test
// in package dashboards fails when they differ from what it would write.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/snowchaos/snowchaos/dashboards"
)

func main() {
	out := flag.String("out", "dashboards/json", "directory to write the dashboard JSON files into")
	flag.Parse()
	paths, err := dashboards.Write(*out)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gendash:", err)
		os.Exit(1)
	}
	for _, p := range paths {
		fmt.Println("wrote", p)
	}
}
