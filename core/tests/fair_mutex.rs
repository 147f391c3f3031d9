//! The fair mutex on the simulator: the mutex's own key, token and fence
//! (`acquire.lua`'s lock), its waiters served in arrival order through a
//! line beside it (`fair_mutex_acquire.lua`). Stories first, then
//! properties:
//!
//! | property | what it asserts |
//! | --- | --- |
//! | `fair_waiters_are_served_in_arrival_order` | fair waiters queued behind a holder hold in the order their first attempts reached the server |
//! | `an_expired_place_frees_the_line` | a waiter that stops for good holds the ones behind it up only until its place expires |
//! | `fair_and_plain_leases_exclude_each_other` (a, b, d) | one holder at a time among fair and plain leases of a name, fences in order, every call completes, under the mutex's faults |
//!
//! `SIM_CASES=200` runs fewer cases while developing.

mod sim;

use std::time::Duration;

use fencelock_core::{Error, Event, Kind, Script, State, Wait};
use proptest::prelude::*;
use sim::{acquired_at, is_acquire_done, lease, scripts_sent};
use sim::{AppAction, Clock, LeaseOpts, Micros, Net, Primitive, Scenario, Sim, MS};

#[test]
fn uncontended_is_one_round_trip_on_the_mutex_key() {
    let mut sim = Sim::new(1, 1, Net::calm());
    let a = lease(&mut sim, Kind::FairMutex, 30_000, Wait::Forever);
    sim.at(0, a, AppAction::Acquire);
    assert_eq!(acquired_at(&mut sim, a, 100 * MS), 2 * MS, "one round trip");
    assert_eq!(scripts_sent(&sim, a), [Script::FairMutexAcquire]);
    // The mutex's key holds the fair lease's token.
    assert_eq!(sim.holder(0).map(|h| h.0), Some(sim.token(a)));
    sim.at(10 * MS, a, AppAction::Release);
    sim.run_until(20 * MS);
    assert_eq!(
        scripts_sent(&sim, a),
        [Script::FairMutexAcquire, Script::FairMutexRelease]
    );
    assert_eq!(sim.holder(0), None);
}

#[test]
fn a_plain_holder_excludes_fair_waiters_and_they_follow_in_arrival_order() {
    let mut sim = Sim::new(2, 1, Net::calm());
    let h = lease(&mut sim, Kind::Mutex, 30_000, Wait::Forever);
    let a = lease(&mut sim, Kind::FairMutex, 30_000, Wait::Forever);
    let b = lease(&mut sim, Kind::FairMutex, 30_000, Wait::Forever);
    sim.at(0, h, AppAction::Acquire);
    sim.at(10 * MS, a, AppAction::Acquire);
    sim.at(20 * MS, b, AppAction::Acquire);
    sim.run_until(100 * MS);
    assert_eq!(sim.line(0, Kind::FairMutex), [sim.token(a), sim.token(b)]);
    // a is paused when the release comes (its message waits for it): b,
    // not named by the release, does not ask until a has had its turn.
    sim.clients[sim.leases[a].client]
        .pauses
        .push((150 * MS, 400 * MS));
    sim.at(200 * MS, h, AppAction::Release);
    sim.run_until(390 * MS);
    assert_eq!(
        sim.leases[b].lock.state(),
        State::Acquiring,
        "b waits behind a"
    );
    let ta = acquired_at(&mut sim, a, 60_000 * MS);
    sim.at(ta + 10 * MS, a, AppAction::Release);
    let tb = acquired_at(&mut sim, b, 60_000 * MS);
    assert!(ta >= 400 * MS && tb > ta && tb <= ta + 15 * MS, "{ta} {tb}");
    sim.check_capacity().unwrap();
    sim.check_fences_in_order().unwrap();
    assert_eq!(sim.line(0, Kind::FairMutex), Vec::<Vec<u8>>::new());
}

