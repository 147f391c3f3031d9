//! The semaphore and the read-write lock on the simulator: the same `Lock`
//! state machine as the mutex, with the kind's scripts. Stories first (calm
//! network unless said otherwise), then properties over random worlds:
//!
//! | property | what it asserts |
//! | --- | --- |
//! | `never_more_holders_than_the_kind_allows` (a) | at no real instant do more than `permits` semaphore leases, or a writer beside anyone, believe they hold |
//! | `every_accepted_call_completes` (d) | one completion per accepted call; every lease comes to rest |
//! | `fences_increase_in_holding_order` (b) | a lease that held after another's window ended has the larger fence; one node never issues one twice |
//! | `a_cancelled_acquire_leaves_nothing_behind` (c) | a cancelled acquire is neither a holder nor in the line once done, short of a lost compensating release |
//!
//! `SIM_CASES=200` runs fewer cases while developing.

mod sim;

use std::time::Duration;

use fencelock_core::{Error, Event, Kind, Permits, Script, State, Wait};
use proptest::prelude::*;
use sim::{acquired_at, is_acquire_done, lease, scripts_sent};
use sim::{AppAction, Clock, LeaseOpts, Micros, Net, Primitive, Scenario, Sim, MS};

fn permits(n: u64) -> Kind {
    Kind::Semaphore(Permits::new(n).unwrap())
}

#[test]
fn permits_are_one_round_trip_each_and_a_release_hands_one_on() {
    let mut sim = Sim::new(1, 1, Net::calm());
    let two = permits(2);
    let [a, b, c] = [0, 1, 2].map(|_| lease(&mut sim, two, 30_000, Wait::Forever));
    sim.at(0, a, AppAction::Acquire);
    sim.at(10 * MS, b, AppAction::Acquire);
    sim.at(20 * MS, c, AppAction::Acquire);
    assert_eq!(acquired_at(&mut sim, a, 100 * MS), 2 * MS, "one round trip");
    assert_eq!(acquired_at(&mut sim, b, 100 * MS), 12 * MS);
    sim.run_until(100 * MS);
    assert_eq!(sim.leases[c].lock.state(), State::Acquiring);
    assert!(sim.leases[c].subscribed);
    assert_eq!(sim.line(0, two), [sim.token(c)]);
    assert_eq!(scripts_sent(&sim, a), [Script::FairAcquire]);

    sim.at(200 * MS, a, AppAction::Release);
    let t = acquired_at(&mut sim, c, 60_000 * MS);
    assert!(t <= 210 * MS, "woken by the release, acquired at {t} µs");
    assert_eq!(
        scripts_sent(&sim, a),
        [Script::FairAcquire, Script::HoldersRelease]
    );
    let [fa, fb, fc] = [a, b, c].map(|l| sim.leases[l].fence().unwrap());
    assert!(fa < fb && fb < fc, "{fa} {fb} {fc}");
    assert_eq!(sim.line(0, two), Vec::<Vec<u8>>::new());
    sim.check_capacity().unwrap();
}

#[test]
fn waiters_get_permits_in_arrival_order_whoever_asks_first() {
    // One permit, held; a lines up before b. On the release b's client is
    // closer (its attempt lands first) but the permit is a's.
    let mut sim = Sim::new(2, 1, Net::calm());
    let one = permits(1);
    let h = lease(&mut sim, one, 30_000, Wait::Forever);
    let a = lease(&mut sim, one, 30_000, Wait::Forever);
    let b = lease(&mut sim, one, 30_000, Wait::Forever);
    sim.at(0, h, AppAction::Acquire);
    sim.at(10 * MS, a, AppAction::Acquire);
    sim.at(20 * MS, b, AppAction::Acquire);
    sim.run_until(100 * MS);
    assert_eq!(sim.line(0, one), [sim.token(a), sim.token(b)]);
    // a is paused when the release comes: b asks first and is turned away.
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
    assert!(ta >= 400 * MS);
    sim.at(ta + 10 * MS, a, AppAction::Release);
    let tb = acquired_at(&mut sim, b, 60_000 * MS);
    assert!(tb > ta);
    sim.check_capacity().unwrap();
}

