// Package netns runs the parts of a run on separate network stacks of this
// machine: each node, the lease store and each load client gets a Linux
// network namespace of its own, joined by veth pairs to a bridge, so that
// traffic between them crosses a real (virtual) network path and the
// kernel, not a proxy, can cut it.
//
// What a run creates, and only that, it removes again (Net.Close, also
// after a failed run or a SIGINT; a crashed run's leftovers are removed by
// the next run that starts, see Sweep):
//
//   - namespaces named sc-<run id>-<host>, one per host, and
//     sc-<run id>-hub holding the bridge (br0) and the hosts' veth ends;
//     every link lives inside these namespaces, none in the host's;
//   - in the host's namespace, one unreachable route for the run's subnet
//     (a /24 from a private range no address or route of this machine
//     overlaps), so that nothing in the harness process can send a packet
//     for the run's addresses anywhere but into the run's namespaces;
//   - nftables rules only in the run's own namespaces, in one table
//     (inet snowchaos) per namespace: the machine's rulesets are never read
//     for writing, flushed or changed;
//   - a record, /run/snowchaos-netns/<run id>.json, naming the owner process
//     (PID and start time), the subnet and every namespace: the marker by
//     which Sweep knows a leftover is a crashed run's and not someone else's.
//
// The namespaces have no default route: a host reaches loopback and the
// run's subnet, nothing else.
//
// What a namespace does not separate: the clock (CLOCK_REALTIME and
// CLOCK_MONOTONIC are the kernel's, shared by every namespace; Linux's
// time namespaces offset only the monotonic and boot clocks, never the wall
// clock), the kernel itself, the CPUs and the memory. Clock faults
// therefore still go through each node's fault clock (the admin API), as on
// one host; see docs/multihost.md.
//
// Network faults: a partition (both ways, or one direction only) is a set
// of nftables drop rules in the cut-off host's namespace; a whole store
// outage drops everything on the store's link. Without nft the fallback is
// the host's link taken down (both directions only). Latency and loss need
// tc netem; Create detects whether the kernel has it (Caps.Netem) so a run
// can say which path a delay fault took.
package netns
