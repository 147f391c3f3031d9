//! The checker: turns the workers' histories and the resource's log into
//! verdicts on the four properties of issue 6 (plus fence order):
//!
//! (a) the resource never accepted a stale fence: walking its log in the
//!     order it applied writes, every accepted write has a fence greater
//!     than every earlier accepted one, or equal to it from the same lease;
//! (b) no two leases were believed valid at the same time: a lease is
//!     believed valid from its `acquired` record until the latest
//!     `t + valid_ms` it reported, cut at its `release_start`;
//! (c) every lease ended: released, reported lost (LockLost), or expired
//!     (its holder was killed, or its release failed with a Redis error,
//!     and (d) confirms the key went away); and every worker that was not
//!     killed finished;
//! (d) nothing stays held after the run (checked by the orchestrator on the
//!     servers: no lock key a TTL after the last worker exited);
//! (e) fence order: a lease whose acquire started after another lease was
//!     granted has a larger fence;
//! (f) the resource rejects only writes of leases that really were
//!     superseded: a rejected write's lease must have started its acquire
//!     before the lease whose write blocked it was granted (otherwise its
//!     fence should have been the larger one: the resource's view of (e)).
//!
//! For a semaphore of N permits and a read-write lock (leases with a
//! `role`), (a) replays the resource's rule for their ops (reads newer than
//! every accepted write, writes newer than everything, a permit's fence
//! presented by one lease only: `resource::Rule`); (b) is capacity: never
//! more than N permits, nor a writer beside anyone, believed valid at once;
//! (e) holds between two leases when one excludes the other (a writer, a
//! permit of a one-permit semaphore): shared holders may learn of their
//! grants in another order than the server made them.

use std::collections::{BTreeMap, HashSet};

use fencelock_testkit::exclusion::overlaps;

use crate::history::Record;
use crate::resource::{Rule, Write};

#[derive(Debug, Default, Clone)]
pub struct Verdict {
    pub critical_sections: usize,
    pub writes_accepted: usize,
    pub writes_rejected: usize,
    pub released: usize,
    pub lost: usize,
    pub expired: usize,
    pub a: Vec<String>,
    pub b: Vec<String>,
    pub c: Vec<String>,
    pub d: Vec<String>,
    pub e: Vec<String>,
    pub f: Vec<String>,
    /// Tokens found in worker output (histories, stderr logs).
    pub secrets: Vec<String>,
}

#[derive(Debug, Default)]
struct Lease {
    worker: String,
    /// `permit`, `read`, `write`; `None` for the mutex.
    role: Option<String>,
    fence: u64,
    t0: u64,
    start: u64,
    believed_end: u64,
    release_start: Option<u64>,
    end: Option<&'static str>,
}

/// How many accepted writes in `writes` were stale (property (a)).
pub fn stale_accepted(writes: &[Write]) -> usize {
    let mut rule = Rule::default();
    let mut stale = 0;
    for w in writes.iter().filter(|w| w.accepted) {
        if rule.admits(w.op, w.fence, &w.lease).is_err() {
            stale += 1;
        }
        rule.accept(w.op, w.fence, &w.lease);
    }
    stale
}