#[test]
fn a_crashed_waiter_holds_up_the_line_only_until_its_place_expires() {
    let mut sim = Sim::new(3, 1, Net::calm());
    let one = permits(1);
    let h = lease(&mut sim, one, 30_000, Wait::Forever);
    let dead = lease(&mut sim, one, 30_000, Wait::Forever);
    let b = lease(&mut sim, one, 30_000, Wait::Forever);
    sim.at(0, h, AppAction::Acquire);
    sim.at(10 * MS, dead, AppAction::Acquire);
    sim.at(20 * MS, b, AppAction::Acquire);
    sim.run_until(100 * MS);
    // The first waiter's process stops for good (paused past the test).
    sim.clients[sim.leases[dead].client]
        .pauses
        .push((100 * MS, 1_000_000 * MS));
    sim.at(200 * MS, h, AppAction::Release);
    let t = acquired_at(&mut sim, b, 60_000 * MS);
    // Its place lasted 3 s (3 x the 1 s max retry delay) from its last
    // attempt at 10 ms; b retries at least every second.
    assert!(t > 3_000 * MS && t < 4_100 * MS, "acquired at {t} µs");
    sim.check_capacity().unwrap();
}

#[test]
fn a_cancelled_waiter_leaves_the_line_and_wakes_the_next() {
    let mut sim = Sim::new(4, 1, Net::calm());
    let one = permits(1);
    let h = lease(&mut sim, one, 30_000, Wait::Forever);
    let a = lease(&mut sim, one, 30_000, Wait::Forever);
    let b = lease(
        &mut sim,
        one,
        30_000,
        Wait::Bounded(Duration::from_millis(300)),
    );
    sim.at(0, h, AppAction::Acquire);
    sim.at(10 * MS, a, AppAction::Acquire);
    sim.at(20 * MS, b, AppAction::Acquire);
    sim.run_until(100 * MS);
    assert_eq!(sim.line(0, one).len(), 2);
    sim.at(150 * MS, a, AppAction::Cancel);
    sim.run_until(200 * MS);
    assert_eq!(sim.leases[a].lock.state(), State::Done);
    assert_eq!(sim.line(0, one), [sim.token(b)]);
    // b's bounded wait runs out: it leaves too, and nothing is left.
    let (_, ev) = sim.run_until_event(b, 1_000 * MS, is_acquire_done).unwrap();
    assert!(matches!(
        ev,
        Event::AcquireFailed(Error::NotAcquired { .. })
    ));
    assert_eq!(sim.line(0, one), Vec::<Vec<u8>>::new());
    assert_eq!(sim.holders(0, one), [sim.token(h)]);
}

#[test]
fn a_try_once_looks_without_taking_a_place() {
    let mut sim = Sim::new(5, 1, Net::calm());
    let one = permits(1);
    let h = lease(&mut sim, one, 30_000, Wait::Forever);
    let t = lease(&mut sim, one, 30_000, Wait::TRY_ONCE);
    sim.at(0, h, AppAction::Acquire);
    sim.at(10 * MS, t, AppAction::Acquire);
    let (_, ev) = sim.run_until_event(t, 100 * MS, is_acquire_done).unwrap();
    assert!(matches!(
        ev,
        Event::AcquireFailed(Error::NotAcquired { .. })
    ));
    assert_eq!(
        scripts_sent(&sim, t),
        [Script::FairAcquire],
        "nothing to leave"
    );
    assert_eq!(sim.leases[t].sent[0].1.args[4], b"0", "patience 0");
    assert_eq!(sim.line(0, one), Vec::<Vec<u8>>::new());
}

#[test]
fn readers_share_and_a_waiting_writer_holds_new_readers_off() {
    let mut sim = Sim::new(6, 1, Net::calm());
    let r1 = lease(&mut sim, Kind::Read, 30_000, Wait::Forever);
    let r2 = lease(&mut sim, Kind::Read, 30_000, Wait::Forever);
    let w = lease(&mut sim, Kind::Write, 30_000, Wait::Forever);
    let r3 = lease(&mut sim, Kind::Read, 30_000, Wait::Forever);
    sim.at(0, r1, AppAction::Acquire);
    sim.at(5 * MS, r2, AppAction::Acquire);
    sim.at(10 * MS, w, AppAction::Acquire);
    sim.at(20 * MS, r3, AppAction::Acquire);
    acquired_at(&mut sim, r1, 100 * MS);
    acquired_at(&mut sim, r2, 100 * MS);
    sim.run_until(100 * MS);
    assert_eq!(sim.leases[w].lock.state(), State::Acquiring, "readers hold");
    assert_eq!(
        sim.leases[r3].lock.state(),
        State::Acquiring,
        "writer preference: the waiting writer keeps r3 out"
    );
    assert_eq!(sim.line(0, Kind::Write), [sim.token(w)]);
    sim.at(200 * MS, r1, AppAction::Release);
    sim.at(210 * MS, r2, AppAction::Release);
    let tw = acquired_at(&mut sim, w, 60_000 * MS);
    assert!(tw < 230 * MS, "the last reader's release wakes the writer");
    sim.run_until(tw + 50 * MS);
    assert_eq!(sim.leases[r3].lock.state(), State::Acquiring);
    sim.at(tw + 100 * MS, w, AppAction::Release);
    acquired_at(&mut sim, r3, 60_000 * MS);
    sim.check_capacity().unwrap();
    sim.check_fences_in_order().unwrap();
    // Asked at 10 ms, again once subscribed, and at each reader's release.
    assert_eq!(
        scripts_sent(&sim, w),
        [
            Script::FairAcquire,
            Script::FairAcquire,
            Script::FairAcquire,
            Script::FairAcquire,
            Script::HoldersRelease
        ]
    );
}

