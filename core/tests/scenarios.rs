//! Example-based scenarios on the simulator: one story per test, calm network
//! (1 ms each way, nothing lost) unless the test says otherwise.

mod sim;

use std::time::Duration;

use fencelock_core::{Error, Event, Script, State, Wait};
use sim::{AppAction, Clock, LeaseOpts, Net, Sim, MS};

fn is_acquire_done(e: &Event) -> bool {
    matches!(e, Event::Acquired { .. } | Event::AcquireFailed(_))
}
fn is_released(e: &Event) -> bool {
    matches!(e, Event::Released(_))
}
fn scripts_sent(sim: &Sim, lease: usize) -> Vec<Script> {
    sim.leases[lease].sent.iter().map(|c| c.1.script).collect()
}

/// A counter value far ahead of the simulated server clocks (about 16
/// minutes of ms x 1024), so `stored + 1` decides the fence.
const AHEAD: i64 = 1_000_000 * 1024;

#[test]
fn single_node_acquire_is_one_round_trip_and_release_one_more() {
    let mut sim = Sim::new(1, 1, Net::calm());
    let c = sim.add_client(Clock::PERFECT);
    let a = sim.add_lease(c, LeaseOpts::new(10_000, Wait::Forever));

    sim.at(0, a, AppAction::Acquire);
    let (t, ev) = sim
        .run_until_event(a, 10 * MS, is_acquire_done)
        .expect("acquired");
    assert_eq!(t, 2 * MS, "one round trip");
    // valid_until = t_send + ttl - drift, drift = ttl/100 + 2 ms
    let expected_until = Clock::PERFECT.local(0) + Duration::from_millis(10_000 - 100 - 2);
    // The fence is the node's clock when the script ran (1 ms) x 1024.
    assert_eq!(
        ev,
        Event::Acquired {
            fence: 1024,
            valid_until: expected_until
        }
    );
    assert_eq!(sim.leases[a].lock.state(), State::Held);
    assert_eq!(sim.leases[a].lock.fence(), Some(1024));
    assert_eq!(scripts_sent(&sim, a), [Script::Acquire]);
    let (holder, pttl) = sim.holder(0).expect("key set");
    assert_eq!(holder, sim.token(a));
    assert!(pttl.unwrap() <= 10_000 * MS);

    sim.at(sim.now + 5 * MS, a, AppAction::Release);
    let (_, ev) = sim
        .run_until_event(a, sim.now + 100 * MS, is_released)
        .unwrap();
    assert_eq!(ev, Event::Released(Ok(())));
    assert_eq!(scripts_sent(&sim, a), [Script::Acquire, Script::Release]);
    assert_eq!(sim.holder(0), None);
    assert!(sim.run_to_quiet(sim.now + 10_000 * MS));
    assert_eq!(sim.leases[a].lock.state(), State::Done);
    sim.check_completions(a).unwrap();

    // A second release is a no-op that completes at once.
    sim.at(sim.now, a, AppAction::Release);
    sim.run_for(MS);
    assert_eq!(sim.leases[a].last_event(), Some(&Event::Released(Ok(()))));
    assert_eq!(sim.leases[a].sent.len(), 2, "nothing more sent");
}

#[test]
fn contended_try_once_fails_after_one_round_trip() {
    let mut sim = Sim::new(2, 1, Net::calm());
    let c = sim.add_client(Clock::PERFECT);
    let d = sim.add_client(Clock::PERFECT);
    let a = sim.add_lease(c, LeaseOpts::new(10_000, Wait::Forever));
    let b = sim.add_lease(d, LeaseOpts::new(10_000, Wait::TRY_ONCE));
    sim.at(0, a, AppAction::Acquire);
    sim.at(10 * MS, b, AppAction::Acquire);
    let (t, ev) = sim
        .run_until_event(b, 1_000 * MS, is_acquire_done)
        .expect("completes");
    assert_eq!(t, 12 * MS);
    assert!(
        matches!(ev, Event::AcquireFailed(Error::NotAcquired { .. })),
        "{ev:?}"
    );
    assert_eq!(scripts_sent(&sim, b), [Script::Acquire]);
    assert_eq!(sim.holder(0).unwrap().0, sim.token(a), "holder untouched");
}

#[test]
fn waiter_is_handed_the_lock_by_the_release_notification() {
    let mut sim = Sim::new(3, 1, Net::calm());
    let c = sim.add_client(Clock::PERFECT);
    let d = sim.add_client(Clock::PERFECT);
    let a = sim.add_lease(c, LeaseOpts::new(30_000, Wait::Forever));
    let b = sim.add_lease(d, LeaseOpts::new(30_000, Wait::Forever));
    sim.at(0, a, AppAction::Acquire);
    sim.at(10 * MS, b, AppAction::Acquire);
    sim.run_until(100 * MS);
    assert_eq!(sim.leases[b].lock.state(), State::Acquiring);
    assert!(sim.leases[b].subscribed, "a waiter listens for releases");

    sim.at(200 * MS, a, AppAction::Release);
    let (t, ev) = sim
        .run_until_event(b, 60_000 * MS, is_acquire_done)
        .unwrap();
    // release runs at 201 ms, the notification lands at 202 ms, then one
    // round trip (+ at most the default 5 ms jitter): far before the 30 s TTL.
    assert!(
        t <= 210 * MS,
        "woken by the notification, acquired at {t} µs"
    );
    let first = sim.leases[a].fence().unwrap();
    assert!(
        matches!(ev, Event::Acquired { fence, .. } if fence > first),
        "{ev:?}"
    );
    assert!(!sim.leases[b].subscribed, "unsubscribed once acquired");
    sim.check_mutual_exclusion().unwrap();
    sim.check_fences().unwrap();
}

#[test]
fn waiter_without_notifications_still_gets_the_lock_after_expiry() {
    let mut net = Net::calm();
    net.drop_wakeup = 1.0;
    let mut sim = Sim::new(4, 1, net);
    let c = sim.add_client(Clock::PERFECT);
    let d = sim.add_client(Clock::PERFECT);
    let a = sim.add_lease(c, LeaseOpts::new(300, Wait::Forever));
    let b = sim.add_lease(d, LeaseOpts::new(300, Wait::Forever));
    sim.at(0, a, AppAction::Acquire); // never released: it expires at 301 ms
    sim.at(10 * MS, b, AppAction::Acquire);
    let done = sim.run_until_event(b, 10_000 * MS, is_acquire_done);
    let (t, ev) = done.unwrap_or_else(|| panic!("{}\n{}", sim.describe(), sim.trace));
    let first = sim.leases[a].fence().unwrap();
    assert!(
        matches!(ev, Event::Acquired { fence, .. } if fence > first),
        "{ev:?}"
    );
    assert!(
        (301 * MS..=320 * MS).contains(&t),
        "retried at the holder's TTL, got {t} µs"
    );
    sim.check_mutual_exclusion().unwrap();
}

#[test]
fn expired_lease_gets_lock_lost_on_extend_and_release() {
    let mut sim = Sim::new(5, 1, Net::calm());
    let c = sim.add_client(Clock::PERFECT);
    let d = sim.add_client(Clock::PERFECT);
    let a = sim.add_lease(c, LeaseOpts::new(100, Wait::Forever));
    let b = sim.add_lease(d, LeaseOpts::new(10_000, Wait::Forever));
    sim.at(0, a, AppAction::Acquire);
    sim.at(150 * MS, b, AppAction::Acquire); // takes over the expired lock
    sim.at(200 * MS, a, AppAction::Extend(None));
    sim.at(300 * MS, a, AppAction::Release);
    sim.run_until(1_000 * MS);

    let ev = &sim.leases[a].events;
    assert!(
        ev.iter()
            .any(|e| matches!(e.1, Event::ExtendFailed(Error::LockLost { .. }))),
        "{ev:?}"
    );
    assert!(
        ev.iter()
            .any(|e| matches!(e.1, Event::Released(Err(Error::LockLost { .. })))),
        "{ev:?}"
    );
    assert!(sim.leases[a].lock.is_lost());
    assert_eq!(
        sim.leases[a]
            .lock
            .valid_for(sim.clients[c].clock.local(sim.now)),
        Duration::ZERO
    );
    assert_eq!(
        sim.holder(0).unwrap().0,
        sim.token(b),
        "the new holder is untouched"
    );
    sim.check_completions(a).unwrap();
    sim.check_mutual_exclusion().unwrap();
}

