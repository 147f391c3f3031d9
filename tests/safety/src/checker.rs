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
//!     granted has a larger fence (only where Redis keeps its data).

use std::collections::{BTreeMap, HashSet};

use crate::history::Record;
use crate::resource::Write;

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
    /// Tokens found in worker output (histories, stderr logs).
    pub secrets: Vec<String>,
}

#[derive(Debug, Default)]
struct Lease {
    worker: String,
    fence: u64,
    t0: u64,
    start: u64,
    believed_end: u64,
    release_start: Option<u64>,
    end: Option<&'static str>,
}

/// How many accepted writes in `writes` were stale (property (a)).
pub fn stale_accepted(writes: &[Write]) -> usize {
    let mut last: Option<(u64, &str)> = None;
    let mut stale = 0;
    for w in writes.iter().filter(|w| w.accepted) {
        if let Some((f, lease)) = last {
            if w.fence < f || (w.fence == f && w.lease != lease) {
                stale += 1;
            }
        }
        if last.is_none_or(|(f, _)| w.fence >= f) {
            last = Some((w.fence, &w.lease));
        }
    }
    stale
}

pub fn check(
    records: &[Record],
    writes: &[Write],
    killed: &HashSet<String>,
    finished: &HashSet<String>,
    started: &[String],
    d_findings: Vec<String>,
) -> Verdict {
    let mut v = Verdict {
        d: d_findings,
        ..Verdict::default()
    };

    // (a) from the resource's own log.
    let mut last: Option<(u64, &str)> = None;
    for w in writes {
        if !w.accepted {
            v.writes_rejected += 1;
            continue;
        }
        v.writes_accepted += 1;
        if let Some((f, lease)) = last {
            if w.fence < f || (w.fence == f && w.lease != lease) {
                v.a.push(format!(
                    "stale write accepted: {} wrote fence {} after fence {} was accepted",
                    w.worker, w.fence, f
                ));
            }
        }
        if last.is_none_or(|(f, _)| w.fence >= f) {
            last = Some((w.fence, &w.lease));
        }
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

    // (c)
    for (hash, l) in &leases {
        match l.end {
            Some("released") => v.released += 1,
            Some("lost") => v.lost += 1,
            Some(_) => v.expired += 1,
            None if killed.contains(&l.worker) => v.expired += 1,
            None => v.c.push(format!(
                "lease {}.. of {} (fence {}) never ended",
                &hash[..12],
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

    // (b) sweep over believed-valid intervals.
    let mut intervals: Vec<(u64, u64, &str, &Lease)> = leases
        .iter()
        .filter_map(|(h, l)| {
            let end = l
                .release_start
                .map_or(l.believed_end, |r| r.min(l.believed_end));
            (end > l.start).then_some((l.start, end, h.as_str(), l))
        })
        .collect();
    intervals.sort_by_key(|i| i.0);
    let mut open: Option<(u64, &str, &Lease)> = None;
    for &(start, end, hash, l) in &intervals {
        if let Some((oend, ohash, ol)) = open {
            if start < oend && ohash != hash {
                v.b.push(format!(
                    "{} (fence {}) believed valid until +{:.1} ms while {} (fence {}) acquired",
                    ol.worker,
                    ol.fence,
                    (oend - start) as f64 / 1e6,
                    l.worker,
                    l.fence
                ));
            }
        }
        if open.is_none_or(|(oend, _, _)| end > oend) {
            open = Some((end, hash, l));
        }
    }

    // (e) fence order: granted (acquired record) before another acquire
    // started => smaller fence.
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
