//! Unit tests of the state machine through its public API.

use super::*;
use crate::{KeySpace, Kind, Script};

fn ms(n: u64) -> Instant {
    Instant::from_epoch(Duration::from_millis(n))
}

fn lock(nodes: usize, wait: Wait, auto_renew: bool) -> Lock {
    let name = LockName::new("job").unwrap();
    Lock::new(LockConfig {
        kind: Kind::Mutex,
        keys: KeySpace::default().keys(&name),
        name,
        token: Token("t".into()),
        ttl: Ttl::from_millis(1000).unwrap(),
        wait,
        nodes,
        auto_renew,
        max_hold: None,
        retry: RetryPolicy::default(),
        fence_grace: FenceGrace::DEFAULT,
        seed: 7,
    })
}

fn commands(lock: &mut Lock) -> Vec<Command> {
    std::iter::from_fn(|| lock.poll_command()).collect()
}

fn events(lock: &mut Lock) -> Vec<Event> {
    std::iter::from_fn(|| lock.poll_event()).collect()
}

fn granted(fence: i64) -> Reply {
    Reply::Array(vec![Reply::Int(1), Reply::Int(fence)])
}

fn held(pttl: i64) -> Reply {
    Reply::Array(vec![Reply::Int(0), Reply::Int(pttl)])
}

#[test]
fn single_node_acquire_then_release_is_one_command_each() {
    let mut l = lock(1, Wait::Forever, false);
    l.acquire(ms(0)).unwrap();
    let [c] = commands(&mut l).try_into().unwrap();
    assert_eq!(c.script, Script::Acquire);
    l.handle_reply(ms(1), c.id, granted(5));
    assert_eq!(
        events(&mut l),
        vec![Event::Acquired {
            fence: 5,
            valid_until: ms(1000 - 12)
        }]
    );
    l.release(ms(2)).unwrap();
    let [c] = commands(&mut l).try_into().unwrap();
    l.handle_reply(ms(3), c.id, Reply::Int(1));
    assert_eq!(events(&mut l), vec![Event::Released(Ok(()))]);
    assert_eq!(l.state(), State::Done);
    l.release(ms(4)).unwrap();
    assert_eq!(events(&mut l), vec![Event::Released(Ok(()))]);
    assert!(commands(&mut l).is_empty());
}

#[test]
fn contended_waiter_subscribes_and_retries_on_wakeup() {
    let mut l = lock(1, Wait::Bounded(Duration::from_secs(5)), false);
    l.acquire(ms(0)).unwrap();
    let [c] = commands(&mut l).try_into().unwrap();
    l.handle_reply(ms(1), c.id, held(800));
    assert_eq!(events(&mut l), vec![Event::Subscribe]);
    let retry = l.poll_timeout().unwrap();
    assert!(retry >= ms(801) && retry <= ms(806), "{retry:?}");
    l.handle_wakeup(ms(10));
    let [c] = commands(&mut l).try_into().unwrap();
    l.handle_reply(ms(11), c.id, granted(6));
    assert_eq!(
        events(&mut l),
        vec![
            Event::Unsubscribe,
            Event::Acquired {
                fence: 6,
                valid_until: ms(10 + 988)
            }
        ]
    );
}

#[test]
fn wait_bound_ends_in_not_acquired() {
    let mut l = lock(1, Wait::Bounded(Duration::from_millis(50)), false);
    l.acquire(ms(0)).unwrap();
    let [c] = commands(&mut l).try_into().unwrap();
    l.handle_reply(ms(1), c.id, held(800));
    assert_eq!(l.poll_timeout(), Some(ms(50)));
    l.handle_timeout(ms(50));
    let ev = events(&mut l);
    assert!(
        matches!(
            ev.as_slice(),
            [
                Event::Subscribe,
                Event::Unsubscribe,
                Event::AcquireFailed(Error::NotAcquired { .. })
            ]
        ),
        "{ev:?}"
    );
    assert_eq!(l.state(), State::Done);
}

#[test]
fn try_once_fails_without_subscribing() {
    let mut l = lock(1, Wait::TRY_ONCE, false);
    l.acquire(ms(0)).unwrap();
    let [c] = commands(&mut l).try_into().unwrap();
    l.handle_reply(ms(1), c.id, held(800));
    let ev = events(&mut l);
    assert!(
        matches!(
            ev.as_slice(),
            [Event::AcquireFailed(Error::NotAcquired { .. })]
        ),
        "{ev:?}"
    );
}

#[test]
fn unknown_outcome_is_compensated() {
    let mut l = lock(1, Wait::Forever, false);
    l.acquire(ms(0)).unwrap();
    let [c] = commands(&mut l).try_into().unwrap();
    l.handle_reply(ms(1), c.id, Reply::Unknown("timed out".into()));
    let [r] = commands(&mut l).try_into().unwrap();
    assert_eq!(r.script, Script::Release);
    // The failure waits for the compensating release.
    assert!(events(&mut l).is_empty());
    assert_eq!(l.state(), State::Releasing);
    l.handle_reply(ms(2), r.id, Reply::Int(0));
    assert!(matches!(
        events(&mut l).as_slice(),
        [Event::AcquireFailed(Error::Redis { .. })]
    ));
    assert_eq!(l.state(), State::Done);
}