#[test]
fn a_paused_holder_wakes_up_to_an_expired_lease_not_to_an_overlap() {
    // A (clock 0.5% slow, the drift bound) holds 100 ms and freezes from 50 ms
    // to 400 ms (a GC pause); B takes over after the key expires. A's belief
    // ends at its validity deadline, before B's begins.
    let mut sim = Sim::new(15, 1, Net::calm());
    let c = sim.add_client(Clock {
        offset: 5_000_000,
        rate_ppm: 995_000,
    });
    let d = sim.add_client(Clock::PERFECT);
    sim.clients[c].pauses.push((50 * MS, 400 * MS));
    let a = sim.add_lease(c, LeaseOpts::new(100, Wait::Forever));
    let b = sim.add_lease(d, LeaseOpts::new(100, Wait::Forever));
    sim.at(0, a, AppAction::Acquire);
    sim.at(10 * MS, b, AppAction::Acquire);
    sim.run_until(399 * MS);
    assert!(sim.leases[b].acquired.is_some(), "B got the expired lock");
    sim.run_until(401 * MS);
    let now = sim.clients[c].clock.local(sim.now);
    assert_eq!(sim.leases[a].lock.valid_for(now), Duration::ZERO);
    assert!(sim.leases[a].events.iter().any(|e| e.1 == Event::Lost));
    let a_end = sim.windows(a).last().unwrap().1;
    let b_start = sim.windows(b)[0].0;
    assert!(
        a_end <= 100 * MS && a_end < b_start,
        "A until {a_end}, B from {b_start}"
    );
    sim.check_mutual_exclusion().unwrap();
}

#[test]
fn validity_ends_before_the_key_expires_at_the_drift_bound() {
    // Client clock 0.5% slow, server clock 0.5% fast: the worst case the
    // drift allowance (ttl/100 + 2 ms) must cover.
    let mut sim = Sim::new(17, 1, Net::calm());
    sim.nodes[0].rate_ppm = 1_005_000;
    let c = sim.add_client(Clock {
        offset: 7_000_000,
        rate_ppm: 995_000,
    });
    let a = sim.add_lease(c, LeaseOpts::new(10_000, Wait::Forever));
    sim.at(0, a, AppAction::Acquire);
    sim.run_until(2 * MS);
    let (_, remaining) = sim.holder(0).expect("held");
    let key_expires = sim.now + remaining.unwrap();
    let believed_until = sim.windows(a)[0].1;
    assert!(
        believed_until < key_expires,
        "believed until {believed_until} µs, key gone at {key_expires} µs"
    );
}

/// extend(ttl) with a SHORTER ttl whose reply is lost: the PEXPIRE did run,
/// so the key now expires early. The holder must not keep believing in its
/// old, longer validity (found by `mutual_exclusion`, Redlock, partial extend).
#[test]
fn a_lost_shortening_extend_shortens_the_holders_validity() {
    let mut sim = Sim::new(19, 1, Net::calm());
    let c = sim.add_client(Clock::PERFECT);
    let d = sim.add_client(Clock::PERFECT);
    let a = sim.add_lease(c, LeaseOpts::new(1_000, Wait::Forever));
    let b = sim.add_lease(d, LeaseOpts::new(1_000, Wait::Forever));
    sim.at(0, a, AppAction::Acquire);
    sim.run_until(100 * MS);
    sim.net.drop_reply = 1.0; // the extend runs, its reply is lost
    let short = fencelock_core::Ttl::from_millis(100).unwrap();
    sim.at(100 * MS, a, AppAction::Extend(Some(short)));
    sim.run_until(102 * MS);
    sim.net.drop_reply = 0.0;
    let (_, remaining) = sim.holder(0).unwrap();
    assert!(remaining.unwrap() <= 100 * MS, "the node shortened the key");
    sim.at(150 * MS, b, AppAction::Acquire);
    sim.run_until(600 * MS);
    assert!(
        sim.leases[b].acquired.is_some(),
        "B took the key when it expired"
    );
    sim.check_mutual_exclusion()
        .unwrap_or_else(|e| panic!("{e}\n{}", sim.describe()));
}

#[test]
fn auto_renew_keeps_the_lease_for_many_ttls() {
    let mut sim = Sim::new(6, 1, Net::calm());
    let c = sim.add_client(Clock::PERFECT);
    let mut opts = LeaseOpts::new(300, Wait::Forever);
    opts.auto_renew = true;
    let a = sim.add_lease(c, opts);
    sim.at(0, a, AppAction::Acquire);
    sim.at(3_000 * MS, a, AppAction::Release);
    sim.run_until(5_000 * MS);
    assert!(!sim.leases[a].lock.is_lost());
    assert!(!sim.leases[a].events.iter().any(|e| e.1 == Event::Lost));
    assert_eq!(sim.leases[a].last_event(), Some(&Event::Released(Ok(()))));
    let extends = scripts_sent(&sim, a)
        .iter()
        .filter(|s| **s == Script::Extend)
        .count();
    assert!(
        (28..=31).contains(&extends),
        "renewed every ttl/3: {extends} extends"
    );
    assert_eq!(sim.windows(a), [(2 * MS, 3_000 * MS)], "held without a gap");
}

#[test]
fn auto_renew_reports_lost_when_the_node_goes_away() {
    let mut sim = Sim::new(7, 1, Net::calm());
    let c = sim.add_client(Clock::PERFECT);
    let mut opts = LeaseOpts::new(300, Wait::Forever);
    opts.auto_renew = true;
    let a = sim.add_lease(c, opts);
    sim.at(0, a, AppAction::Acquire);
    sim.crash_at(500 * MS, 0, 1_000 * MS);
    sim.run_until(2_000 * MS);
    let lost = sim.leases[a]
        .events
        .iter()
        .filter(|e| e.1 == Event::Lost)
        .count();
    assert_eq!(
        lost, 1,
        "Lost reported exactly once: {:?}",
        sim.leases[a].events
    );
    assert!(sim.leases[a].lock.is_lost());
    // It was believed held at most until its last validity deadline.
    let windows = sim.windows(a);
    assert!(
        windows.last().unwrap().1 <= 500 * MS + 300 * MS,
        "{windows:?}"
    );
}

#[test]
fn redlock_acquires_with_two_of_five_nodes_down() {
    let mut sim = Sim::new(8, 5, Net::calm());
    let c = sim.add_client(Clock::PERFECT);
    let a = sim.add_lease(c, LeaseOpts::new(10_000, Wait::TRY_ONCE));
    sim.crash_at(0, 3, 60_000 * MS);
    sim.crash_at(0, 4, 60_000 * MS);
    sim.at(MS, a, AppAction::Acquire);
    let (_, ev) = sim.run_until_event(a, 1_000 * MS, is_acquire_done).unwrap();
    // The nodes' clocks agree (2 ms when the scripts ran): no write-back.
    assert!(matches!(ev, Event::Acquired { fence: 2048, .. }), "{ev:?}");
    assert!(!scripts_sent(&sim, a).contains(&Script::RaiseFence));
    for n in 0..3 {
        assert_eq!(sim.holder(n).unwrap().0, sim.token(a), "node {n}");
    }
    // Validity counts from before the first send: ttl - elapsed - drift.
    let vu = sim.leases[a].lock.valid_until().unwrap();
    assert!(vu <= Clock::PERFECT.local(MS) + Duration::from_millis(10_000 - 102));
}

#[test]
fn redlock_with_three_of_five_down_fails_and_releases_everywhere() {
    let mut sim = Sim::new(9, 5, Net::calm());
    let c = sim.add_client(Clock::PERFECT);
    let a = sim.add_lease(c, LeaseOpts::new(10_000, Wait::TRY_ONCE));
    for n in 2..5 {
        sim.crash_at(0, n, 60_000 * MS);
    }
    sim.at(MS, a, AppAction::Acquire);
    let (_, ev) = sim.run_until_event(a, 5_000 * MS, is_acquire_done).unwrap();
    assert!(
        matches!(ev, Event::AcquireFailed(Error::NotAcquired { .. })),
        "{ev:?}"
    );
    sim.run_until(30_000 * MS); // nodes 2..5 stay down until 60 s
    assert_eq!(sim.leases[a].lock.state(), State::Done);
    for n in 0..2 {
        assert_eq!(sim.holder(n), None, "node {n} released");
    }
    for n in 0..5 {
        assert!(
            sim.leases[a]
                .sent
                .iter()
                .any(|c| c.1.node == n && c.1.script == Script::Release),
            "release sent to node {n}, even the ones that did not answer"
        );
    }
}

