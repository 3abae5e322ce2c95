package main

import _ "github.com/snowchaos/snowchaos/harness/target/exec" // registers the "exec" harness target (any command, clock faults from outside)
