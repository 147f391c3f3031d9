//! `AcquireMany`, driven with scripted replies: the plan (canonical order,
//! one group per slot), all or nothing, compensation, waiting, cancel, and
//! each name's lease as an ordinary mutex lease.

use std::time::Duration;

use fencelock_core::keys::hash_slot;
use fencelock_core::{
    AcquireMany, Command, Error, Event, FenceGrace, Instant, KeySpace, Kind, Lock, LockConfig,
    LockName, ManyEvent, Reply, RetryPolicy, Script, State, Token, Ttl, Wait, MAX_MANY_NAMES,
};

fn config(name: &str, wait: Wait) -> LockConfig {
    let token = Token(format!("token-{name}").into());
    let name = LockName::new(name).unwrap();
    LockConfig {
        kind: Kind::Mutex,
        keys: KeySpace::default().keys(&name),
        token,
        name,
        ttl: Ttl::from_millis(10_000).unwrap(),
        wait,
        nodes: 1,
        auto_renew: false,
        max_hold: None,
        retry: RetryPolicy::default(),
        fence_grace: FenceGrace::DEFAULT,
        seed: 7,
    }
}

fn many(names: &[&str], wait: Wait, cluster: bool) -> AcquireMany {
    let members = names.iter().map(|n| config(n, wait)).collect();
    AcquireMany::new(members, cluster, false, 1).unwrap()
}

fn at(ms: u64) -> Instant {
    Instant::from_epoch(Duration::from_millis(ms))
}

fn commands(m: &mut AcquireMany) -> Vec<Command> {
    std::iter::from_fn(|| m.poll_command()).collect()
}

fn events(m: &mut AcquireMany) -> Vec<ManyEvent> {
    std::iter::from_fn(|| m.poll_event()).collect()
}

fn set(fences: &[u64]) -> Reply {
    let mut items = vec![Reply::Int(1)];
    items.extend(
        fences
            .iter()
            .map(|f| Reply::Bulk(f.to_string().into_bytes())),
    );
    Reply::Array(items)
}

fn held(pttl: i64, at: i64) -> Reply {
    Reply::Array(vec![Reply::Int(0), Reply::Int(pttl), Reply::Int(at)])
}

fn lock_keys(c: &Command) -> Vec<String> {
    c.keys
        .iter()
        .step_by(2)
        .map(|k| String::from_utf8_lossy(k).into_owned())
        .collect()
}

/// Two names whose keys share a cluster slot (names are escaped into the
/// hash tag whole, so only by the slot's hash: found by search).
fn one_slot() -> (String, String) {
    let keys = KeySpace::default();
    let slot = |n: &str| hash_slot(&keys.keys(&LockName::new(n).unwrap()).lock());
    let mut seen = std::collections::HashMap::new();
    for i in 0.. {
        let name = format!("n{i}");
        if let Some(other) = seen.insert(slot(&name), name.clone()) {
            // In byte order, as a group lists them.
            return if other < name {
                (other, name)
            } else {
                (name, other)
            };
        }
    }
    unreachable!()
}

/// Two names on different cluster slots, in slot order.
fn two_slots() -> (&'static str, &'static str) {
    let keys = KeySpace::default();
    let slot = |n: &str| hash_slot(&keys.keys(&LockName::new(n).unwrap()).lock());
    if slot("a") < slot("b") {
        ("a", "b")
    } else {
        ("b", "a")
    }
}

#[test]
fn bad_sets_are_refused_before_anything_is_sent() {
    let invalid = |r: Result<AcquireMany, Error>| matches!(r, Err(Error::InvalidArgument(_)));
    let wait = Wait::TRY_ONCE;
    assert!(invalid(AcquireMany::new(vec![], false, false, 1)));
    let dup = vec![config("x", wait), config("y", wait), config("x", wait)];
    assert!(invalid(AcquireMany::new(dup, false, false, 1)));
    let too_many = (0..=MAX_MANY_NAMES)
        .map(|i| config(&format!("n{i}"), wait))
        .collect();
    assert!(invalid(AcquireMany::new(too_many, false, false, 1)));
    let redlock = vec![LockConfig {
        nodes: 3,
        ..config("x", wait)
    }];
    assert!(invalid(AcquireMany::new(redlock, false, false, 1)));
    assert!(invalid(AcquireMany::new(
        vec![config("x", wait)],
        false,
        true,
        1
    )));
    let fair = vec![LockConfig {
        kind: Kind::FairMutex,
        ..config("x", wait)
    }];
    assert!(invalid(AcquireMany::new(fair, false, false, 1)));
    let exactly = (0..MAX_MANY_NAMES)
        .map(|i| config(&format!("n{i}"), wait))
        .collect();
    assert!(AcquireMany::new(exactly, false, false, 1).is_ok());
}