/// `permits`: a semaphore's permit count (1 otherwise).
pub fn check(
    records: &[Record],
    writes: &[Write],
    killed: &HashSet<String>,
    finished: &HashSet<String>,
    started: &[String],
    d_findings: Vec<String>,
    permits: usize,
) -> Verdict {
    let mut v = Verdict {
        d: d_findings,
        ..Verdict::default()
    };

    // (a) from the resource's own log, replayed through the rule.
    let mut rule = Rule::default();
    for w in writes {
        if !w.accepted {
            v.writes_rejected += 1;
            continue;
        }
        v.writes_accepted += 1;
        if let Err(newer) = rule.admits(w.op, w.fence, &w.lease) {
            v.a.push(format!(
                "stale {} accepted: {} with fence {} after lease {}.. had one as new",
                w.op,
                w.worker,
                w.fence,
                newer.get(..12).unwrap_or(&newer)
            ));
        }
        rule.accept(w.op, w.fence, &w.lease);
    }

    // Assemble leases.
    let mut leases: BTreeMap<String, Lease> = BTreeMap::new();
    for r in records {
        let Some(hash) = r.lease.as_ref() else {
            continue;
        };
        if r.ev == "acquired" {
            v.critical_sections += 1;
            let l = leases.entry(hash.clone()).or_default();
            l.worker = r.w.clone();
            l.role = r.role.clone();
            l.fence = r.fence.unwrap_or(0);
            l.start = r.t;
            l.t0 = r.t0.unwrap_or(r.t);
        }
        let Some(l) = leases.get_mut(hash) else {
            continue;
        };
        if let Some(ms) = r.valid_ms {
            if ms > 0.0 {
                l.believed_end = l.believed_end.max(r.t + (ms * 1e6) as u64);
            }
        }
        match r.ev.as_str() {
            "release_start" => l.release_start = Some(r.t),
            "released" => l.end = Some("released"),
            "release_lost" => l.end = Some("lost"),
            "release_error" => l.end = Some("expired"),
            _ => {}
        }
    }

    // (f) replay the resource's log: who set the fence a write was
    // rejected against, and was that lease granted before this one began?
    let mut rule = Rule::default();
    for w in writes {
        if w.accepted {
            rule.accept(w.op, w.fence, &w.lease);
            continue;
        }
        let blocker = rule.admits(w.op, w.fence, &w.lease).err();
        let (Some(k), Some(l)) = (
            blocker.as_ref().and_then(|b| leases.get(b)),
            leases.get(&w.lease),
        ) else {
            continue;
        };
        if k.start < l.t0 {
            v.f.push(format!(
                "{} (fence {}) was refused: {} got the larger fence {} before {}'s acquire began",
                l.worker, l.fence, k.worker, k.fence, l.worker
            ));
        }
    }

    // (c)
    for (hash, l) in &leases {
        match l.end {
            Some("released") => v.released += 1,
            Some("lost") => v.lost += 1,
            Some(_) => v.expired += 1,
            None if killed.contains(&l.worker) => v.expired += 1,
            None => v.c.push(format!(
                "lease {}.. of {} (fence {}) never ended",
                hash.get(..12).unwrap_or(hash),
                l.worker,
                l.fence
            )),
        }
    }
    for w in started {
        if !killed.contains(w) && !finished.contains(w) {
            v.c.push(format!("worker {w} did not finish its run"));
        }
    }

    // (b) no two believed-valid intervals overlap (the shared sweep), or
    // for a semaphore and a read-write lock, no more than they allow.
    let mut windows: Vec<(u64, u64, &str)> = leases
        .iter()
        .filter_map(|(h, l)| {
            let end = l
                .release_start
                .map_or(l.believed_end, |r| r.min(l.believed_end));
            (end > l.start).then_some((l.start, end, h.as_str()))
        })
        .collect();
    if leases.values().any(|l| l.role.is_some()) {
        v.b = over_capacity(&windows, &leases, permits);
        windows.clear();
    }
    for (o, i) in overlaps(&mut windows) {
        let ((start, _, hash), (_, oend, ohash)) = (windows[i], windows[o]);
        let (l, ol) = (&leases[hash], &leases[ohash]);
        v.b.push(format!(
            "{} (fence {}) believed valid until +{:.1} ms while {} (fence {}) acquired",
            ol.worker,
            ol.fence,
            (oend - start) as f64 / 1e6,
            l.worker,
            l.fence
        ));
    }

    // (e) fence order: granted (acquired record) before another acquire
    // started => smaller fence.
    if leases.values().any(|l| l.role.is_some()) {
        v.e = fence_order_of_excluding_pairs(&leases, permits);
        return v;
    }
    let mut by_grant: Vec<&Lease> = leases.values().collect();
    by_grant.sort_by_key(|l| l.start);
    let mut by_t0: Vec<&Lease> = leases.values().collect();
    by_t0.sort_by_key(|l| l.t0);
    let (mut i, mut max_before): (usize, Option<&Lease>) = (0, None);
    for l in by_t0 {
        while i < by_grant.len() && by_grant[i].start < l.t0 {
            if max_before.is_none_or(|m| by_grant[i].fence > m.fence) {
                max_before = Some(by_grant[i]);
            }
            i += 1;
        }
        if let Some(m) = max_before {
            if m.fence >= l.fence {
                v.e.push(format!(
                    "{} got fence {} after {} had been granted fence {}",
                    l.worker, l.fence, m.worker, m.fence
                ));
            }
        }
    }
    v
}