#[test]
fn redlock_writes_the_maximum_fence_back_until_a_majority_holds_it() {
    let mut sim = Sim::new(10, 5, Net::calm());
    // Counters ahead of the clocks (left by a node whose clock ran fast).
    for (n, c) in [10, 3, 3, 7, 1].into_iter().enumerate() {
        sim.set_counter(n, AHEAD + c);
    }
    let c = sim.add_client(Clock::PERFECT);
    let a = sim.add_lease(c, LeaseOpts::new(10_000, Wait::TRY_ONCE));
    sim.at(0, a, AppAction::Acquire);
    let (_, ev) = sim.run_until_event(a, 1_000 * MS, is_acquire_done).unwrap();
    assert!(
        matches!(ev, Event::Acquired { fence, .. } if fence == AHEAD as u64 + 11),
        "{ev:?}"
    );
    let at_least = (0..5).filter(|&n| sim.counter(n) >= AHEAD + 11).count();
    assert!(
        at_least >= 3,
        "a majority holds 11 before the lease is returned"
    );
    assert!(scripts_sent(&sim, a).contains(&Script::RaiseFence));

    // The next lease, even from a majority that excludes node 0, gets more.
    sim.at(sim.now, a, AppAction::Release);
    sim.run_for(100 * MS);
    sim.crash_at(sim.now, 0, 60_000 * MS);
    sim.run_for(MS);
    let b = sim.add_lease(c, LeaseOpts::new(10_000, Wait::TRY_ONCE));
    sim.at(sim.now, b, AppAction::Acquire);
    let (_, ev) = sim
        .run_until_event(b, sim.now + 1_000 * MS, is_acquire_done)
        .unwrap();
    match ev {
        Event::Acquired { fence, .. } => assert!(fence > AHEAD as u64 + 11, "fence {fence}"),
        other => panic!("{other:?}"),
    }
}

/// Fences survive a Redlock node losing its counter. The majority
/// intersection alone cannot carry the fence here:
///
///   A acquires while n3, n4 are unreachable: its fence is on n0, n1, n2.
///   n2 crashes, loses its counter, stays down > ttl, comes back empty.
///   B acquires while n0, n1 are unreachable: n2, n3, n4 never saw A's fence.
///
/// The server clocks carry it instead: B's fence is B's acquire time x 1024,
/// later than A's (the clocks did not step back).
#[test]
fn redlock_fence_increases_when_a_node_loses_its_counter() {
    let (sim, a, b) = lose_a_counter(0);
    let (fa, fb) = (
        sim.leases[a].fence().unwrap(),
        sim.leases[b].fence().unwrap(),
    );
    assert!(fb > fa, "fence {fa} then {fb}\n{}", sim.describe());
    sim.check_fences().unwrap();
    sim.check_mutual_exclusion().unwrap();
}

/// The assumption made visible: if the server clocks B meets step back by
/// more than the time since A's fence (here 3.5 s against 3 s), B's fence
/// is smaller. Exclusion itself still holds.
#[test]
fn a_server_clock_stepping_back_further_than_the_outage_lasted_reissues_lower_fences() {
    let (sim, a, b) = lose_a_counter(-3_500 * MS as i64);
    let (fa, fb) = (
        sim.leases[a].fence().unwrap(),
        sim.leases[b].fence().unwrap(),
    );
    assert!(fb < fa, "fence {fa} then {fb}");
    sim.check_mutual_exclusion().unwrap();
}

/// The story above; `step` moves the clocks of n2..n4 once A is done.
fn lose_a_counter(step: i64) -> (Sim, usize, usize) {
    let ttl = 1_000;
    let mut sim = Sim::new(14, 5, Net::calm());
    let c = sim.add_client(Clock::PERFECT);
    let a = sim.add_lease(c, LeaseOpts::new(ttl, Wait::TRY_ONCE));
    let b = sim.add_lease(c, LeaseOpts::new(ttl, Wait::TRY_ONCE));
    sim.partition_at(0, 3, 500 * MS);
    sim.partition_at(0, 4, 500 * MS);
    sim.at(MS, a, AppAction::Acquire);
    sim.at(200 * MS, a, AppAction::Release);
    sim.crash_at(600 * MS, 2, 2 * ttl * MS); // delayed restart: down 2 ttl
    sim.run_until(700 * MS);
    for n in 2..5 {
        sim.nodes[n].time_offset = step;
    }
    sim.partition_at(3_000 * MS, 0, 500 * MS);
    sim.partition_at(3_000 * MS, 1, 500 * MS);
    sim.at(3_001 * MS, b, AppAction::Acquire);
    sim.run_until(4_000 * MS);
    assert!(sim.leases[a].fence().is_some(), "{}", sim.describe());
    assert!(
        sim.leases[b].fence().is_some(),
        "B acquires with n2, n3, n4"
    );
    (sim, a, b)
}

/// The same story with persistence (n2 restarts WITH its counter): B's
/// majority meets n2 at A's fence even with counters far ahead of the
/// clocks.
#[test]
fn redlock_fence_increases_when_a_restarted_node_kept_its_counter() {
    let ttl = 1_000;
    let mut sim = Sim::new(14, 5, Net::calm());
    for n in 0..3 {
        sim.set_counter(n, AHEAD + 10);
    }
    let c = sim.add_client(Clock::PERFECT);
    let a = sim.add_lease(c, LeaseOpts::new(ttl, Wait::TRY_ONCE));
    let b = sim.add_lease(c, LeaseOpts::new(ttl, Wait::TRY_ONCE));
    sim.partition_at(0, 3, 500 * MS);
    sim.partition_at(0, 4, 500 * MS);
    sim.at(MS, a, AppAction::Acquire);
    sim.at(200 * MS, a, AppAction::Release);
    sim.partition_at(600 * MS, 2, 2 * ttl * MS); // down and back with its data
    sim.partition_at(3_000 * MS, 0, 500 * MS);
    sim.partition_at(3_000 * MS, 1, 500 * MS);
    sim.at(3_001 * MS, b, AppAction::Acquire);
    sim.run_until(4_000 * MS);
    assert_eq!(sim.leases[a].fence(), Some(AHEAD as u64 + 11));
    let fb = sim.leases[b].fence().expect("B acquires with n2, n3, n4");
    assert!(fb > AHEAD as u64 + 11, "fence {fb}");
}

#[test]
fn redlock_waiters_do_not_wake_each_other_into_a_busy_loop() {
    let mut net = Net::calm();
    net.delay = (200, 900);
    let mut sim = Sim::new(16, 5, net);
    let h = sim.add_client(Clock::PERFECT);
    let holder = sim.add_lease(h, LeaseOpts::new(1_000, Wait::Forever));
    sim.partition_at(0, 1, 50 * MS);
    sim.partition_at(0, 2, 50 * MS);
    sim.at(MS, holder, AppAction::Acquire);
    sim.at(500 * MS, holder, AppAction::Release);
    let mut waiters = Vec::new();
    for _ in 0..2 {
        let c = sim.add_client(Clock::PERFECT);
        let w = sim.add_lease(c, LeaseOpts::new(1_000, Wait::Forever));
        sim.at(100 * MS, w, AppAction::Acquire);
        waiters.push(w);
    }
    sim.run_until(500 * MS);
    assert!(sim.leases[holder].acquired.is_some());
    let attempts: usize = waiters
        .iter()
        .map(|&w| {
            let sent = &sim.leases[w].sent;
            sent.iter()
                .filter(|c| c.1.script == Script::Acquire)
                .count()
                / 5
        })
        .sum();
    let counter = (0..5).map(|n| sim.counter(n)).max().unwrap();
    assert!(
        attempts <= 20,
        "{attempts} attempts by 2 waiters in 400 ms while the lock was held; counters reached {counter}"
    );
}

/// With Redlock, validity is ttl - elapsed - (ttl/100 + 2 ms): a 3 ms ttl
/// over a 2 ms round trip is never valid. Waiting forever must not mean
/// hammering the nodes: the attempts back off. (A ttl below 3 ms is refused
/// before anything is sent: see `ttl.rs`.)
#[test]
fn redlock_ttl_shorter_than_a_round_trip_backs_off() {
    assert!(fencelock_core::Ttl::from_millis(2).is_err());
    let mut sim = Sim::new(18, 3, Net::calm());
    let c = sim.add_client(Clock::PERFECT);
    let a = sim.add_lease(c, LeaseOpts::new(3, Wait::Forever));
    sim.at(0, a, AppAction::Acquire);
    sim.run_until(1_000 * MS);
    let l = &sim.leases[a];
    let refused = l.calls[0].2.is_err();
    let failed = l
        .events
        .iter()
        .any(|e| matches!(e.1, Event::AcquireFailed(_)));
    let attempts = l
        .sent
        .iter()
        .filter(|c| c.1.script == Script::Acquire)
        .count()
        / 3;
    assert!(
        !refused && !failed && (2..=12).contains(&attempts),
        "refused: {refused}, failed: {failed}, {attempts} attempts in 1 s"
    );
}

