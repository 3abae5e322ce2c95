package composetest

// PromConfig is the part of a prometheus.yml the stack relies on (decode
// it with a YAML decoder): the rule files and each scrape job's static
// targets. deploy's own tests read deploy/prometheus.yml through it too.
type PromConfig struct {
	RuleFiles     []string `yaml:"rule_files"`
	ScrapeConfigs []struct {
		JobName       string `yaml:"job_name"`
		StaticConfigs []struct {
			Targets []string `yaml:"targets"`
		} `yaml:"static_configs"`
	} `yaml:"scrape_configs"`
}

// Targets returns the static targets of the jobs named job, in order.
func (c PromConfig) Targets(job string) []string {
	var out []string
	for _, sc := range c.ScrapeConfigs {
		if sc.JobName == job {
			for _, st := range sc.StaticConfigs {
				out = append(out, st.Targets...)
			}
		}
	}
	return out
}