#[test]
fn cancel_mid_flight_releases() {
    let mut l = lock(1, Wait::Forever, false);
    l.acquire(ms(0)).unwrap();
    let [c] = commands(&mut l).try_into().unwrap();
    l.cancel(ms(1));
    let [r] = commands(&mut l).try_into().unwrap();
    assert_eq!(r.script, Script::Release);
    l.handle_reply(ms(2), c.id, granted(1));
    l.handle_reply(ms(2), r.id, Reply::Int(1));
    assert!(events(&mut l).is_empty());
    assert_eq!(l.state(), State::Done);
}

#[test]
fn auto_renew_extends_every_third_and_loss_is_reported() {
    let mut l = lock(1, Wait::Forever, true);
    l.acquire(ms(0)).unwrap();
    let [c] = commands(&mut l).try_into().unwrap();
    l.handle_reply(ms(1), c.id, granted(1));
    events(&mut l);
    assert_eq!(l.poll_timeout(), Some(ms(333)));
    l.handle_timeout(ms(333));
    let [e] = commands(&mut l).try_into().unwrap();
    assert_eq!(e.script, Script::Extend);
    l.handle_reply(ms(334), e.id, Reply::Int(1));
    assert!(events(&mut l).is_empty());
    assert_eq!(l.valid_until(), Some(ms(333 + 988)));
    l.handle_timeout(ms(666));
    let [e] = commands(&mut l).try_into().unwrap();
    l.handle_reply(ms(667), e.id, Reply::Int(0));
    assert_eq!(events(&mut l), vec![Event::Lost]);
    assert!(l.is_lost());
    l.release(ms(700)).unwrap();
    let [r] = commands(&mut l).try_into().unwrap();
    l.handle_reply(ms(701), r.id, Reply::Int(0));
    assert!(matches!(
        events(&mut l).as_slice(),
        [Event::Released(Err(Error::LockLost { .. }))]
    ));
}

#[test]
fn redlock_writes_back_the_maximum_fence() {
    let mut l = lock(5, Wait::Forever, false);
    l.acquire(ms(0)).unwrap();
    let cs = commands(&mut l);
    assert_eq!(cs.len(), 5);
    for (c, reply) in cs.iter().zip([
        granted(3),
        granted(9),
        granted(4),
        held(10),
        Reply::Unknown("down".into()),
    ]) {
        l.handle_reply(ms(2), c.id, reply);
    }
    let wb = commands(&mut l);
    assert_eq!(
        wb.iter().map(|c| (c.script, c.node)).collect::<Vec<_>>(),
        vec![(Script::RaiseFence, 0), (Script::RaiseFence, 2)]
    );
    assert!(events(&mut l).is_empty());
    l.handle_reply(ms(3), wb[0].id, Reply::Int(9));
    l.handle_reply(ms(3), wb[1].id, Reply::Int(9));
    assert_eq!(
        events(&mut l),
        vec![Event::Acquired {
            fence: 9,
            valid_until: ms(988)
        }]
    );
}

#[test]
fn a_redlock_write_back_is_decided_once_a_majority_holds_the_fence() {
    let mut l = lock(5, Wait::Forever, false);
    l.acquire(ms(0)).unwrap();
    let cs = commands(&mut l);
    for (c, fence) in cs.iter().zip([9, 6, 7, 7, 8]) {
        l.handle_reply(ms(2), c.id, granted(fence));
    }
    let wb = commands(&mut l);
    assert_eq!(
        wb.iter().map(|c| c.node).collect::<Vec<_>>(),
        vec![1, 2, 3, 4],
        "every lagging node is raised"
    );
    l.handle_reply(ms(3), wb[3].id, Reply::Int(9));
    assert!(l.awaits(wb[0].id) && events(&mut l).is_empty());
    // One at 9 already, and two raised: a majority of five.
    l.handle_reply(ms(3), wb[1].id, Reply::Int(9));
    assert!(matches!(
        events(&mut l)[..],
        [Event::Acquired { fence: 9, .. }]
    ));
    assert!(!l.awaits(wb[0].id), "the last nodes no longer matter");
    l.handle_reply(ms(4), wb[0].id, Reply::Int(9));
    l.handle_reply(ms(4), wb[2].id, Reply::Int(9));
    assert!(commands(&mut l).is_empty() && events(&mut l).is_empty());
    assert_eq!(l.state(), State::Held);
}