#[test]
fn redlock_skips_the_write_back_when_a_majority_agrees() {
    let mut sim = Sim::new(11, 5, Net::calm());
    for (n, c) in [5, 5, 5, 0, 2].into_iter().enumerate() {
        sim.set_counter(n, AHEAD + c);
    }
    let c = sim.add_client(Clock::PERFECT);
    let a = sim.add_lease(c, LeaseOpts::new(10_000, Wait::TRY_ONCE));
    sim.at(0, a, AppAction::Acquire);
    let (t, ev) = sim.run_until_event(a, 1_000 * MS, is_acquire_done).unwrap();
    assert!(
        matches!(ev, Event::Acquired { fence, .. } if fence == AHEAD as u64 + 6),
        "{ev:?}"
    );
    assert_eq!(t, 2 * MS, "one round trip");
    assert!(!scripts_sent(&sim, a).contains(&Script::RaiseFence));
}

#[test]
fn cancelled_acquire_in_flight_leaves_nothing_held() {
    // The acquire runs on the node but its reply is lost; the caller cancels.
    let mut net = Net::calm();
    net.drop_reply = 1.0;
    net.timeout = 50 * MS;
    let mut sim = Sim::new(12, 1, net);
    let c = sim.add_client(Clock::PERFECT);
    let a = sim.add_lease(c, LeaseOpts::new(10_000, Wait::Forever));
    sim.at(0, a, AppAction::Acquire);
    sim.run_until(MS + MS / 2);
    assert_eq!(
        sim.holder(0).unwrap().0,
        sim.token(a),
        "the acquire did run"
    );
    sim.net.drop_reply = 0.0; // the compensating release gets through
    sim.at(MS + MS / 2, a, AppAction::Cancel); // after it ran, before any reply
    assert!(sim.run_to_quiet(60_000 * MS));
    assert_eq!(sim.leases[a].lock.state(), State::Done);
    assert_eq!(sim.holder(0), None, "compensating release ran");
    assert!(scripts_sent(&sim, a).contains(&Script::Release));
}

#[test]
fn cancelled_waiter_stops_listening_and_sends_nothing_more() {
    let mut sim = Sim::new(13, 1, Net::calm());
    let c = sim.add_client(Clock::PERFECT);
    let d = sim.add_client(Clock::PERFECT);
    let a = sim.add_lease(c, LeaseOpts::new(10_000, Wait::Forever));
    let b = sim.add_lease(d, LeaseOpts::new(10_000, Wait::Forever));
    sim.at(0, a, AppAction::Acquire);
    sim.at(10 * MS, b, AppAction::Acquire);
    sim.at(100 * MS, b, AppAction::Cancel);
    sim.run_until(200 * MS);
    assert_eq!(sim.leases[b].lock.state(), State::Done);
    assert!(!sim.leases[b].subscribed);
    let sent = sim.leases[b].sent.len();
    sim.at(300 * MS, a, AppAction::Release);
    sim.run_until(20_000 * MS);
    assert_eq!(sim.leases[b].sent.len(), sent);
    assert!(sim.leases[b].acquired.is_none());
}

// ---------------------------------------------------------------------------
// Handoff: a release hands the lock to the next waiter of the same client
// (the driver's local line) in the same round trip.

/// Client 0 with a local line, leases `a` (acquires at 0) and `b` (lines up
/// at 10 ms behind it); `a` releases at `release_at` ms.
fn handoff_world(seed: u64, nodes: usize, ttl_ms: u64, release_at: u64) -> (Sim, usize, usize) {
    let mut sim = Sim::new(seed, nodes, Net::calm());
    let c = sim.add_client(Clock::PERFECT);
    sim.local_line(c);
    let a = sim.add_lease(c, LeaseOpts::new(ttl_ms, Wait::Forever));
    let mut opts = LeaseOpts::new(ttl_ms, Wait::Forever);
    opts.plan.hold = Some(ttl_ms * MS / 2);
    let b = sim.add_lease(c, opts);
    sim.at(0, a, AppAction::Acquire);
    sim.at(10 * MS, b, AppAction::Acquire);
    sim.at(release_at * MS, a, AppAction::Release);
    (sim, a, b)
}

/// A lease of another client that only listens (its wake-ups are ignored):
/// what `PUBSUB NUMSUB` counts on the nodes it is added to.
fn listener(sim: &mut Sim) -> usize {
    let c = sim.add_client(Clock::PERFECT);
    sim.add_lease(c, LeaseOpts::new(10_000, Wait::Forever))
}

fn executed(sim: &Sim, node: usize) -> Vec<Script> {
    sim.nodes[node].executed.clone()
}

#[test]
fn a_local_waiter_is_handed_the_lock_in_the_release_round_trip() {
    let (mut sim, a, b) = handoff_world(20, 1, 10_000, 100);
    sim.run_until(50 * MS);
    assert!(sim.leases[b].sent.is_empty(), "in line: nothing sent");
    let (t, ev) = sim.run_until_event(b, 1_000 * MS, is_acquire_done).unwrap();
    assert_eq!(t, 102 * MS, "one round trip from the release");
    let first = sim.leases[a].fence().unwrap();
    let Event::Acquired { fence, valid_until } = ev else {
        panic!("{ev:?}")
    };
    // The next fence exactly as an acquire issues it: stored + 1 within the
    // same ms of server time, else the server clock (101 ms) x 1024.
    assert_eq!(fence, 101 * 1024);
    assert!(fence > first);
    // Valid from the release's send: ttl - drift (100 + 2 ms) after 100 ms.
    let expected = Clock::PERFECT.local(100 * MS) + Duration::from_millis(10_000 - 102);
    assert_eq!(valid_until, expected);
    assert_eq!(executed(&sim, 0), [Script::Acquire, Script::Handoff]);
    assert!(sim.leases[b].sent.is_empty(), "the waiter sent no acquire");
    assert_eq!(sim.leases[a].last_event(), Some(&Event::Released(Ok(()))));
    assert_eq!(sim.holder(0).unwrap().0, sim.token(b));
    assert!(sim.leases[b].handed_over());
    // And from there on it is a lease like any other.
    sim.at(sim.now + MS, b, AppAction::Release);
    assert!(sim.run_to_quiet(60_000 * MS));
    assert_eq!(sim.holder(0), None);
    assert_eq!(scripts_sent(&sim, b), [Script::Release]);
    for l in [a, b] {
        sim.check_completions(l).unwrap();
    }
    sim.check_mutual_exclusion().unwrap();
    sim.check_fences().unwrap();
}

#[test]
fn a_handoff_that_finds_the_lease_expired_is_lock_lost_and_the_waiter_attempts() {
    // a's key expires at 300 ms; it releases (with the handoff) at 400 ms.
    let (mut sim, a, b) = handoff_world(21, 1, 300, 400);
    let (_, ev) = sim.run_until_event(b, 2_000 * MS, is_acquire_done).unwrap();
    assert!(matches!(ev, Event::Acquired { .. }), "{ev:?}");
    assert!(sim.run_to_quiet(60_000 * MS));
    assert!(matches!(
        sim.leases[a].last_event(),
        Some(Event::Released(Err(Error::LockLost { .. })))
    ));
    // Lost at its validity end: the turn passed then, before the release.
    assert_eq!(scripts_sent(&sim, a), [Script::Acquire, Script::Release]);
    // It tried on its own while a's key was still there: held, retried.
    assert_eq!(scripts_sent(&sim, b)[0], Script::Acquire);
    assert!(!sim.leases[b].handed_over());
    sim.check_mutual_exclusion().unwrap();
    sim.check_fences().unwrap();
}