#[test]
fn a_cancelled_waiter_leaves_the_line_and_a_try_once_takes_no_place() {
    let mut sim = Sim::new(3, 1, Net::calm());
    let h = lease(&mut sim, Kind::FairMutex, 30_000, Wait::Forever);
    let a = lease(&mut sim, Kind::FairMutex, 30_000, Wait::Forever);
    let t = lease(&mut sim, Kind::FairMutex, 30_000, Wait::TRY_ONCE);
    sim.at(0, h, AppAction::Acquire);
    sim.at(10 * MS, a, AppAction::Acquire);
    sim.run_until(100 * MS);
    assert_eq!(sim.line(0, Kind::FairMutex), [sim.token(a)]);
    sim.at(150 * MS, a, AppAction::Cancel);
    sim.run_until(200 * MS);
    assert_eq!(sim.leases[a].lock.state(), State::Done);
    assert_eq!(sim.line(0, Kind::FairMutex), Vec::<Vec<u8>>::new());
    sim.at(210 * MS, t, AppAction::Acquire);
    let (_, ev) = sim.run_until_event(t, 400 * MS, is_acquire_done).unwrap();
    assert!(matches!(
        ev,
        Event::AcquireFailed(Error::NotAcquired { .. })
    ));
    assert_eq!(scripts_sent(&sim, t), [Script::FairMutexAcquire]);
    assert_eq!(sim.leases[t].sent[0].1.args[3], b"0", "patience 0");
    assert_eq!(sim.line(0, Kind::FairMutex), Vec::<Vec<u8>>::new());
    assert_eq!(sim.holder(0).map(|h| h.0), Some(sim.token(h)));
}

/// A release names the first waiter in line (its wake id): only that one
/// asks again; the others send nothing until their turn comes.
#[test]
fn a_release_wakes_only_the_first_in_line() {
    let mut sim = Sim::new(4, 1, Net::calm());
    let h = lease(&mut sim, Kind::FairMutex, 30_000, Wait::Forever);
    let line: Vec<usize> = (0..3)
        .map(|_| lease(&mut sim, Kind::FairMutex, 30_000, Wait::Forever))
        .collect();
    sim.at(0, h, AppAction::Acquire);
    for (i, &l) in line.iter().enumerate() {
        sim.at((10 + 10 * i as u64) * MS, l, AppAction::Acquire);
    }
    sim.run_until(100 * MS);
    let tokens: Vec<Vec<u8>> = line.iter().map(|&l| sim.token(l)).collect();
    assert_eq!(sim.line(0, Kind::FairMutex), tokens);
    let mut release_at = 200 * MS;
    sim.at(release_at, h, AppAction::Release);
    for (i, &l) in line.iter().enumerate() {
        let sent_before: Vec<usize> = line.iter().map(|&o| sim.leases[o].sent.len()).collect();
        let t = acquired_at(&mut sim, l, 60_000 * MS);
        // The message (1 ms), one attempt (2 ms): no one asked before it.
        assert_eq!(t, release_at + 3 * MS + MS, "L{l} served at once");
        for (j, &o) in line.iter().enumerate().skip(i + 1) {
            assert_eq!(
                sim.leases[o].sent.len(),
                sent_before[j],
                "L{o} asked while L{l} was first\n{}",
                sim.describe()
            );
        }
        release_at = t + 10 * MS;
        sim.at(release_at, l, AppAction::Release);
    }
    sim.run_until(release_at + 10 * MS);
    assert_eq!(sim.line(0, Kind::FairMutex), Vec::<Vec<u8>>::new());
    sim.check_capacity().unwrap();
    sim.check_fences_in_order().unwrap();
}