#[test]
fn redlock_without_majority_releases_everywhere_it_may_hold() {
    let mut l = lock(5, Wait::TRY_ONCE, false);
    l.acquire(ms(0)).unwrap();
    let cs = commands(&mut l);
    for (c, reply) in cs.iter().zip([
        granted(1),
        granted(1),
        held(10),
        held(10),
        Reply::Unknown("down".into()),
    ]) {
        l.handle_reply(ms(2), c.id, reply);
    }
    let releases = commands(&mut l);
    assert_eq!(
        releases.iter().map(|c| c.node).collect::<Vec<_>>(),
        vec![0, 1, 4]
    );
    for r in &releases {
        assert!(events(&mut l).is_empty());
        l.handle_reply(ms(3), r.id, Reply::Int(1));
    }
    assert!(matches!(
        events(&mut l).as_slice(),
        [Event::AcquireFailed(Error::NotAcquired { .. })]
    ));
}

#[test]
fn overlapping_extends_all_complete_and_extend_after_release_is_lock_lost() {
    let mut l = lock(1, Wait::Forever, false);
    l.acquire(ms(0)).unwrap();
    let [c] = commands(&mut l).try_into().unwrap();
    l.handle_reply(ms(1), c.id, granted(1));
    events(&mut l);
    l.extend(ms(2), None).unwrap();
    l.extend(ms(3), None).unwrap();
    let cs = commands(&mut l);
    assert_eq!(cs.len(), 2);
    l.handle_reply(ms(4), cs[0].id, Reply::Int(1));
    l.handle_reply(ms(4), cs[1].id, Reply::Int(1));
    let extended = Event::Extended {
        valid_until: ms(3 + 988),
    };
    assert_eq!(events(&mut l), vec![extended.clone(), extended]);
    l.release(ms(5)).unwrap();
    let [r] = commands(&mut l).try_into().unwrap();
    l.handle_reply(ms(6), r.id, Reply::Int(1));
    events(&mut l);
    l.extend(ms(7), None).unwrap();
    assert!(matches!(
        events(&mut l).as_slice(),
        [Event::ExtendFailed(Error::LockLost { .. })]
    ));
}

#[test]
fn fences_arrive_as_exact_decimal_strings() {
    let mut l = lock(1, Wait::Forever, false);
    l.acquire(ms(0)).unwrap();
    let [c] = commands(&mut l).try_into().unwrap();
    // ARGV: token, ttl, fence key ttl = ttl + grace.
    assert_eq!(c.args[1..], [b"1000".to_vec(), b"61000".to_vec()]);
    let big = (1u64 << 53) + 1;
    let reply = Reply::Array(vec![Reply::Int(1), Reply::Bulk(big.to_string().into())]);
    l.handle_reply(ms(1), c.id, reply);
    assert!(matches!(events(&mut l).as_slice(), [Event::Acquired { fence, .. }] if *fence == big));
}

#[test]
fn redlock_retries_unreachable_rounds_until_the_wait_runs_out() {
    let mut l = lock(5, Wait::Bounded(Duration::from_millis(500)), false);
    l.acquire(ms(0)).unwrap();
    let down = || Reply::Unknown("connection refused".into());
    let mut now = 0;
    let mut rounds = 0;
    loop {
        let cs = commands(&mut l);
        if cs.iter().all(|c| c.script == Script::Release) {
            for c in &cs {
                l.handle_reply(ms(now), c.id, Reply::Int(0));
            }
            break;
        }
        rounds += 1;
        for (i, c) in cs.iter().enumerate() {
            let reply = if i < 2 { granted(1) } else { down() };
            l.handle_reply(ms(now + 1), c.id, reply);
        }
        // Compensating releases of the two grants.
        for c in commands(&mut l) {
            l.handle_reply(ms(now + 1), c.id, Reply::Int(1));
        }
        assert!(events(&mut l).is_empty() || l.state() == State::Done);
        let Some(at) = l.poll_timeout() else { break };
        now = at.since_epoch().as_millis() as u64;
        l.handle_timeout(at);
    }
    assert!(rounds >= 4, "retried with backoff: {rounds} rounds");
    let ev = events(&mut l);
    let Some(Event::AcquireFailed(e)) = ev.last() else {
        panic!("{ev:?}")
    };
    assert_eq!(
        e.reason(),
        Some(NotAcquiredReason::Unreachable {
            unreachable: 3,
            nodes: 5
        })
    );
    assert!(e.to_string().contains("3 of 5 nodes unreachable"), "{e}");
    assert!(now >= 500, "not before the wait ran out: {now}");
}

#[test]
fn redlock_try_once_reports_unreachable_at_once() {
    let mut l = lock(3, Wait::TRY_ONCE, false);
    l.acquire(ms(0)).unwrap();
    for c in commands(&mut l) {
        l.handle_reply(ms(1), c.id, Reply::Error("ERR down".into()));
    }
    assert!(commands(&mut l).is_empty());
    let ev = events(&mut l);
    assert!(
        matches!(ev.as_slice(), [Event::AcquireFailed(e)] if e.reason().map(|r| r.as_str()) == Some("unreachable")),
        "{ev:?}"
    );
}