#[test]
fn redlock_semaphore_renews_a_permit_across_a_node_restart() {
    // Two permits over five nodes: four must agree (see Kind::quorum).
    let mut sim = Sim::new(7, 5, Net::calm());
    let two = permits(2);
    let c = sim.add_client(Clock::PERFECT);
    let mut opts = LeaseOpts::new(300, Wait::Forever);
    opts.kind = two;
    opts.auto_renew = true;
    let a = sim.add_lease(c, opts);
    let b = lease(&mut sim, two, 300, Wait::Forever);
    let w = lease(&mut sim, two, 300, Wait::Forever);
    sim.at(0, a, AppAction::Acquire);
    sim.at(0, b, AppAction::Acquire);
    sim.at(10 * MS, w, AppAction::Acquire);
    acquired_at(&mut sim, a, 100 * MS);
    acquired_at(&mut sim, b, 100 * MS);
    // One node crashes empty: a's renewals put its permit back there.
    sim.crash_at(50 * MS, 4, 100 * MS);
    sim.run_until(1_000 * MS);
    assert!(!sim.leases[a].lock.is_lost(), "renewed across the crash");
    assert!(sim.holders(4, two).contains(&sim.token(a)), "reclaimed");
    // b expired long ago (no renewal): its permit went to w.
    assert!(sim.leases[w].acquired.is_some());
    sim.check_capacity().unwrap();
}

#[test]
fn redlock_semaphore_of_two_permits_over_three_nodes_needs_all_three() {
    let mut sim = Sim::new(8, 3, Net::calm());
    let two = permits(2);
    let a = lease(
        &mut sim,
        two,
        300,
        Wait::Bounded(Duration::from_millis(200)),
    );
    let b = lease(&mut sim, two, 300, Wait::Forever);
    sim.partition_at(0, 2, 500 * MS);
    sim.at(MS, a, AppAction::Acquire);
    let (_, ev) = sim.run_until_event(a, 1_000 * MS, is_acquire_done).unwrap();
    assert!(
        matches!(&ev, Event::AcquireFailed(e) if e.reason().map(|r| r.as_str()) == Some("unreachable")),
        "{ev:?}"
    );
    sim.at(300 * MS, b, AppAction::Acquire);
    let t = acquired_at(&mut sim, b, 5_000 * MS);
    assert!(t >= 500 * MS, "only once the third node is back: {t} µs");
}

// ---------------------------------------------------------------------------
// Properties.

