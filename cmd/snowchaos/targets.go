package main

// The harness targets snowchaos run can name, beyond the in-process ones
// harness/target registers itself: importing a target package registers
// its targets.
import (
	_ "github.com/snowchaos/snowchaos/harness/target/exec"   // "exec": any command, clock faults from outside
	_ "github.com/snowchaos/snowchaos/harness/target/remote" // "http" and "process"
)