#[test]
fn held_until_the_wait_runs_out_is_reason_held() {
    let mut l = lock(1, Wait::TRY_ONCE, false);
    l.acquire(ms(0)).unwrap();
    let [c] = commands(&mut l).try_into().unwrap();
    l.handle_reply(ms(1), c.id, held(800));
    let ev = events(&mut l);
    assert!(
        matches!(ev.as_slice(), [Event::AcquireFailed(e)] if e.reason() == Some(NotAcquiredReason::Held)),
        "{ev:?}"
    );
}

#[test]
fn a_redlock_acquire_and_release_are_decided_by_a_majority_not_the_last_node() {
    let mut l = lock(3, Wait::Forever, false);
    l.acquire(ms(0)).unwrap();
    let cs = commands(&mut l);
    l.handle_reply(ms(1), cs[0].id, granted(7));
    assert!(l.awaits(cs[2].id) && events(&mut l).is_empty());
    l.handle_reply(ms(1), cs[1].id, granted(7));
    assert_eq!(
        events(&mut l),
        vec![Event::Acquired {
            fence: 7,
            valid_until: ms(1000 - 12)
        }]
    );
    // The third node's reply is no longer awaited; a larger fence in it
    // changes nothing (no lease carries it).
    assert!(!l.awaits(cs[2].id));
    l.handle_reply(ms(2), cs[2].id, granted(9));
    assert_eq!(l.fence(), Some(7));
    assert!(commands(&mut l).is_empty() && events(&mut l).is_empty());
    // It may hold our key: the release goes to every node.
    l.release(ms(3)).unwrap();
    let rs = commands(&mut l);
    assert_eq!(rs.iter().map(|r| r.node).collect::<Vec<_>>(), [0, 1, 2]);
    l.handle_reply(ms(4), rs[2].id, Reply::Int(1));
    l.handle_reply(ms(4), rs[0].id, Reply::Int(1));
    assert_eq!(events(&mut l), vec![Event::Released(Ok(()))]);
    assert!(!l.awaits(rs[1].id));
    assert_eq!(l.progress(), Progress::Finished);
}

#[test]
fn a_redlock_majority_that_disagrees_on_the_fence_waits_for_the_last_node() {
    let mut l = lock(3, Wait::Forever, false);
    l.acquire(ms(0)).unwrap();
    let cs = commands(&mut l);
    l.handle_reply(ms(1), cs[0].id, granted(8));
    l.handle_reply(ms(1), cs[1].id, granted(7));
    // Deciding now would need a write-back; the third node may spare it.
    assert!(l.awaits(cs[2].id));
    assert!(commands(&mut l).is_empty() && events(&mut l).is_empty());
    l.handle_reply(ms(2), cs[2].id, granted(8));
    assert!(commands(&mut l).is_empty());
    assert!(matches!(
        events(&mut l)[..],
        [Event::Acquired { fence: 8, .. }]
    ));
}

#[test]
fn renewal_puts_the_key_back_where_a_node_lost_it_while_a_majority_holds() {
    let mut l = lock(3, Wait::Forever, true);
    l.acquire(ms(0)).unwrap();
    for c in commands(&mut l) {
        l.handle_reply(ms(1), c.id, granted(7));
    }
    events(&mut l);
    l.handle_timeout(ms(333));
    let cs = commands(&mut l);
    assert!(cs.iter().all(|c| c.script == Script::Extend));
    // Node 2 restarted empty: "not ours" there, ours on 0 and 1.
    for (c, r) in cs.iter().zip([1, 1, 0]) {
        l.handle_reply(ms(334), c.id, Reply::Int(r));
    }
    let [r] = commands(&mut l).try_into().unwrap();
    assert_eq!((r.script, r.node), (Script::Reclaim, 2));
    assert_eq!(r.keys, vec![l.keys().lock(), l.keys().fence()]);
    assert_eq!(
        r.args[1..],
        [b"1000".to_vec(), b"7".to_vec(), b"61000".to_vec()]
    );
    l.handle_reply(ms(335), r.id, Reply::Int(1));
    assert!(!l.is_lost());
    // Without a majority nothing is put back: the lease is lost.
    l.handle_timeout(ms(667));
    let cs = commands(&mut l);
    for (c, r) in cs.iter().zip([1, 0, 0]) {
        l.handle_reply(ms(668), c.id, Reply::Int(r));
    }
    assert!(commands(&mut l).is_empty());
    assert_eq!(events(&mut l), vec![Event::Lost]);
}