fn config() -> ProptestConfig {
    let cases = std::env::var("SIM_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(2_000);
    ProptestConfig {
        max_shrink_iters: 2_000,
        failure_persistence: None,
        ..ProptestConfig::with_cases(cases)
    }
}

fn limit(s: &Scenario) -> Micros {
    s.ttl_ms * MS * 1_000
}

fn run(s: &Scenario) -> Result<Sim, TestCaseError> {
    let mut sim = s.build();
    let quiet = sim.run_to_quiet(limit(s));
    let explain = |what: String| {
        let mut again = s.build();
        again.tracing = true;
        again.run_to_quiet(limit(s));
        let lines: Vec<&str> = again.trace.lines().collect();
        let tail = lines[lines.len().saturating_sub(120)..].join("\n");
        TestCaseError::fail(format!(
            "{what}\n{}\n--- trace ---\n{tail}",
            again.describe()
        ))
    };
    if !sim.violations.is_empty() {
        return Err(explain(format!("{:?}", sim.violations)));
    }
    if !quiet {
        return Err(explain("never went quiet".into()));
    }
    for (i, l) in sim.leases.iter().enumerate() {
        if l.started() && !l.finished {
            return Err(explain(format!("L{i} stuck in {:?}", l.lock.state())));
        }
    }
    for check in [sim.check_capacity(), sim.check_fences_in_order()] {
        check.map_err(explain)?;
    }
    for i in 0..sim.leases.len() {
        sim.check_completions(i).map_err(explain)?;
    }
    Ok(sim)
}

prop_compose! {
    /// Worlds of semaphore (1 to 3 permits) or read-write leases, with the
    /// faults the mutex's properties inject: drift, pauses, a minority of
    /// crashes, loss, cancels, spurious wake-ups, partitions.
    fn scenario()(
        primitive in prop_oneof![
            (1..=3u32).prop_map(Primitive::Semaphore),
            Just(Primitive::ReadWrite),
        ],
        seed in any::<u64>(),
        nodes in prop_oneof![Just(1usize), Just(3), Just(5)],
        clients in 2..=4usize,
        leases_per_client in 1..=2usize,
        ttl_ms in 20..=200u64,
        max_wait_ms in prop::option::of(0..=300u64),
        max_drift_ppm in prop_oneof![Just(5_000u64), 0..=5_000u64],
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
            primitive, seed, nodes, clients, leases_per_client, ttl_ms, max_wait_ms,
            max_drift_ppm, pauses, crashes: if crash { (nodes - 1) / 2 } else { 0 },
            crashes_keep_data: false, lossy, divergent_counters: false, auto_renew,
            extends, cancels, noise, partitions, handoffs: false,
        }
    }
}

proptest! {
    #![proptest_config(config())]

    /// (a), (b), (d): capacity, fence order and completions in one run.
    #[test]
    fn never_more_holders_than_the_kind_allows(s in scenario()) {
        run(&s)?;
    }

    /// (c) A cancelled acquire of a semaphore or a write lock, waiting
    /// behind a holder or not: once done, its token is neither a holder nor
    /// in the line on any node, unless a release sent after its last
    /// attempt there was lost.
    #[test]
    fn a_cancelled_acquire_leaves_nothing_behind(
        seed in any::<u64>(),
        nodes in prop_oneof![Just(1usize), Just(3)],
        write in any::<bool>(),
        lossy in any::<bool>(),
        held in any::<bool>(),
        cancel_after_us in 0..=40_000u64,
    ) {
        let kind = if write { Kind::Write } else { permits(1) };
        let net = if lossy {
            Net { drop_request: 0.05, drop_reply: 0.05, slow: 0.02, slow_delay: 60 * MS, timeout: 20 * MS, ..Net::calm() }
        } else {
            Net::calm()
        };
        let mut sim = Sim::new(seed, nodes, net);
        if held {
            let h = lease(&mut sim, kind, 200, Wait::Forever);
            sim.at(0, h, AppAction::Acquire);
        }
        let l = lease(&mut sim, kind, 200, Wait::Forever);
        sim.at(MS, l, AppAction::Acquire);
        sim.at(MS + cancel_after_us, l, AppAction::Cancel);
        let done = sim.run_while(200_000 * MS, |sim| {
            !(sim.leases[l].finished && sim.requests_in_flight(l) == 0)
        });
        prop_assert!(done && sim.violations.is_empty(), "{}", sim.describe());
        let token = sim.token(l);
        for n in 0..nodes {
            let left = sim.holders(n, kind).contains(&token) || sim.line(n, kind).contains(&token);
            if !left {
                continue;
            }
            // Allowed only if a release to this node after our last attempt
            // there never ran (dropped request).
            let sent = &sim.leases[l].sent;
            let last_attempt = sent.iter().rposition(|c| c.1.node == n && c.1.script.is_acquire());
            let released = sent.iter().enumerate().filter(|(i, c)| {
                c.1.node == n && c.1.script == Script::HoldersRelease && Some(*i) > last_attempt
            });
            let ran = released.clone().any(|(_, c)| {
                sim.arrived.iter().any(|a| a.id == c.1.id && a.lease == l && a.reply.is_some())
            });
            prop_assert!(released.count() > 0 && !ran, "node {n} keeps the cancelled lease\n{}", sim.describe());
        }
    }
}