#[test]
fn a_handoff_that_finds_the_lock_taken_over_is_lock_lost_and_the_waiter_attempts() {
    let (mut sim, a, b) = handoff_world(22, 1, 10_000, 100);
    // Someone else's key in its place (a force-release and a new holder).
    sim.run_until(50 * MS);
    let lock = sim.keys.lock();
    sim.nodes[0].set(&lock, b"intruder", Some(sim.now + 300 * MS));
    let (t, ev) = sim.run_until_event(b, 2_000 * MS, is_acquire_done).unwrap();
    assert!(matches!(ev, Event::Acquired { .. }), "{ev:?}");
    assert!(t >= 350 * MS, "only once the intruder's key expired: {t}");
    assert!(matches!(
        sim.leases[a].last_event(),
        Some(Event::Released(Err(Error::LockLost { .. })))
    ));
    assert_eq!(scripts_sent(&sim, a), [Script::Acquire, Script::Handoff]);
    assert_eq!(
        scripts_sent(&sim, b)[0],
        Script::Acquire,
        "a normal attempt"
    );
    assert!(!sim.leases[b].handed_over());
}

#[test]
fn a_waiter_cancelled_while_the_handoff_is_in_flight_gives_it_back_at_once() {
    let (mut sim, a, b) = handoff_world(23, 1, 10_000, 100);
    // The handoff runs at 101 ms; its reply lands at 102 ms.
    sim.at(101 * MS + MS / 2, b, AppAction::Cancel);
    sim.run_until(101 * MS + MS / 2);
    assert_eq!(sim.holder(0).unwrap().0, sim.token(b), "handed over");
    assert!(sim.run_to_quiet(60_000 * MS));
    assert_eq!(sim.holder(0), None, "the waiter's compensating release ran");
    // Given back as soon as the reply came: one round trip later.
    let (t, release) = sim.leases[b].sent[0].clone();
    assert_eq!((t, release.script), (102 * MS, Script::Release));
    assert_eq!(release.keys.len(), 2, "waking waiters: the lock was held");
    assert!(sim.leases[b].acquired.is_none());
    assert_eq!(sim.leases[b].lock.state(), State::Done);
    assert_eq!(sim.leases[a].last_event(), Some(&Event::Released(Ok(()))));
    for l in [a, b] {
        sim.check_completions(l).unwrap();
    }
}

#[test]
fn a_waiter_cancelled_before_the_release_leaves_the_line_and_nothing_is_handed_over() {
    let (mut sim, a, b) = handoff_world(24, 1, 10_000, 100);
    sim.at(50 * MS, b, AppAction::Cancel);
    assert!(sim.run_to_quiet(60_000 * MS));
    assert_eq!(scripts_sent(&sim, a), [Script::Acquire, Script::Release]);
    assert!(sim.leases[b].sent.is_empty());
    assert_eq!(sim.leases[b].lock.state(), State::Done);
    assert_eq!(sim.holder(0), None);
}

#[test]
fn an_unknown_handoff_reply_is_given_back_by_the_waiter_which_then_attempts() {
    let (mut sim, a, b) = handoff_world(25, 1, 10_000, 100);
    sim.run_until(100 * MS);
    sim.net.drop_reply = 1.0; // the handoff runs, its reply is lost
    sim.run_until(101 * MS + MS / 2);
    sim.net.drop_reply = 0.0;
    assert_eq!(sim.holder(0).unwrap().0, sim.token(b), "it did run");
    let (t, ev) = sim.run_until_event(b, 2_000 * MS, is_acquire_done).unwrap();
    // The releaser's timeout (100 ms) says Unknown: the release reports a
    // Redis error, the waiter releases what it may hold, then attempts.
    assert!(t >= 200 * MS, "{t}");
    assert!(matches!(
        sim.leases[a].last_event(),
        Some(Event::Released(Err(Error::Redis { .. })))
    ));
    assert_eq!(scripts_sent(&sim, b), [Script::Release, Script::Acquire]);
    let first = sim.leases[a].fence().unwrap();
    assert!(
        matches!(ev, Event::Acquired { fence, .. } if fence > first),
        "{ev:?}"
    );
    assert!(sim.run_to_quiet(60_000 * MS));
    sim.check_mutual_exclusion().unwrap();
    sim.check_fences().unwrap();
}

#[test]
fn redlock_handoff_by_a_majority_grants_and_where_another_client_listens_it_releases() {
    let (mut sim, _, b) = handoff_world(26, 3, 10_000, 100);
    // A waiter of another client listens on node 2 only.
    sim.run_until(50 * MS);
    let listener = listener(&mut sim);
    sim.nodes[2].subscribers.insert(listener);
    let (_, ev) = sim.run_until_event(b, 2_000 * MS, is_acquire_done).unwrap();
    assert!(matches!(ev, Event::Acquired { .. }), "{ev:?}");
    assert!(sim.leases[b].handed_over());
    assert!(
        sim.leases[b].sent.is_empty(),
        "2 of 3 handed over: no attempt"
    );
    assert_eq!(sim.holder(0).unwrap().0, sim.token(b));
    assert_eq!(sim.holder(1).unwrap().0, sim.token(b));
    assert_eq!(sim.holder(2), None, "released there, and published");
    sim.check_mutual_exclusion().unwrap();
    sim.check_fences().unwrap();
}

#[test]
fn redlock_handoff_by_a_minority_is_given_back_and_the_waiter_attempts() {
    let (mut sim, a, b) = handoff_world(27, 5, 10_000, 100);
    sim.run_until(50 * MS);
    let listener = listener(&mut sim);
    for n in 2..5 {
        sim.nodes[n].subscribers.insert(listener);
    }
    let (_, ev) = sim.run_until_event(b, 2_000 * MS, is_acquire_done).unwrap();
    let first = sim.leases[a].fence().unwrap();
    assert!(
        matches!(ev, Event::Acquired { fence, .. } if fence > first),
        "{ev:?}"
    );
    assert!(!sim.leases[b].handed_over());
    let sent: Vec<(Script, usize)> = sim.leases[b]
        .sent
        .iter()
        .map(|(_, c)| (c.script, c.node))
        .collect();
    assert_eq!(
        &sent[..2],
        [(Script::Release, 0), (Script::Release, 1)],
        "the two handed over are given back first"
    );
    assert!(sent[2..].iter().all(|s| s.0 == Script::Acquire));
    for n in 0..5 {
        assert_eq!(sim.holder(n).unwrap().0, sim.token(b), "node {n}");
    }
    sim.check_mutual_exclusion().unwrap();
    sim.check_fences().unwrap();
}

#[test]
fn a_waiter_of_another_client_stops_the_handoffs_and_gets_its_turn() {
    // Client 0 runs 20 leases in its local line, each held 5 ms; a lease of
    // client 1 starts waiting at 30 ms.
    let mut net = Net::calm();
    net.delay = (200, 2 * MS);
    let mut sim = Sim::new(28, 1, net);
    let c = sim.add_client(Clock::PERFECT);
    sim.local_line(c);
    let d = sim.add_client(Clock::PERFECT);
    let local: Vec<usize> = (0..20)
        .map(|i| {
            let mut opts = LeaseOpts::new(10_000, Wait::Forever);
            opts.plan.hold = Some(5 * MS);
            let l = sim.add_lease(c, opts);
            sim.at(i * 100, l, AppAction::Acquire);
            l
        })
        .collect();
    let mut opts = LeaseOpts::new(10_000, Wait::Forever);
    opts.plan.hold = Some(5 * MS);
    let other = sim.add_lease(d, opts);
    sim.at(30 * MS, other, AppAction::Acquire);
    assert!(sim.run_to_quiet(60_000 * MS));
    let (got, _) = sim.leases[other]
        .acquired
        .expect("the other client's waiter got it");
    let subscribed = sim.leases[other]
        .events
        .iter()
        .find(|e| e.1 == Event::Subscribe)
        .unwrap()
        .0;
    // Handoffs while nobody else waited; none once it listened.
    assert!(local[1..].iter().any(|&l| sim.leases[l].handed_over()));
    for &l in &local {
        if let Some((at, _)) = sim.leases[l].acquired {
            if at > subscribed + 5 * MS && at < got {
                assert!(!sim.leases[l].handed_over(), "L{l} handed over at {at}");
            }
        }
    }
    let last = sim.leases[*local.last().unwrap()].acquired.unwrap().0;
    assert!(
        got < last,
        "before client 0 ran out of work ({got} vs {last})"
    );
    sim.check_mutual_exclusion().unwrap();
    sim.check_fences().unwrap();
}

// ---------------------------------------------------------------------------
// The simulator's own parts, so a failure above is the core's, not the fake's.

mod fake_redis {
    use super::sim::{Clock, Node, Rng, MS};
    use fencelock_core::{
        Command, CommandId, Instant, KeySpace, Kind, LockName, Permits, Reply, Script,
    };