#[test]
fn a_refused_publish_is_a_successful_release_and_a_signal() {
    let mut l = lock(1, Wait::Forever, false);
    l.acquire(ms(0)).unwrap();
    let [c] = commands(&mut l).try_into().unwrap();
    l.handle_reply(ms(1), c.id, granted(1));
    events(&mut l);
    l.release(ms(2)).unwrap();
    let [r] = commands(&mut l).try_into().unwrap();
    l.handle_reply(ms(3), r.id, Reply::Int(2));
    assert_eq!(
        events(&mut l),
        vec![Event::NotPublished, Event::Released(Ok(()))]
    );
    assert!(!l.is_lost());
}

#[test]
fn a_release_that_finds_the_lock_gone_marks_the_lease_lost() {
    let mut l = lock(1, Wait::Forever, false);
    l.acquire(ms(0)).unwrap();
    let [c] = commands(&mut l).try_into().unwrap();
    l.handle_reply(ms(1), c.id, granted(1));
    events(&mut l);
    l.release(ms(2)).unwrap();
    let [r] = commands(&mut l).try_into().unwrap();
    l.handle_reply(ms(3), r.id, Reply::Int(0));
    let ev = events(&mut l);
    assert!(
        matches!(
            ev.as_slice(),
            [Event::Lost, Event::Released(Err(Error::LockLost { .. }))]
        ),
        "{ev:?}"
    );
    assert!(l.is_lost());
}

#[test]
fn progress_says_what_the_run_loop_has_left() {
    let mut l = lock(1, Wait::Forever, true);
    assert_eq!(l.progress(), Progress::Finished);
    l.acquire(ms(0)).unwrap();
    assert_eq!(l.progress(), Progress::Underway);
    let [c] = commands(&mut l).try_into().unwrap();
    l.handle_reply(ms(1), c.id, granted(1));
    events(&mut l);
    assert_eq!(l.progress(), Progress::Holding);
    // A renewal nobody waits for may be left unanswered...
    l.handle_timeout(ms(333));
    let [renewal] = commands(&mut l).try_into().unwrap();
    assert_eq!(l.progress(), Progress::Holding);
    l.handle_reply(ms(334), renewal.id, Reply::Int(1));
    // ...a caller's extend not.
    l.extend(ms(400), None).unwrap();
    let [e] = commands(&mut l).try_into().unwrap();
    assert_eq!(l.progress(), Progress::Underway);
    l.handle_reply(ms(401), e.id, Reply::Int(1));
    events(&mut l);
    assert_eq!(l.progress(), Progress::Holding);
    // A lost lease is still held until released.
    l.handle_timeout(ms(10_000));
    assert!(l.is_lost());
    assert_eq!(l.progress(), Progress::Holding);
    l.release(ms(10_001)).unwrap();
    assert_eq!(l.progress(), Progress::Underway);
    let cs = commands(&mut l);
    for c in cs {
        l.handle_reply(ms(10_002), c.id, Reply::Int(0));
    }
    events(&mut l);
    assert_eq!(l.progress(), Progress::Finished);
}

#[test]
fn a_cancelled_acquire_is_underway_until_its_compensation_is_answered() {
    let mut l = lock(1, Wait::Forever, false);
    l.acquire(ms(0)).unwrap();
    let [c] = commands(&mut l).try_into().unwrap();
    l.cancel(ms(1));
    let [r] = commands(&mut l).try_into().unwrap();
    l.handle_reply(ms(2), c.id, granted(1));
    assert_eq!(l.progress(), Progress::Underway);
    l.handle_reply(ms(2), r.id, Reply::Int(1));
    assert_eq!(l.progress(), Progress::Finished);
}

// ---- handoff ------------------------------------------------------------

/// A lease of the same lock as `lock(...)`, with its own token and ttl.
fn waiter(nodes: usize, wait: Wait) -> Lock {
    let name = LockName::new("job").unwrap();
    Lock::new(LockConfig {
        kind: Kind::Mutex,
        keys: KeySpace::default().keys(&name),
        name,
        token: Token("w".into()),
        ttl: Ttl::from_millis(2000).unwrap(),
        wait,
        nodes,
        auto_renew: false,
        max_hold: None,
        retry: RetryPolicy::default(),
        fence_grace: FenceGrace::DEFAULT,
        seed: 9,
    })
}

fn successor(l: &Lock) -> Successor {
    Successor::new(&l.config)
}

/// Acquired at ms(0) on every node (fence 5), events drained.
fn held_lock(nodes: usize) -> Lock {
    let mut l = lock(nodes, Wait::Forever, false);
    l.acquire(ms(0)).unwrap();
    for c in commands(&mut l) {
        l.handle_reply(ms(1), c.id, granted(5));
    }
    events(&mut l);
    l
}

fn handed(fence: u64) -> Reply {
    Reply::Array(vec![Reply::Int(1), Reply::Bulk(fence.to_string().into())])
}

