package smoke

import (
	"context"
	"encoding/json"
	"os"
	"testing"

	"github.com/snowchaos/snowchaos/harness"
	"github.com/snowchaos/snowchaos/harness/scenario"
)

func TestSmoke(t *testing.T) {
	var suite []*scenario.Scenario
	for _, f := range []string{os.Getenv("SCEN")} {
		s, err := scenario.ParseFile(f)
		if err != nil {
			t.Fatal(err)
		}
		suite = append(suite, s)
	}
	if err := harness.Prepare(suite, harness.Options{}); err != nil {
		t.Fatal(err)
	}
	rep, err := harness.Run(context.Background(), suite, harness.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.MarshalIndent(rep, "", " ")
	os.WriteFile("/tmp/smoke/out.json", b, 0o644)
}