    fn cmd(script: Script, args: &[&str]) -> Command {
        let keys = KeySpace::default().keys(&LockName::new("x").unwrap());
        let keys = match script {
            Script::Acquire | Script::Extend | Script::Reclaim | Script::Inspect => {
                vec![keys.lock(), keys.fence()]
            }
            Script::Release => vec![keys.lock(), keys.channel()],
            Script::RaiseFence => vec![keys.fence()],
            Script::ForceRelease | Script::Handoff => {
                vec![keys.lock(), keys.fence(), keys.channel()]
            }
            Script::FencedSet => vec![b"data".into()],
            _ => return set_cmd(script, args),
        };
        Command {
            id: CommandId(0),
            node: 0,
            script,
            keys,
            args: args.iter().map(|a| (*a).into()).collect(),
            wait_replicas: None,
        }
    }
    /// A sorted-set script over the semaphore "x" of 2 permits (a read
    /// acquire over the read-write lock "x").
    fn set_cmd(script: Script, args: &[&str]) -> Command {
        let name = LockName::new("x").unwrap();
        let kind = match script {
            Script::ReadAcquire => Kind::Read,
            _ => Kind::Semaphore(Permits::new(2).unwrap()),
        };
        let k = KeySpace::default().keys_for(&name, kind);
        let line = k.line().clone().unwrap();
        let keys = match script {
            Script::FairAcquire => vec![k.lock(), line.waiting, line.until, k.fence()],
            Script::ReadAcquire => {
                vec![
                    k.lock(),
                    line.waiting,
                    line.until,
                    k.fence(),
                    k.other().unwrap(),
                ]
            }
            Script::HoldersExtend | Script::HoldersReclaim | Script::HoldersInspect => {
                vec![k.lock(), k.fence()]
            }
            Script::HoldersRelease => vec![k.lock(), line.waiting, line.until, k.channel()],
            other => unreachable!("{other:?}"),
        };
        Command {
            id: CommandId(0),
            node: 0,
            script,
            keys,
            args: args.iter().map(|a| (*a).into()).collect(),
            wait_replicas: None,
        }
    }

    /// fair_acquire.lua, holders_*.lua: what the redis-server runs
    /// (checked by the driver's tests), in the simulator's terms.
    #[test]
    fn a_semaphore_grants_permits_in_arrival_order() {
        let mut n = Node::default();
        let acquire = |t: &str| set_cmd(Script::FairAcquire, &[t, "100", "150", "2", "300"]);
        assert_eq!(n.exec(0, &acquire("a")).0, granted(1));
        assert_eq!(n.exec(MS, &acquire("b")).0, granted(1024));
        // Both permits taken: c and d line up; the hint is a's expiry.
        assert_eq!(n.exec(2 * MS, &acquire("c")).0, held(98));
        assert_eq!(n.exec(3 * MS, &acquire("d")).0, held(97));
        let semaphore = KeySpace::default().keys_for(
            &LockName::new("x").unwrap(),
            Kind::Semaphore(Permits::new(2).unwrap()),
        );
        let waiting = semaphore.line().clone().unwrap().waiting;
        assert_eq!(n.line(&waiting), [b"c".to_vec(), b"d".to_vec()]);
        // a leaves: the freed permit is c's, not d's (d stays behind c).
        let release = |t: &str| set_cmd(Script::HoldersRelease, &[t]);
        let (reply, woke) = n.exec(4 * MS, &release("a"));
        assert_eq!((reply, woke.is_some()), (Reply::Int(1), true));
        assert!(
            matches!(n.exec(5 * MS, &acquire("d")).0, Reply::Array(r) if r[0] == Reply::Int(0))
        );
        assert_eq!(n.exec(6 * MS, &acquire("c")).0, granted(6 * 1024));
        // Extend b's permit; a stranger's extend or release is a no.
        let extend = |t: &str| set_cmd(Script::HoldersExtend, &[t, "100", "150"]);
        assert_eq!(n.exec(7 * MS, &extend("b")).0, Reply::Int(1));
        assert_eq!(n.exec(7 * MS, &extend("z")).0, Reply::Int(0));
        assert_eq!(n.exec(7 * MS, &release("z")).0, Reply::Int(0));
        // d never tries again: its place expires (300 ms), and c's permit
        // (granted at 6 ms for 100 ms) too; e gets it with nobody ahead.
        assert_eq!(
            n.holders(&semaphore.lock(), 200 * MS),
            Vec::<Vec<u8>>::new()
        );
        assert_eq!(n.exec(400 * MS, &acquire("e")).0, granted(400 * 1024));
        assert_eq!(n.line(&waiting), Vec::<Vec<u8>>::new());
        // A try-once (patience 0) looks without standing in line.
        let look = set_cmd(Script::FairAcquire, &["f", "100", "150", "1", "0"]);
        assert!(matches!(n.exec(401 * MS, &look).0, Reply::Array(r) if r[0] == Reply::Int(0)));
        assert_eq!(n.line(&waiting), Vec::<Vec<u8>>::new());
        // Reclaim: back while a permit is free, not beyond the limit.
        let reclaim =
            |t: &str, limit: &str| set_cmd(Script::HoldersReclaim, &[t, "100", "5", "150", limit]);
        assert_eq!(n.exec(402 * MS, &reclaim("g", "2")).0, Reply::Int(1));
        assert_eq!(n.exec(402 * MS, &reclaim("h", "2")).0, Reply::Int(0));
    }

    fn granted(fence: u64) -> Reply {
        Reply::Array(vec![Reply::Int(1), Reply::Bulk(fence.to_string().into())])
    }
    fn held(pttl: i64) -> Reply {
        Reply::Array(vec![Reply::Int(0), Reply::Int(pttl)])
    }
    fn fence_key() -> Vec<u8> {
        KeySpace::default()
            .keys(&LockName::new("x").unwrap())
            .fence()
            .to_vec()
    }

    #[test]
    fn acquire_is_set_nx_px_plus_a_clock_fence() {
        let mut n = Node::default();
        // At TIME 0 the stored value (none: 0) + 1 wins.
        assert_eq!(
            n.exec(0, &cmd(Script::Acquire, &["a", "100", "150"])).0,
            granted(1)
        );
        assert_eq!(
            n.exec(30 * MS, &cmd(Script::Acquire, &["b", "100", "150"]))
                .0,
            held(70)
        );
        // our own leftover key is ours to take again (new TTL, new fence):
        // the server clock (30 ms * 1024) is above the stored 1.
        let again = n.exec(30 * MS, &cmd(Script::Acquire, &["a", "100", "150"]));
        assert_eq!(again.0, granted(30 * 1024));
        // Within one millisecond the stored value + 1 wins.
        let again = n.exec(30 * MS + 500, &cmd(Script::Acquire, &["a", "100", "150"]));
        assert_eq!(again.0, granted(30 * 1024 + 1));
        let held_reply = n.exec(50 * MS, &cmd(Script::Acquire, &["b", "100", "150"]));
        assert_eq!(held_reply.0, held(80));
        // expiry frees the key; the fence key lives ttl + grace (150 ms)
        let after = n.exec(131 * MS, &cmd(Script::Acquire, &["b", "100", "150"]));
        assert_eq!(after.0, granted(131 * 1024));
        assert!(n.get(&fence_key(), 131 * MS + 149 * MS).is_some());
        assert!(n.get(&fence_key(), 131 * MS + 150 * MS).is_none());
        assert_eq!(
            n.exec(0, &cmd(Script::Acquire, &["b", "0", "1"])).0.clone(),
            { Reply::Error("ERR invalid expire time in 'set' command".into()) }
        );
    }

    #[test]
    fn force_release_removes_any_holder_and_advances_the_fence() {
        let mut n = Node::default();
        assert_eq!(
            n.exec(0, &cmd(Script::Acquire, &["a", "100", "150"])).0,
            granted(1)
        );
        // Within the same millisecond: stored + 1; the holder is gone and
        // waiters are woken (the channel is returned for publishing).
        let (reply, woken) = n.exec(500, &cmd(Script::ForceRelease, &["50"]));
        assert_eq!(reply, granted(2));
        assert!(woken.is_some());
        // The next holder's fence is above the forced one.
        assert_eq!(
            n.exec(600, &cmd(Script::Acquire, &["b", "100", "150"])).0,
            granted(3)
        );
        // A free lock: nothing removed, nobody woken, the fence still moves
        // on (the server clock wins now), its key kept for the grace.
        n.exec(700, &cmd(Script::Release, &["b"]));
        let (reply, woken) = n.exec(10 * MS, &cmd(Script::ForceRelease, &["50"]));
        assert_eq!(
            reply,
            Reply::Array(vec![
                Reply::Int(0),
                Reply::Bulk((10 * 1024).to_string().into())
            ])
        );
        assert!(woken.is_none());
        assert!(n.get(&fence_key(), 59 * MS).is_some());
        assert!(n.get(&fence_key(), 60 * MS).is_none());
    }