/// The releaser's events: the handoff for the successor, then `Released`
/// (after `Lost` if the release found the lock gone).
fn handoff_and_release(l: &mut Lock) -> (Handoff, Result<(), Error>) {
    match events(l).as_slice() {
        [Event::Handoff(h), Event::Released(r)]
        | [Event::Lost, Event::Handoff(h), Event::Released(r)] => (h.clone(), r.clone()),
        other => panic!("{other:?}"),
    }
}

#[test]
fn release_to_sends_one_script_with_both_tokens_and_the_successors_ttls() {
    let mut l = held_lock(1);
    let w = waiter(1, Wait::Forever);
    l.release_to(ms(10), successor(&w)).unwrap();
    let [c] = commands(&mut l).try_into().unwrap();
    assert_eq!(c.script, Script::Handoff);
    let keys = KeySpace::default().keys(&LockName::new("job").unwrap());
    assert_eq!(c.keys, vec![keys.lock(), keys.fence(), keys.channel()]);
    let args: Vec<&[u8]> = c.args.iter().map(|a| &**a).collect();
    assert_eq!(args, [&b"t"[..], b"w", b"2000", b"62000"]);
    assert!(!format!("{c:?}").contains("\"w\""), "no token in Debug");
}

#[test]
fn a_handoff_is_the_successors_grant_valid_from_the_release_send() {
    let mut l = held_lock(1);
    let mut w = waiter(1, Wait::Forever);
    l.release_to(ms(10), successor(&w)).unwrap();
    let [c] = commands(&mut l).try_into().unwrap();
    l.handle_reply(ms(11), c.id, handed(6));
    let (handoff, released) = handoff_and_release(&mut l);
    assert_eq!(released, Ok(()));
    assert_eq!(l.state(), State::Done);
    assert_eq!(handoff.handed_over(), 1);

    w.accept_handoff(ms(12), handoff).unwrap();
    assert!(commands(&mut w).is_empty(), "no acquire of its own");
    // ttl 2000 - drift (20 + 2), from the release's send at 10 ms.
    assert_eq!(
        events(&mut w),
        vec![Event::Acquired {
            fence: 6,
            valid_until: ms(10 + 1978)
        }]
    );
    assert_eq!(w.state(), State::Held);
    assert_eq!(w.fence(), Some(6));
    // From here on it is a lease like any other.
    w.release(ms(20)).unwrap();
    let [r] = commands(&mut w).try_into().unwrap();
    assert_eq!(r.script, Script::Release);
}

#[test]
fn a_handoff_that_finds_the_lock_gone_is_lock_lost_and_the_successor_attempts() {
    let mut l = held_lock(1);
    let mut w = waiter(1, Wait::Forever);
    l.release_to(ms(10), successor(&w)).unwrap();
    let [c] = commands(&mut l).try_into().unwrap();
    l.handle_reply(ms(11), c.id, held(700));
    let (handoff, released) = handoff_and_release(&mut l);
    assert!(matches!(released, Err(Error::LockLost { .. })));
    assert!(l.is_lost());
    assert_eq!(handoff.handed_over(), 0);

    w.accept_handoff(ms(12), handoff).unwrap();
    let [a] = commands(&mut w).try_into().unwrap();
    assert_eq!(
        a.script,
        Script::Acquire,
        "a normal attempt, nothing to undo"
    );
    w.handle_reply(ms(13), a.id, held(699));
    assert_eq!(events(&mut w), vec![Event::Subscribe]);
}

#[test]
fn released_without_handing_over_leaves_the_successor_a_normal_attempt() {
    // Another client listened: the node released and published instead.
    let mut l = held_lock(1);
    let mut w = waiter(1, Wait::Forever);
    l.release_to(ms(10), successor(&w)).unwrap();
    let [c] = commands(&mut l).try_into().unwrap();
    l.handle_reply(
        ms(11),
        c.id,
        Reply::Array(vec![Reply::Int(2), Reply::Int(0)]),
    );
    match events(&mut l).as_slice() {
        [Event::NotPublished, Event::Handoff(h), Event::Released(Ok(()))] => {
            w.accept_handoff(ms(12), h.clone()).unwrap();
        }
        other => panic!("{other:?}"),
    }
    let [a] = commands(&mut w).try_into().unwrap();
    assert_eq!(a.script, Script::Acquire);
}

#[test]
fn an_unknown_handoff_is_given_back_before_the_successor_attempts() {
    let mut l = held_lock(1);
    let mut w = waiter(1, Wait::Forever);
    l.release_to(ms(10), successor(&w)).unwrap();
    let [c] = commands(&mut l).try_into().unwrap();
    l.handle_reply(ms(11), c.id, Reply::Unknown("timed out".into()));
    let (handoff, released) = handoff_and_release(&mut l);
    assert!(matches!(released, Err(Error::Redis { .. })));
    w.accept_handoff(ms(12), handoff).unwrap();
    let [r, a] = commands(&mut w).try_into().unwrap();
    // Its own token, waking waiters: the lock may have been held there.
    assert_eq!((r.script, r.keys.len()), (Script::Release, 2));
    assert_eq!(r.args, vec![b"w".to_vec()]);
    assert_eq!(a.script, Script::Acquire);
}