/// Whether a lease excludes every other of its lock: a writer, or a permit
/// of a one-permit semaphore.
fn excludes(l: &Lease, permits: usize) -> bool {
    match l.role.as_deref() {
        Some("read") => false,
        Some("permit") => permits == 1,
        _ => true,
    }
}

/// (b) for shared kinds: sweep the believed-valid windows; at no instant
/// more than `permits` permits, or a writer beside anyone.
fn over_capacity(
    windows: &[(u64, u64, &str)],
    leases: &BTreeMap<String, Lease>,
    permits: usize,
) -> Vec<String> {
    // Ends before starts at one instant: the windows are half-open.
    let mut edges: Vec<(u64, bool, &str)> = windows
        .iter()
        .flat_map(|&(s, e, h)| [(s, true, h), (e, false, h)])
        .collect();
    edges.sort();
    let mut holding: Vec<&str> = Vec::new();
    let mut found = Vec::new();
    for (t, start, hash) in edges {
        if !start {
            holding.retain(|h| *h != hash);
            continue;
        }
        holding.push(hash);
        let roles: Vec<&str> = holding
            .iter()
            .map(|h| leases[*h].role.as_deref().unwrap_or("mutex"))
            .collect();
        let writers = roles.iter().filter(|r| **r == "write").count();
        let taken = roles.iter().filter(|r| **r == "permit").count();
        if taken > permits || (writers > 0 && holding.len() > 1) {
            let l = &leases[hash];
            found.push(format!(
                "{} ({} fence {}) believed valid at {:.1} ms beside {} others ({})",
                l.worker,
                l.role.as_deref().unwrap_or("mutex"),
                l.fence,
                t as f64 / 1e6,
                holding.len() - 1,
                roles.join(", ")
            ));
        }
    }
    found
}