    #[test]
    fn fences_follow_the_server_clock_across_a_wipe_unless_it_steps_back() {
        let mut n = Node::default();
        n.time_offset = 1_000 * MS as i64;
        assert_eq!(
            n.exec(0, &cmd(Script::Acquire, &["a", "10", "10"])).0,
            granted(1000 * 1024)
        );
        n.wipe();
        assert_eq!(
            n.exec(MS, &cmd(Script::Acquire, &["b", "10", "10"])).0,
            granted(1001 * 1024)
        );
        n.wipe();
        n.time_offset = 0; // stepped back by a second
        assert_eq!(
            n.exec(2 * MS, &cmd(Script::Acquire, &["c", "10", "10"])).0,
            granted(2 * 1024)
        );
    }

    #[test]
    fn release_and_extend_compare_the_token() {
        let mut n = Node::default();
        n.exec(0, &cmd(Script::Acquire, &["a", "100", "100"]));
        assert_eq!(n.exec(MS, &cmd(Script::Release, &["b"])).0, Reply::Int(0));
        assert_eq!(
            n.exec(MS, &cmd(Script::Extend, &["b", "500", "600"])).0,
            Reply::Int(0)
        );
        assert_eq!(
            n.exec(90 * MS, &cmd(Script::Extend, &["a", "500", "600"]))
                .0,
            Reply::Int(1)
        );
        // the extend pushed the fence key too
        assert_eq!(n.get(&fence_key(), 90 * MS).unwrap().1, Some(600 * MS));
        assert_eq!(
            n.exec(500 * MS, &cmd(Script::Acquire, &["b", "100", "100"]))
                .0,
            held(90)
        );
        let (r, published) = n.exec(500 * MS, &cmd(Script::Release, &["a"]));
        assert_eq!(r, Reply::Int(1));
        assert!(published.is_some());
        // without the channel key: released, nobody woken
        n.exec(600 * MS, &cmd(Script::Acquire, &["a", "100", "100"]));
        let mut quiet = cmd(Script::Release, &["a"]);
        quiet.keys.truncate(1);
        assert_eq!(n.exec(601 * MS, &quiet), (Reply::Int(1), None));
        assert_eq!(
            n.exec(500 * MS, &cmd(Script::Release, &["a"])).0,
            Reply::Int(0)
        );
        assert_eq!(
            n.exec(501 * MS, &cmd(Script::Extend, &["a", "500", "600"]))
                .0,
            Reply::Int(0)
        );
        // an ACL without channel rights: released, not published
        n.refuse_publish = true;
        n.exec(700 * MS, &cmd(Script::Acquire, &["a", "100", "100"]));
        assert_eq!(
            n.exec(701 * MS, &cmd(Script::Release, &["a"])),
            (Reply::Int(2), None)
        );
    }

    #[test]
    fn handoff_passes_the_lock_with_the_next_fence_only_while_nobody_listens() {
        let mut n = Node::default();
        let lock_key = KeySpace::default()
            .keys(&LockName::new("x").unwrap())
            .lock();
        let handoff = |from: &str, to: &str| cmd(Script::Handoff, &[from, to, "100", "150"]);
        n.exec(0, &cmd(Script::Acquire, &["a", "100", "150"]));
        // Ours: the waiter's token with its ttl, the next fence, no wake-up.
        assert_eq!(n.exec(500, &handoff("a", "b")), (granted(2), None));
        assert_eq!(
            n.get(&lock_key, 500).unwrap(),
            (b"b".to_vec(), Some(100 * MS))
        );
        assert_eq!(n.get(&fence_key(), 500).unwrap().1, Some(150 * MS));
        // Not ours: nothing changes, the holder's PTTL comes back.
        assert_eq!(n.exec(10 * MS, &handoff("a", "c")), (held(90), None));
        // Someone listens (another client's waiter): released and published.
        n.subscribers.insert(7);
        let (reply, woken) = n.exec(20 * MS, &handoff("b", "c"));
        assert_eq!(reply, Reply::Array(vec![Reply::Int(2), Reply::Int(1)]));
        assert!(woken.is_some());
        assert!(n.get(&lock_key, 20 * MS).is_none());
        // ... and with the PUBLISH refused by the ACL.
        n.refuse_publish = true;
        n.exec(30 * MS, &cmd(Script::Acquire, &["c", "100", "150"]));
        let (reply, woken) = n.exec(31 * MS, &handoff("c", "d"));
        assert_eq!(reply, Reply::Array(vec![Reply::Int(2), Reply::Int(0)]));
        assert!(woken.is_none());
        // A free lock is not ours either.
        assert_eq!(n.exec(32 * MS, &handoff("c", "d")).0, held(-2));
    }

    #[test]
    fn raise_fence_is_set_if_greater() {
        let mut n = Node::default();
        let bulk = |v: &str| Reply::Bulk(v.into());
        assert_eq!(
            n.exec(0, &cmd(Script::RaiseFence, &["7", "100"])).0,
            bulk("7")
        );
        assert_eq!(
            n.exec(0, &cmd(Script::RaiseFence, &["3", "100"])).0,
            bulk("7")
        );
        assert_eq!(
            n.exec(0, &cmd(Script::Acquire, &["a", "10", "10"])).0,
            granted(8)
        );
        let big = "18446744073709551614";
        assert_eq!(
            n.exec(0, &cmd(Script::RaiseFence, &[big, "100"])).0,
            bulk(big)
        );
    }

    #[test]
    fn reclaim_puts_our_key_back_only_where_it_is_absent() {
        let mut n = Node::default();
        let reclaim = |token: &str| cmd(Script::Reclaim, &[token, "100", "5000", "200"]);
        assert_eq!(n.exec(0, &reclaim("a")).0, Reply::Int(1));
        assert_eq!(n.get(&fence_key(), 0).unwrap().0, b"5000");
        assert_eq!(n.exec(MS, &reclaim("a")).0, Reply::Int(1));
        assert_eq!(n.exec(MS, &reclaim("b")).0, Reply::Int(0));
    }

    #[test]
    fn clocks_convert_both_ways_and_round_safely() {
        for rate in [995_000, 1_000_000, 1_005_000] {
            let c = Clock {
                offset: 777,
                rate_ppm: rate,
            };
            for g in [0, 1, 999, 123_456_789] {
                let l = c.local(g);
                assert!(c.global(l) <= g, "first instant showing l is not after g");
                assert!(c.local(c.global(l)) >= l);
            }
            let l = Instant::from_epoch(std::time::Duration::from_nanos(10_000_777_123));
            let g = c.global(l);
            assert!(c.local(g) >= l && (g == 0 || c.local(g - 1) < l));
        }
    }

    #[test]
    fn rng_is_deterministic_and_spread() {
        let (mut a, mut b) = (Rng::new(42), Rng::new(42));
        let xs: Vec<u64> = (0..100).map(|_| a.range(0, 9)).collect();
        let ys: Vec<u64> = (0..100).map(|_| b.range(0, 9)).collect();
        assert_eq!(xs, ys);
        assert!((0..10).all(|d| xs.contains(&d)));
    }
}

/// A rolling restart: each of 3 nodes goes down in turn for more than the
/// TTL and comes back empty. Renewals put our key back on the restarted
/// node while the other two still hold it, so at no point does the lease
/// fall below a majority.
#[test]
fn rolling_restart_keeps_an_auto_renewed_redlock_lease() {
    let mut sim = Sim::new(21, 3, Net::calm());
    let c = sim.add_client(Clock::PERFECT);
    let mut opts = LeaseOpts::new(300, Wait::TRY_ONCE);
    opts.auto_renew = true;
    let a = sim.add_lease(c, opts);
    sim.at(0, a, AppAction::Acquire);
    for n in 0..3u64 {
        sim.crash_at((200 + 1_300 * n) * MS, n as usize, 1_000 * MS);
    }
    sim.run_until(4_500 * MS);
    let l = &sim.leases[a];
    assert!(l.acquired.is_some(), "{}", sim.describe());
    assert!(
        !l.events.iter().any(|e| matches!(e.1, Event::Lost)),
        "{}",
        sim.describe()
    );
    assert!(!l.lock.is_lost());
    assert!(
        l.sent
            .iter()
            .filter(|c| c.1.script == Script::Reclaim)
            .count()
            >= 3,
        "each restarted node got the key back"
    );
    for n in 0..3 {
        assert_eq!(sim.holder(n).unwrap().0, sim.token(a), "node {n}");
    }
}