#[test]
fn a_successor_whose_caller_left_gives_the_handoff_back_at_once() {
    let mut l = held_lock(1);
    let mut w = waiter(1, Wait::Forever);
    l.release_to(ms(10), successor(&w)).unwrap();
    let [c] = commands(&mut l).try_into().unwrap();
    l.handle_reply(ms(11), c.id, handed(6));
    let (handoff, _) = handoff_and_release(&mut l);
    w.refuse_handoff(ms(12), handoff).unwrap();
    let [r] = commands(&mut w).try_into().unwrap();
    assert_eq!((r.script, r.keys.len()), (Script::Release, 2));
    assert_eq!(r.args, vec![b"w".to_vec()]);
    assert_eq!(w.progress(), Progress::Underway);
    w.handle_reply(ms(13), r.id, Reply::Int(1));
    assert!(events(&mut w).is_empty(), "no acquire outcome");
    assert_eq!(w.state(), State::Done);
    assert_eq!(w.progress(), Progress::Finished);
}

#[test]
fn redlock_handoff_needs_a_majority_and_writes_the_highest_fence_back() {
    let mut l = held_lock(3);
    let mut w = waiter(3, Wait::Forever);
    l.release_to(ms(10), successor(&w)).unwrap();
    let cs = commands(&mut l);
    for (c, reply) in cs.iter().zip([handed(7), handed(9), held(500)]) {
        l.handle_reply(ms(11), c.id, reply);
    }
    let (handoff, released) = handoff_and_release(&mut l);
    assert_eq!(released, Ok(()), "released on a majority");
    assert_eq!(handoff.handed_over(), 2);
    w.accept_handoff(ms(12), handoff).unwrap();
    // Only node 1 reported 9: node 0 is raised before the lease is returned.
    let [wb] = commands(&mut w).try_into().unwrap();
    assert_eq!((wb.script, wb.node), (Script::RaiseFence, 0));
    assert!(events(&mut w).is_empty());
    w.handle_reply(ms(13), wb.id, Reply::Bulk(b"9".to_vec()));
    assert_eq!(
        events(&mut w),
        vec![Event::Acquired {
            fence: 9,
            valid_until: ms(10 + 1978)
        }]
    );
}

#[test]
fn redlock_handoff_to_a_minority_is_given_back_and_the_successor_attempts() {
    let mut l = held_lock(3);
    let mut w = waiter(3, Wait::Forever);
    l.release_to(ms(10), successor(&w)).unwrap();
    let cs = commands(&mut l);
    let two = Reply::Array(vec![Reply::Int(2), Reply::Int(1)]);
    for (c, reply) in cs.iter().zip([handed(7), two.clone(), two]) {
        l.handle_reply(ms(11), c.id, reply);
    }
    let (handoff, released) = handoff_and_release(&mut l);
    assert_eq!(released, Ok(()));
    w.accept_handoff(ms(12), handoff).unwrap();
    let sent: Vec<(Script, usize)> = commands(&mut w)
        .iter()
        .map(|c| (c.script, c.node))
        .collect();
    assert_eq!(
        sent,
        [
            (Script::Release, 0),
            (Script::Acquire, 0),
            (Script::Acquire, 1),
            (Script::Acquire, 2)
        ]
    );
}