/// (e) for shared kinds: a lease whose acquire began after another was
/// granted has the larger fence, when one of the two excludes the other.
fn fence_order_of_excluding_pairs(leases: &BTreeMap<String, Lease>, permits: usize) -> Vec<String> {
    let mut found = Vec::new();
    for m in leases.values() {
        for l in leases.values() {
            let ordered = excludes(m, permits) || excludes(l, permits);
            if ordered && m.start < l.t0 && m.fence >= l.fence {
                found.push(format!(
                    "{} got fence {} after {} had been granted fence {}",
                    l.worker, l.fence, m.worker, m.fence
                ));
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn rec(t: u64, w: &str, ev: &str, lease: &str, fence: u64, valid_ms: Option<f64>) -> Record {
        Record {
            t,
            w: w.into(),
            ev: ev.into(),
            lease: (!lease.is_empty()).then(|| lease.into()),
            fence: (fence > 0).then_some(fence),
            valid_ms,
            t0: (ev == "acquired").then_some(t.saturating_sub(MS)),
            ..Record::default()
        }
    }

    /// One complete critical section of `w` with lease `l`, fence `f`,
    /// from `t` (ms) for `len` ms, believing `valid` ms of validity.
    fn section(w: &str, l: &str, f: u64, t: u64, len: u64, valid: f64, end: &str) -> Vec<Record> {
        vec![
            rec(t * MS, w, "acquired", l, f, Some(valid)),
            rec(
                (t + len / 2) * MS,
                w,
                "write_start",
                l,
                f,
                Some(valid - len as f64 / 2.0),
            ),
            rec(
                (t + len) * MS,
                w,
                "release_start",
                l,
                0,
                Some(valid - len as f64),
            ),
            rec((t + len + 1) * MS, w, end, l, 0, None),
        ]
    }

    fn write(fence: u64, lease: &str, accepted: bool) -> Write {
        Write {
            t: 0,
            op: 'W',
            fence,
            lease: lease.into(),
            worker: "w".into(),
            accepted,
        }
    }

    fn run(records: &[Record], writes: &[Write], killed: &[&str], finished: &[&str]) -> Verdict {
        let killed = killed.iter().map(|s| s.to_string()).collect();
        let finished: HashSet<String> = finished.iter().map(|s| s.to_string()).collect();
        let started: Vec<String> = finished.iter().cloned().collect();
        check(records, writes, &killed, &finished, &started, Vec::new(), 1)
    }

    #[test]
    fn a_clean_history_has_no_findings() {
        let mut r = section("A", "l1", 1, 0, 10, 990.0, "released");
        r.extend(section("B", "l2", 2, 12, 10, 990.0, "released"));
        let w = [
            write(1, "l1", true),
            write(2, "l2", true),
            write(2, "l2", true),
        ];
        let v = run(&r, &w, &[], &["A", "B"]);
        assert_eq!(v.critical_sections, 2);
        assert!(
            v.a.is_empty() && v.b.is_empty() && v.c.is_empty() && v.e.is_empty(),
            "{v:?}"
        );
        assert_eq!((v.released, v.writes_accepted), (2, 3));
    }

    #[test]
    fn a_stale_or_reused_fence_accepted_is_found() {
        let v = run(&[], &[write(5, "x", true), write(4, "y", true)], &[], &[]);
        assert_eq!(v.a.len(), 1);
        let v = run(&[], &[write(5, "x", true), write(5, "y", true)], &[], &[]);
        assert_eq!(v.a.len(), 1, "the same fence from another lease is stale");
        let v = run(&[], &[write(5, "x", true), write(4, "y", false)], &[], &[]);
        assert!(v.a.is_empty(), "a rejected stale write is fine");
        assert_eq!(
            stale_accepted(&[write(5, "x", true), write(4, "y", true)]),
            1
        );
    }

    #[test]
    fn b_overlapping_believed_validity_is_found() {
        // B acquires at 5 ms while A (until 10 ms) still believes it is valid.
        let mut r = section("A", "l1", 1, 0, 10, 990.0, "released");
        r.extend(section("B", "l2", 2, 5, 10, 990.0, "released"));
        let v = run(&r, &[], &[], &["A", "B"]);
        assert_eq!(v.b.len(), 1, "{v:?}");
        // A paused: it believed 3 ms of validity, B acquires at 5 ms: fine.
        let mut r = section("A", "l1", 1, 0, 10, 3.0, "release_lost");
        r.extend(section("B", "l2", 2, 5, 10, 990.0, "released"));
        let v = run(&r, &[], &[], &["A", "B"]);
        assert!(v.b.is_empty(), "{v:?}");
        assert_eq!(v.lost, 1);
    }

    #[test]
    fn c_a_lease_that_never_ended_is_found_unless_its_holder_was_killed() {
        let r = vec![rec(0, "A", "acquired", "l1", 1, Some(900.0))];
        assert_eq!(run(&r, &[], &[], &["A"]).c.len(), 1);
        let v = run(&r, &[], &["A"], &[]);
        assert!(v.c.is_empty());
        assert_eq!(v.expired, 1);
        // A worker that neither finished nor was killed.
        let v = check(
            &[],
            &[],
            &HashSet::new(),
            &HashSet::new(),
            &["A".into()],
            Vec::new(),
            1,
        );
        assert_eq!(v.c.len(), 1);
    }

    #[test]
    fn f_a_write_refused_for_an_older_leases_larger_fence_is_found() {
        // A (fence 7) is granted and writes; B starts acquiring after that,
        // gets fence 3 (the counter went back), and its write is refused.
        let mut r = section("A", "l1", 7, 0, 10, 990.0, "released");
        r.extend(section("B", "l2", 3, 20, 10, 990.0, "released"));
        let v = run(
            &r,
            &[write(7, "l1", true), write(3, "l2", false)],
            &[],
            &["A", "B"],
        );
        assert_eq!(v.f.len(), 1, "{v:?}");
        // Superseded: B (fence 8) is granted after A; A's late write is
        // refused, rightly.
        let mut r = section("A", "l1", 7, 0, 10, 5.0, "release_lost");
        r.extend(section("B", "l2", 8, 20, 10, 990.0, "released"));
        let v = run(
            &r,
            &[write(8, "l2", true), write(7, "l1", false)],
            &[],
            &["A", "B"],
        );
        assert!(v.f.is_empty(), "{v:?}");
    }

    fn with_role(mut records: Vec<Record>, role: &str) -> Vec<Record> {
        for r in &mut records {
            r.role = (r.ev == "acquired").then(|| role.to_owned());
        }
        records
    }

    #[test]
    fn semaphore_and_read_write_capacity_and_ops_are_checked() {
        // Two permits of a 2-permit semaphore at once: fine; three: (b).
        let mut r = with_role(section("A", "l1", 1, 0, 10, 990.0, "released"), "permit");
        r.extend(with_role(
            section("B", "l2", 2, 2, 10, 990.0, "released"),
            "permit",
        ));
        let finished = ["A", "B", "C"].map(String::from);
        let set: HashSet<String> = finished.iter().cloned().collect();
        let none = HashSet::new();
        let v = check(&r, &[], &none, &set, &finished, Vec::new(), 2);
        assert!(v.b.is_empty() && v.e.is_empty(), "{v:?}");
        r.extend(with_role(
            section("C", "l3", 3, 4, 10, 990.0, "released"),
            "permit",
        ));
        let v = check(&r, &[], &none, &set, &finished, Vec::new(), 2);
        assert_eq!(v.b.len(), 1, "{v:?}");
        // Readers share; a writer beside a reader is (b).
        let mut r = with_role(section("A", "l1", 1, 0, 10, 990.0, "released"), "read");
        r.extend(with_role(
            section("B", "l2", 2, 2, 10, 990.0, "released"),
            "read",
        ));
        let v = check(&r, &[], &none, &set, &finished, Vec::new(), 1);
        assert!(v.b.is_empty(), "{v:?}");
        r.extend(with_role(
            section("C", "l3", 3, 4, 10, 990.0, "released"),
            "write",
        ));
        let v = check(&r, &[], &none, &set, &finished, Vec::new(), 1);
        assert!(!v.b.is_empty(), "{v:?}");
        // A paused reader's late read after a writer's write: stale (a); a
        // permit's fence presented by two leases: stale (a).
        let op = |op: char, fence: u64, lease: &str| Write {
            op,
            ..write(fence, lease, true)
        };
        let v = run(&[], &[op('W', 5, "w"), op('R', 4, "r")], &[], &[]);
        assert_eq!(v.a.len(), 1, "{v:?}");
        let v = run(&[], &[op('R', 6, "r"), op('W', 5, "w")], &[], &[]);
        assert_eq!(v.a.len(), 1, "a writer older than an accepted read: {v:?}");
        let v = run(
            &[],
            &[op('R', 6, "r"), op('R', 4, "q"), op('W', 7, "w")],
            &[],
            &[],
        );
        assert!(
            v.a.is_empty(),
            "reads need not order among themselves: {v:?}"
        );
        let v = run(
            &[],
            &[op('P', 6, "x"), op('P', 6, "y"), op('P', 2, "z")],
            &[],
            &[],
        );
        assert_eq!(v.a.len(), 1, "{v:?}");
    }

    #[test]
    fn e_a_fence_that_goes_back_is_found() {
        let mut r = section("A", "l1", 7, 0, 10, 990.0, "released");
        r.extend(section("B", "l2", 3, 20, 10, 990.0, "released"));
        let v = run(&r, &[], &[], &["A", "B"]);
        assert_eq!(v.e.len(), 1);
    }
}