#[test]
fn one_redis_takes_every_name_in_one_script_and_each_lease_is_a_mutex_lease() {
    let mut m = many(&["b", "c", "a"], Wait::TRY_ONCE, false);
    assert_eq!(m.groups(), 1);
    m.start(at(0));
    let sent = commands(&mut m);
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].script, Script::AcquireMany);
    // Canonical order, not the caller's.
    assert_eq!(
        lock_keys(&sent[0]),
        ["fencelock:{a}", "fencelock:{b}", "fencelock:{c}"]
    );
    assert_eq!(sent[0].args[0], b"10000");
    assert_eq!(sent[0].args[2], b"token-a");
    m.handle_reply(at(3), sent[0].id, set(&[11, 12, 13]));
    let ManyEvent::Acquired(handoffs) = events(&mut m).remove(0) else {
        panic!("not acquired")
    };
    assert!(m.is_done());
    // In the caller's order: b, c, a.
    for (config, (handoff, fence)) in m
        .members()
        .iter()
        .zip(handoffs.into_iter().zip([12, 13, 11]))
    {
        let mut lock = Lock::new(config.clone());
        lock.accept_handoff(at(3), handoff).unwrap();
        assert!(lock.poll_command().is_none(), "no write-back on one node");
        let acquired =
            std::iter::from_fn(|| lock.poll_event()).find(|e| matches!(e, Event::Acquired { .. }));
        assert_eq!(
            acquired,
            Some(Event::Acquired {
                fence,
                // ttl - ttl/100 - 2 from the send at 0.
                valid_until: at(10_000 - 100 - 2),
            })
        );
        assert_eq!(lock.state(), State::Held);
        lock.release(at(4)).unwrap();
        let release = lock.poll_command().unwrap();
        assert_eq!(release.script, Script::Release);
    }
}

#[test]
fn a_cluster_takes_one_group_per_slot_in_slot_order() {
    let (low, high) = two_slots();
    let (s1, s2) = one_slot();
    let mut m = many(&[high, &s2, low, &s1], Wait::TRY_ONCE, true);
    assert_eq!(m.groups(), 3);
    m.start(at(0));
    let mut fence = 100;
    let mut order = Vec::new();
    while !m.is_done() {
        let sent = commands(&mut m);
        assert_eq!(sent.len(), 1, "one group at a time");
        let keys = lock_keys(&sent[0]);
        let slots: Vec<u16> = sent[0].keys.iter().map(|k| hash_slot(k)).collect();
        assert!(
            slots.windows(2).all(|w| w[0] == w[1]),
            "one slot per script"
        );
        order.push((slots[0], keys.clone()));
        let fences: Vec<u64> = keys
            .iter()
            .map(|_| {
                fence += 1;
                fence
            })
            .collect();
        m.handle_reply(at(1), sent[0].id, set(&fences));
    }
    assert!(order.windows(2).all(|w| w[0].0 < w[1].0), "{order:?}");
    assert!(order
        .iter()
        .any(|(_, keys)| keys == &[format!("fencelock:{{{s1}}}"), format!("fencelock:{{{s2}}}")]));
    assert!(matches!(&events(&mut m)[..], [ManyEvent::Acquired(h)] if h.len() == 4));
}

#[test]
fn a_held_group_gives_back_the_groups_taken_before_failing() {
    let (low, high) = two_slots();
    let mut m = many(&[low, high], Wait::TRY_ONCE, true);
    m.start(at(0));
    let first = commands(&mut m).remove(0);
    m.handle_reply(at(1), first.id, set(&[5]));
    let second = commands(&mut m).remove(0);
    m.handle_reply(at(2), second.id, held(700, 1));
    let release = commands(&mut m);
    assert_eq!(release.len(), 1);
    assert_eq!(release[0].script, Script::Release);
    assert_eq!(lock_keys(&release[0])[0], format!("fencelock:{{{low}}}"));
    assert_eq!(release[0].args[0], format!("token-{low}").as_bytes());
    // Not reported before the give-back is answered: the caller finds
    // nothing of ours left when the call returns.
    assert!(events(&mut m).is_empty());
    assert!(!m.is_done());
    m.handle_reply(at(3), release[0].id, Reply::Int(1));
    let failed = events(&mut m);
    assert!(
        matches!(&failed[..], [ManyEvent::Failed(Error::NotAcquired { name, .. })] if name.as_bytes() == high.as_bytes()),
        "{failed:?}"
    );
    assert!(m.is_done());
}

