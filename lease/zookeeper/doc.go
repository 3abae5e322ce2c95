// Package zookeeper is a lease.Registry on Apache ZooKeeper, the store
// Twitter's Snowflake and Meituan's Leaf keep their worker IDs in. It
// passes lease/leasetest unchanged, as the memory, Postgres and etcd
// registries do.
//
// # Znodes
//
// Under Options.Root (default /snowchaos/leases; a zk:// URL names it, see
// zkurl), for worker ID 42:
//
//	w/00042  ephemeral, owned by the lease's session  {"holder":"node-a","ttl_ms":10000,"clock_ms":1767225600100}
//	m/00042  persistent                                {"holder":"node-a","token":4294967313,"last_issued_ms":1767225600123}
//
// The w znode is the lease: it exists exactly while the session that
// created it lives. The m znode (the mark) outlives it and hands the
// holder's identity and last_issued_ms to the next holder, across release,
// expiry and a crash.
//
// # Acquire
//
// Every lease has a ZooKeeper session (and a TCP connection) of its own,
// requested with the lease's TTL as session timeout. Acquire reads the
// znodes, picks a worker ID in the order lease.Registry documents, and
// claims it in one multi-op through the new session: create w (fails if
// it exists, so a worker ID held by anyone, the same holder included, is
// never taken over) and write m at the version it read (fails if anyone
// wrote it since, so the last_issued_ms handed to the new holder is the
// latest recorded). A lost race re-reads and tries the next worker ID.
//
// # Token
//
// The fencing token is the w znode's czxid: the zxid of the transaction
// that created it. ZooKeeper's zxids increase strictly across the whole
// ensemble, so a later grant on a worker ID always has a larger token,
// even if someone deleted the marks. It is written into m right after the
// claim.
//
// # Renew, Record, Release
//
// Each is one multi-op through the lease's own session, conditioned on the
// versions of w and m this Registry last wrote: Renew rewrites w with the
// holder's clock report (its mtime is the server's time of the renewal:
// LeasedUntil is mtime + TTL, store time, and List ages the report from
// it) and raises last_issued_ms in m; Record raises last_issued_ms only;
// Release deletes w and raises last_issued_ms. A version conflict is
// checked against the znodes (is w still this session's, with this
// czxid?) and answers ErrLost when it is not. A lease can be renewed and
// released only through the Registry that granted it: its session lives
// there.
//
// # Expiry
//
// The server ends the session, and so deletes w, when it has heard
// nothing from the client for the session timeout: a crashed or
// partitioned holder loses its worker ID then. A connected client pings on
// its own, so the Registry also ends a lease whose holder has not renewed
// for a TTL, by the Options.Clock's monotonic time, by closing its session
// (the server deletes w at once): a wedged holder does not keep its worker
// ID. The server may grant a longer session timeout than asked for
// (minSessionTimeout): the lease's TTL is then the longer one. It never
// may grant a shorter one: Acquire fails with ErrInvalidRequest when the
// TTL exceeds the server's maxSessionTimeout, since a session that can end
// before the holder's fence closes could hand its worker ID over while the
// holder still issues.
//
// # Fencing and session loss
//
// The lease.Keeper fences on its own monotonic clock: it stops issuing
// TTL*(1-MarginRate)-MarginAbs after sending the last renewal that
// succeeded. A renewal succeeds only after a round trip through the
// session, so the server heard from the session after the renewal was
// sent and cannot expire it before that send time plus the timeout: the
// fence closes first. While the session is Disconnected every call fails
// at once with lease.ErrUnavailable, and the Keeper's countdown runs on;
// the client keeps reconnecting. If it reconnects within the session
// timeout the session, its w znode and the lease survive, and renewals
// succeed again (the lease's own deadline restarts from the reconnection,
// as the server's does). If the server expired the session meanwhile,
// every call answers lease.ErrLost and the Keeper acquires anew, under a
// new token. A session expired by the server is never reused: the
// client's automatic new session is closed.
//
// In an ensemble, the leader learns of a session's activity at a follower
// within half a tick; keep the Keeper's safety margin (10% of the TTL plus
// 50ms by default) above the ensemble's tickTime.
//
// Each call honours its context's deadline: go-zookeeper calls take no
// context, so each runs in a goroutine the caller stops waiting for when
// the context ends (the goroutine ends when the client answers or gives
// up on the connection).
package zookeeper