/// The acquire won on two nodes of three (the third still had another
/// client's key, which then expired), and one of those two restarts before
/// the first renewal: the renewal finds our key on one node only. The lease
/// is still valid, so the key goes back on the node that said no, and the
/// retry renews on that majority instead of the lease running out.
#[test]
fn a_renewal_short_of_a_majority_puts_the_key_back_while_the_lease_is_valid() {
    let mut sim = Sim::new(22, 3, Net::calm());
    let c = sim.add_client(Clock::PERFECT);
    let mut opts = LeaseOpts::new(1_000, Wait::TRY_ONCE);
    opts.auto_renew = true;
    let a = sim.add_lease(c, opts);
    let key = sim.keys.lock();
    sim.nodes[2].set(&key, b"someone-else", Some(50 * MS));
    sim.at(0, a, AppAction::Acquire);
    sim.crash_at(60 * MS, 1, 1_000 * MS);
    sim.run_until(1_500 * MS);
    let l = &sim.leases[a];
    assert!(l.acquired.is_some(), "{}", sim.describe());
    assert!(lost_at(&sim, a).is_empty(), "{}", sim.describe());
    assert_eq!(sim.holder(0).unwrap().0, sim.token(a));
    assert_eq!(sim.holder(2).unwrap().0, sim.token(a), "put back on node 2");
}

/// When each extend of `lease` was sent (global time).
fn extends_sent(sim: &Sim, lease: usize) -> Vec<u64> {
    sim.leases[lease]
        .sent
        .iter()
        .filter(|c| c.1.script == Script::Extend)
        .map(|c| c.0)
        .collect()
}

fn lost_at(sim: &Sim, lease: usize) -> Vec<u64> {
    sim.leases[lease]
        .events
        .iter()
        .filter(|e| e.1 == Event::Lost)
        .map(|e| e.0)
        .collect()
}

#[test]
fn max_hold_stops_renewal_and_the_lease_runs_out_at_its_validity_end() {
    let mut sim = Sim::new(40, 1, Net::calm());
    let c = sim.add_client(Clock::PERFECT);
    let mut opts = LeaseOpts::new(300, Wait::Forever);
    opts.auto_renew = true;
    opts.max_hold = Some(fencelock_core::MaxHold::from_millis(1_000).unwrap());
    let a = sim.add_lease(c, opts);
    sim.at(0, a, AppAction::Acquire);
    sim.run_until(3_000 * MS);

    // Renewed every ttl/3 while held for less than max_hold, never after.
    let extends = extends_sent(&sim, a);
    assert_eq!(extends.len(), 9, "{extends:?}");
    assert!(extends.iter().all(|&t| t < 1_000 * MS), "{extends:?}");
    let last = *extends.last().unwrap();
    assert!(last >= 1_000 * MS - 100 * MS, "{extends:?}");
    // Lost once, at the last renewal's validity end (ttl - drift after it).
    let lost = lost_at(&sim, a);
    assert_eq!(lost, [last + (300 - 5) * MS], "{:?}", sim.leases[a].events);
    assert!(sim.leases[a].lock.is_lost());
    assert!(!sim.leases[a]
        .lock
        .is_renewing(sim.leases[a].lock.valid_until().unwrap()));
    assert_eq!(sim.windows(a), [(2 * MS, lost[0])], "held without a gap");
    // ... and the key expired in Redis by its last PEXPIRE.
    assert_eq!(sim.holder(0), None);
    // A release afterwards is the usual LockLost.
    sim.at(sim.now, a, AppAction::Release);
    sim.run_for(10 * MS);
    assert!(matches!(
        sim.leases[a].last_event(),
        Some(Event::Released(Err(Error::LockLost { .. })))
    ));
}

#[test]
fn max_hold_shorter_than_a_renewal_interval_sends_no_renewal() {
    let mut sim = Sim::new(41, 1, Net::calm());
    let c = sim.add_client(Clock::PERFECT);
    let mut opts = LeaseOpts::new(300, Wait::Forever);
    opts.auto_renew = true;
    opts.max_hold = Some(fencelock_core::MaxHold::from_millis(50).unwrap());
    let a = sim.add_lease(c, opts);
    sim.at(0, a, AppAction::Acquire);
    sim.run_until(1_000 * MS);
    assert_eq!(extends_sent(&sim, a), Vec::<u64>::new());
    assert_eq!(lost_at(&sim, a), [(300 - 5) * MS]);
}

#[test]
fn max_hold_without_auto_renew_changes_nothing() {
    let run = |max_hold: Option<u64>| {
        let mut sim = Sim::new(42, 1, Net::calm());
        let c = sim.add_client(Clock::PERFECT);
        let mut opts = LeaseOpts::new(300, Wait::Forever);
        opts.max_hold = max_hold.map(|ms| fencelock_core::MaxHold::from_millis(ms).unwrap());
        let a = sim.add_lease(c, opts);
        sim.at(0, a, AppAction::Acquire);
        sim.at(100 * MS, a, AppAction::Extend(None));
        sim.run_until(1_000 * MS);
        (
            scripts_sent(&sim, a),
            lost_at(&sim, a),
            sim.leases[a].events.clone(),
        )
    };
    assert_eq!(run(Some(10)), run(None));
}

#[test]
fn stop_renewing_lets_the_lease_run_out_and_an_explicit_extend_still_works_once() {
    let mut sim = Sim::new(43, 1, Net::calm());
    let c = sim.add_client(Clock::PERFECT);
    let mut opts = LeaseOpts::new(300, Wait::Forever);
    opts.auto_renew = true;
    let a = sim.add_lease(c, opts);
    sim.at(0, a, AppAction::Acquire);
    sim.at(450 * MS, a, AppAction::StopRenewing);
    sim.at(460 * MS, a, AppAction::StopRenewing); // idempotent
    sim.at(500 * MS, a, AppAction::Extend(None));
    sim.run_until(2_000 * MS);

    let extends = extends_sent(&sim, a);
    let (before, after): (Vec<u64>, Vec<u64>) = extends.iter().partition(|&&t| t < 450 * MS);
    assert_eq!(before.len(), 4, "renewed until stopped: {extends:?}");
    assert_eq!(after, [500 * MS], "only the caller's extend after the stop");
    assert!(sim.leases[a]
        .events
        .iter()
        .any(|e| matches!(e.1, Event::Extended { .. }) && e.0 > 500 * MS));
    // Lost once, at that extend's validity end.
    assert_eq!(lost_at(&sim, a), [(500 + 300 - 5) * MS]);
    assert_eq!(sim.holder(0), None);
}

#[test]
fn stop_renewing_without_an_extend_is_lost_at_the_last_renewals_validity_end() {
    let mut sim = Sim::new(44, 1, Net::calm());
    let c = sim.add_client(Clock::PERFECT);
    let mut opts = LeaseOpts::new(300, Wait::Forever);
    opts.auto_renew = true;
    let a = sim.add_lease(c, opts);
    sim.at(0, a, AppAction::Acquire);
    sim.at(450 * MS, a, AppAction::StopRenewing);
    sim.run_until(2_000 * MS);
    let extends = extends_sent(&sim, a);
    assert!(extends.iter().all(|&t| t < 450 * MS), "{extends:?}");
    let last = *extends.last().unwrap();
    assert_eq!(lost_at(&sim, a), [last + (300 - 5) * MS]);
    assert_eq!(sim.windows(a), [(2 * MS, last + (300 - 5) * MS)]);
}

#[test]
fn stop_renewing_a_lease_that_does_not_renew_changes_nothing() {
    let run = |stop: bool| {
        let mut sim = Sim::new(45, 1, Net::calm());
        let c = sim.add_client(Clock::PERFECT);
        let a = sim.add_lease(c, LeaseOpts::new(300, Wait::Forever));
        sim.at(0, a, AppAction::Acquire);
        if stop {
            sim.at(100 * MS, a, AppAction::StopRenewing);
        }
        sim.run_until(1_000 * MS);
        (scripts_sent(&sim, a), sim.leases[a].events.clone())
    };
    assert_eq!(run(true), run(false));
}