#[test]
fn an_unknown_outcome_gives_back_that_group_too() {
    let (low, high) = two_slots();
    let mut m = many(&[low, high, "x"], Wait::TRY_ONCE, true);
    m.start(at(0));
    let first = commands(&mut m).remove(0);
    m.handle_reply(at(1), first.id, set(&[5]));
    let second = commands(&mut m).remove(0);
    m.handle_reply(at(2), second.id, Reply::Unknown("timed out".into()));
    let releases = commands(&mut m);
    let released: Vec<String> = releases.iter().map(|c| lock_keys(c)[0].clone()).collect();
    let mut expected: Vec<String> = lock_keys(&first)
        .into_iter()
        .chain(lock_keys(&second))
        .collect();
    expected.sort();
    let mut got = released.clone();
    got.sort();
    assert_eq!(got, expected);
    for r in &releases {
        m.handle_reply(at(3), r.id, Reply::Int(0));
    }
    assert!(matches!(
        &events(&mut m)[..],
        [ManyEvent::Failed(Error::Redis { .. })]
    ));
    assert!(
        commands(&mut m).is_empty(),
        "no third group after a failure"
    );
    assert!(m.is_done());
}

#[test]
fn a_script_error_fails_without_a_give_back_of_its_own_group() {
    let mut m = many(&["a", "b"], Wait::TRY_ONCE, false);
    m.start(at(0));
    let attempt = commands(&mut m).remove(0);
    m.handle_reply(at(1), attempt.id, Reply::Error("WRONGTYPE".into()));
    assert!(commands(&mut m).is_empty());
    assert!(matches!(
        &events(&mut m)[..],
        [ManyEvent::Failed(Error::Redis { .. })]
    ));
    assert!(m.is_done());
}

#[test]
fn waiting_listens_to_the_held_name_and_tries_again() {
    let mut m = many(&["a", "b"], Wait::Bounded(Duration::from_secs(5)), false);
    m.start(at(0));
    let attempt = commands(&mut m).remove(0);
    m.handle_reply(at(1), attempt.id, held(300, 2));
    assert_eq!(
        events(&mut m),
        [ManyEvent::Subscribe(b"fencelock:{b}:released".into())]
    );
    assert!(commands(&mut m).is_empty());
    let timeout = m.poll_timeout().unwrap();
    assert!(timeout >= at(301) && timeout <= at(307), "{timeout:?}");
    // A release notification: try again at once.
    m.handle_wakeup(at(50));
    let again = commands(&mut m).remove(0);
    assert_eq!(again.script, Script::AcquireMany);
    m.handle_reply(at(51), again.id, set(&[1, 2]));
    assert!(matches!(&events(&mut m)[..], [ManyEvent::Acquired(_)]));
}

#[test]
fn the_wait_runs_out_with_not_acquired() {
    let mut m = many(
        &["a", "b"],
        Wait::Bounded(Duration::from_millis(100)),
        false,
    );
    m.start(at(0));
    let attempt = commands(&mut m).remove(0);
    m.handle_reply(at(1), attempt.id, held(-1, 1));
    let _ = events(&mut m);
    assert_eq!(m.poll_timeout(), Some(at(100)));
    m.handle_timeout(at(100));
    assert!(matches!(
        &events(&mut m)[..],
        [ManyEvent::Failed(Error::NotAcquired { .. })]
    ));
    assert!(m.is_done());
}

#[test]
fn a_cancel_in_flight_gives_back_what_the_attempt_set() {
    let mut m = many(&["a", "b"], Wait::Forever, false);
    m.start(at(0));
    let attempt = commands(&mut m).remove(0);
    m.cancel(at(1));
    assert!(!m.is_done());
    m.handle_reply(at(2), attempt.id, set(&[1, 2]));
    let releases = commands(&mut m);
    assert_eq!(releases.len(), 2);
    assert!(releases.iter().all(|c| c.script == Script::Release));
    for r in &releases {
        m.handle_reply(at(3), r.id, Reply::Int(1));
    }
    assert!(
        events(&mut m).is_empty(),
        "a cancelled acquire reports nothing"
    );
    assert!(m.is_done());

    // Cancelled while waiting: nothing of ours is set, done at once.
    let mut m = many(&["a", "b"], Wait::Forever, false);
    m.start(at(0));
    let attempt = commands(&mut m).remove(0);
    m.handle_reply(at(1), attempt.id, held(500, 1));
    let _ = events(&mut m);
    m.cancel(at(2));
    assert!(commands(&mut m).is_empty());
    assert!(m.is_done());
}

#[test]
fn an_attempt_waits_for_the_give_back_before_trying_again() {
    let (low, high) = two_slots();
    let mut m = many(&[low, high], Wait::Forever, true);
    m.start(at(0));
    let first = commands(&mut m).remove(0);
    m.handle_reply(at(1), first.id, set(&[5]));
    let second = commands(&mut m).remove(0);
    m.handle_reply(at(2), second.id, held(10, 1));
    let release = commands(&mut m).remove(0);
    m.handle_wakeup(at(3));
    assert!(
        commands(&mut m).is_empty(),
        "the give-back is not answered yet"
    );
    m.handle_reply(at(4), release.id, Reply::Int(1));
    let again = commands(&mut m);
    assert_eq!(again.len(), 1);
    assert_eq!(lock_keys(&again[0]), lock_keys(&first));
}