#[test]
fn handoff_misuse_is_invalid_argument() {
    let mut l = held_lock(1);
    let mut w = waiter(1, Wait::Forever);
    let mut other = lock(1, Wait::Forever, false);
    l.release_to(ms(10), successor(&w)).unwrap();
    let [c] = commands(&mut l).try_into().unwrap();
    l.handle_reply(ms(11), c.id, handed(6));
    let (handoff, _) = handoff_and_release(&mut l);
    // Made for `w`, not for `other`.
    assert!(matches!(
        other.accept_handoff(ms(12), handoff.clone()),
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(other.state(), State::Idle);
    w.acquire(ms(12)).unwrap();
    assert!(matches!(
        w.accept_handoff(ms(12), handoff.clone()),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        w.refuse_handoff(ms(12), handoff),
        Err(Error::InvalidArgument(_))
    ));
    // A release_to before the lease is held is refused like a release.
    let mut idle = lock(1, Wait::Forever, false);
    assert!(idle.release_to(ms(0), successor(&w)).is_err());
    assert!(events(&mut idle).is_empty());
}

#[test]
fn release_to_after_the_release_still_hands_nothing_over_exactly_once() {
    let mut l = held_lock(1);
    l.release(ms(10)).unwrap();
    let [c] = commands(&mut l).try_into().unwrap();
    l.handle_reply(ms(11), c.id, Reply::Int(1));
    events(&mut l);
    let mut w = waiter(1, Wait::Forever);
    l.release_to(ms(12), successor(&w)).unwrap();
    assert!(commands(&mut l).is_empty());
    let (handoff, released) = handoff_and_release(&mut l);
    assert_eq!(released, Ok(()));
    w.accept_handoff(ms(12), handoff).unwrap();
    let [a] = commands(&mut w).try_into().unwrap();
    assert_eq!(a.script, Script::Acquire);
}

#[test]
fn with_replicas_a_handoff_waits_for_them_and_too_few_fail_like_an_acquire() {
    let mut l = held_lock(1);
    l.require_replicas(1, Duration::from_millis(100));
    let mut w = waiter(1, Wait::Forever);
    w.require_replicas(1, Duration::from_millis(100));
    l.release_to(ms(10), successor(&w)).unwrap();
    let [c] = commands(&mut l).try_into().unwrap();
    assert!(c.wait_replicas.is_some());
    l.handle_reply(ms(11), c.id, Reply::Array(vec![handed(6), Reply::Int(0)]));
    let (handoff, released) = handoff_and_release(&mut l);
    assert_eq!(released, Ok(()), "our own key is gone all the same");
    w.accept_handoff(ms(12), handoff).unwrap();
    // Not replicated: given back, then a normal attempt (which waits too).
    let [r, a] = commands(&mut w).try_into().unwrap();
    assert_eq!((r.script, a.script), (Script::Release, Script::Acquire));
    assert!(a.wait_replicas.is_some());
}

#[test]
fn only_a_mutex_is_handed_over() {
    // A semaphore permit or a reader/writer does not line up locally: a
    // release_to (or a handoff taken by one) is misuse, and sends nothing.
    let name = LockName::new("job").unwrap();
    let kind = Kind::Semaphore(crate::Permits::new(2).unwrap());
    let config = LockConfig {
        kind,
        keys: KeySpace::default().keys_for(&name, kind),
        name,
        token: Token("s".into()),
        ttl: Ttl::from_millis(1000).unwrap(),
        wait: Wait::Forever,
        nodes: 1,
        auto_renew: false,
        max_hold: None,
        retry: RetryPolicy::default(),
        fence_grace: FenceGrace::DEFAULT,
        seed: 3,
    };
    let mut permit = Lock::new(config.clone());
    permit.acquire(ms(0)).unwrap();
    let [c] = commands(&mut permit).try_into().unwrap();
    permit.handle_reply(ms(1), c.id, granted(5));
    events(&mut permit);
    let w = waiter(1, Wait::Forever);
    assert!(matches!(
        permit.release_to(ms(2), successor(&w)),
        Err(Error::InvalidArgument(_))
    ));
    assert!(commands(&mut permit).is_empty());
    assert_eq!(
        permit.state(),
        State::Held,
        "still held: release it as usual"
    );

    // A handoff made for a mutex lease is not taken by a permit.
    let mut l = held_lock(1);
    let mut other = Lock::new(config);
    l.release_to(ms(10), Successor::new(&other.config)).unwrap();
    let [c] = commands(&mut l).try_into().unwrap();
    l.handle_reply(ms(11), c.id, handed(6));
    let (handoff, _) = handoff_and_release(&mut l);
    assert!(matches!(
        other.accept_handoff(ms(12), handoff),
        Err(Error::InvalidArgument(_))
    ));
}

#[test]
fn stats_count_contended_attempts_renewals_and_the_winning_send() {
    let mut l = lock(1, Wait::Bounded(Duration::from_secs(5)), true);
    l.acquire(ms(0)).unwrap();
    for (at, pttl) in [(1, 5), (7, 3)] {
        let [c] = commands(&mut l).try_into().unwrap();
        l.handle_reply(ms(at), c.id, held(pttl));
        l.handle_wakeup(ms(at + 1));
    }
    assert_eq!(l.stats().contended_attempts, 2);
    let [c] = commands(&mut l).try_into().unwrap();
    l.handle_reply(ms(12), c.id, granted(9));
    assert_eq!(l.stats().granted_attempt_sent, Some(ms(8)));
    let _ = events(&mut l);

    // Auto-renewals every ttl/3: one extends, the next finds the lock gone.
    l.handle_timeout(l.poll_timeout().unwrap());
    let [renewal] = commands(&mut l).try_into().unwrap();
    l.handle_reply(ms(350), renewal.id, Reply::Int(1));
    l.handle_timeout(l.poll_timeout().unwrap());
    let [renewal] = commands(&mut l).try_into().unwrap();
    l.handle_reply(ms(700), renewal.id, Reply::Int(0));
    // A caller's own extend is not a renewal.
    l.extend(ms(701), None).unwrap();
    let stats = l.stats();
    assert_eq!((stats.renewals, stats.failed_renewals), (1, 1));
    assert_eq!(stats.contended_attempts, 2);
}