/// The first waiter's message lost: its retry timer (at most a second
/// plus jitter after its last attempt) still brings it the lock.
#[test]
fn a_lost_release_message_is_covered_by_the_retry_timer() {
    let net = Net {
        drop_wakeup: 1.0,
        ..Net::calm()
    };
    let mut sim = Sim::new(5, 1, net);
    let h = lease(&mut sim, Kind::FairMutex, 30_000, Wait::Forever);
    let a = lease(&mut sim, Kind::FairMutex, 30_000, Wait::Forever);
    sim.at(0, h, AppAction::Acquire);
    sim.at(10 * MS, a, AppAction::Acquire);
    sim.run_until(100 * MS);
    assert_eq!(sim.line(0, Kind::FairMutex), [sim.token(a)]);
    sim.at(200 * MS, h, AppAction::Release);
    let t = acquired_at(&mut sim, a, 60_000 * MS);
    let last = sim.leases[a].sent.iter().map(|c| c.0).max().unwrap();
    assert!(t > 200 * MS && t <= 1_100 * MS, "{t}");
    assert!(
        t <= last + 2 * MS + MS,
        "granted by the attempt its timer sent"
    );
}

// ---------------------------------------------------------------------------
// Properties.

fn config() -> ProptestConfig {
    let cases = std::env::var("SIM_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(1_000);
    ProptestConfig {
        max_shrink_iters: 2_000,
        failure_persistence: None,
        ..ProptestConfig::with_cases(cases)
    }
}

prop_compose! {
    /// Worlds of fair and plain leases of one name with the mutex's faults.
    fn scenario()(
        seed in any::<u64>(),
        nodes in prop_oneof![Just(1usize), Just(3), Just(5)],
        clients in 2..=4usize,
        leases_per_client in 1..=2usize,
        ttl_ms in 20..=200u64,
        max_wait_ms in prop::option::of(0..=300u64),
        max_drift_ppm in 0..=5_000u64,
        pauses in any::<bool>(),
        crash in any::<bool>(),
        lossy in any::<bool>(),
        auto_renew in any::<bool>(),
        extends in any::<bool>(),
        cancels in any::<bool>(),
        noise in any::<bool>(),
        partitions in any::<bool>(),
    ) -> Scenario {
        Scenario {
            primitive: Primitive::FairMutex, seed, nodes, clients, leases_per_client, ttl_ms,
            max_wait_ms, max_drift_ppm, pauses, crashes: if crash { (nodes - 1) / 2 } else { 0 },
            crashes_keep_data: false, lossy, divergent_counters: false, auto_renew,
            extends, cancels, noise, partitions, handoffs: false,
        }
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn fair_and_plain_leases_exclude_each_other(s in scenario()) {
        let mut sim = s.build();
        let quiet = sim.run_to_quiet(s.ttl_ms * MS * 1_000);
        prop_assert!(sim.violations.is_empty(), "{:?}\n{}", sim.violations, sim.describe());
        prop_assert!(quiet, "never went quiet\n{}", sim.describe());
        for (i, l) in sim.leases.iter().enumerate() {
            prop_assert!(!l.started() || l.finished, "L{i} stuck\n{}", sim.describe());
        }
        sim.check_capacity().map_err(TestCaseError::fail)?;
        sim.check_fences_in_order().map_err(TestCaseError::fail)?;
        for i in 0..sim.leases.len() {
            sim.check_completions(i).map_err(TestCaseError::fail)?;
        }
    }

    /// Behind a holder, fair waiters (network delays of 1-3 ms, arrivals
    /// at least 10 ms apart) are granted in the order they asked, whatever
    /// they hold it for. One node: with Redlock a round granted by a
    /// minority gives its places there back, so a later waiter can pass
    /// (about 1 case in 40,000 here; documented in the README), and
    /// `fair_and_plain_leases_exclude_each_other` covers Redlock's safety.
    #[test]
    fn fair_waiters_are_served_in_arrival_order(
        seed in any::<u64>(),
        nodes in Just(1usize),
        gaps in prop::collection::vec(10..=60u64, 2..=5),
        holds in prop::collection::vec(0..=30u64, 5),
        plain_holder in any::<bool>(),
    ) {
        let net = Net { delay: (MS, 3 * MS), ..Net::calm() };
        let mut sim = Sim::new(seed, nodes, net);
        let first = if plain_holder { Kind::Mutex } else { Kind::FairMutex };
        let h = lease(&mut sim, first, 10_000, Wait::Forever);
        sim.at(0, h, AppAction::Acquire);
        let mut at = 0;
        let mut waiters = Vec::new();
        for (i, gap) in gaps.iter().enumerate() {
            let c = sim.add_client(Clock::PERFECT);
            let mut opts = LeaseOpts::new(10_000, Wait::Forever);
            opts.kind = Kind::FairMutex;
            opts.plan.hold = Some(holds[i] * MS);
            let l = sim.add_lease(c, opts);
            at += gap * MS;
            sim.at(at, l, AppAction::Acquire);
            waiters.push(l);
        }
        sim.at(at + 100 * MS, h, AppAction::Release);
        let done = sim.run_while(600_000 * MS, |sim| {
            waiters.iter().any(|&l| !sim.leases[l].finished)
        });
        prop_assert!(done && sim.violations.is_empty(), "{}", sim.describe());
        let mut order: Vec<(Micros, usize)> = waiters
            .iter()
            .map(|&l| (sim.leases[l].acquired.expect("acquired").0, l))
            .collect();
        order.sort();
        let served: Vec<usize> = order.into_iter().map(|(_, l)| l).collect();
        prop_assert_eq!(&served, &waiters, "{}", sim.describe());
        sim.check_capacity().map_err(TestCaseError::fail)?;
    }

    /// A waiter that stops for good (a crash) holds the line up only until
    /// its place expires: 3 s (3 x the 1 s longest retry delay) after its
    /// last attempt, plus a retry of the next one.
    #[test]
    fn an_expired_place_frees_the_line(
        seed in any::<u64>(),
        nodes in prop_oneof![Just(1usize), Just(3)],
        dies_after_ms in 0..=2_500u64,
    ) {
        let mut sim = Sim::new(seed, nodes, Net::calm());
        let h = lease(&mut sim, Kind::FairMutex, 30_000, Wait::Forever);
        let dead = lease(&mut sim, Kind::FairMutex, 30_000, Wait::Forever);
        let b = lease(&mut sim, Kind::FairMutex, 30_000, Wait::Forever);
        sim.at(0, h, AppAction::Acquire);
        sim.at(10 * MS, dead, AppAction::Acquire);
        sim.at(20 * MS, b, AppAction::Acquire);
        let stop = 100 * MS + dies_after_ms * MS;
        sim.clients[sim.leases[dead].client].pauses.push((stop, Micros::MAX / 4));
        sim.at(stop + 10 * MS, h, AppAction::Release);
        let t = acquired_at(&mut sim, b, 60_000 * MS);
        let last = sim.leases[dead].sent.iter().map(|c| c.0).max().unwrap();
        prop_assert!(t > last && t <= last + 4_200 * MS, "b at {t} µs, dead's last attempt at {last} µs");
        prop_assert!(sim.leases[dead].acquired.is_none());
        sim.check_capacity().map_err(TestCaseError::fail)?;
    }
}

#[test]
fn a_waiter_whose_wait_runs_out_leaves_the_line() {
    let mut sim = Sim::new(9, 1, Net::calm());
    let h = lease(&mut sim, Kind::FairMutex, 30_000, Wait::Forever);
    let a = lease(
        &mut sim,
        Kind::FairMutex,
        30_000,
        Wait::Bounded(Duration::from_millis(200)),
    );
    sim.at(0, h, AppAction::Acquire);
    sim.at(10 * MS, a, AppAction::Acquire);
    let (_, ev) = sim.run_until_event(a, 1_000 * MS, is_acquire_done).unwrap();
    assert!(matches!(
        ev,
        Event::AcquireFailed(Error::NotAcquired { .. })
    ));
    sim.run_until(1_100 * MS);
    assert_eq!(sim.line(0, Kind::FairMutex), Vec::<Vec<u8>>::new());
}
