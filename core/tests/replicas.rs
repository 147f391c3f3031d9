//! `replicas=N` (`Lock::require_replicas`): the grant or extension counts
//! only with N replica acknowledgements; too few release the lock and fail
//! the call. The driver pipelines `WAIT` after the script and replies
//! `[script reply, acknowledged]`.

use std::time::Duration;

use fencelock_core::{
    Command, Error, Event, FenceGrace, Instant, KeySpace, Kind, Lock, LockConfig, LockName, Reply,
    RetryPolicy, Script, State, Token, Ttl, Wait, WaitReplicas,
};

fn ms(n: u64) -> Instant {
    Instant::from_epoch(Duration::from_millis(n))
}

fn lock(replicas: u32, auto_renew: bool) -> Lock {
    let name = LockName::new("job").unwrap();
    let mut lock = Lock::new(LockConfig {
        kind: Kind::Mutex,
        keys: KeySpace::default().keys(&name),
        name,
        token: Token("t".into()),
        ttl: Ttl::from_millis(900).unwrap(),
        wait: Wait::Bounded(Duration::from_secs(5)),
        nodes: 1,
        auto_renew,
        max_hold: None,
        retry: RetryPolicy::default(),
        fence_grace: FenceGrace::DEFAULT,
        seed: 7,
    });
    lock.require_replicas(replicas, Duration::from_millis(100));
    lock
}

fn commands(lock: &mut Lock) -> Vec<Command> {
    std::iter::from_fn(|| lock.poll_command()).collect()
}

fn events(lock: &mut Lock) -> Vec<Event> {
    std::iter::from_fn(|| lock.poll_event()).collect()
}

fn with_acks(script: Reply, acks: i64) -> Reply {
    Reply::Array(vec![script, Reply::Int(acks)])
}

fn granted(fence: i64) -> Reply {
    Reply::Array(vec![Reply::Int(1), Reply::Int(fence)])
}

const WAIT_ONE: Option<WaitReplicas> = Some(WaitReplicas {
    replicas: 1,
    timeout_ms: 100,
});

#[test]
fn acknowledged_grant_and_extend_count() {
    let mut l = lock(1, false);
    l.acquire(ms(0)).unwrap();
    let [c] = commands(&mut l).try_into().unwrap();
    assert_eq!((c.script, c.wait_replicas), (Script::Acquire, WAIT_ONE));
    l.handle_reply(ms(2), c.id, with_acks(granted(9), 1));
    assert!(matches!(
        events(&mut l)[..],
        [Event::Acquired { fence: 9, .. }]
    ));
    l.extend(ms(10), None).unwrap();
    let [c] = commands(&mut l).try_into().unwrap();
    assert_eq!((c.script, c.wait_replicas), (Script::Extend, WAIT_ONE));
    l.handle_reply(ms(12), c.id, with_acks(Reply::Int(1), 2));
    assert!(matches!(events(&mut l)[..], [Event::Extended { .. }]));
    l.release(ms(20)).unwrap();
    let [c] = commands(&mut l).try_into().unwrap();
    // A release needs no acknowledgement: nothing to lose by losing it.
    assert_eq!((c.script, c.wait_replicas), (Script::Release, None));
}

#[test]
fn too_few_acknowledgements_release_and_fail_the_acquire() {
    let mut l = lock(2, false);
    l.acquire(ms(0)).unwrap();
    let [c] = commands(&mut l).try_into().unwrap();
    l.handle_reply(ms(2), c.id, with_acks(granted(9), 1));
    // The key is ours but only on one replica: released (waking waiters),
    // and the failure is reported once the release is answered.
    let [release] = commands(&mut l).try_into().unwrap();
    assert_eq!(release.script, Script::Release);
    assert_eq!(release.keys.len(), 2, "the release wakes waiters");
    assert!(events(&mut l).is_empty());
    l.handle_reply(ms(3), release.id, Reply::Int(1));
    match &events(&mut l)[..] {
        [Event::AcquireFailed(e @ Error::NotAcquired { .. })] => {
            let text = e.to_string();
            assert!(text.contains("job"), "{text}");
            assert_eq!(e.reason().map(|r| r.as_str()), Some("replicas"));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(l.state(), State::Done);
}

#[test]
fn a_failed_wait_counts_as_no_acknowledgement() {
    let mut l = lock(1, false);
    l.acquire(ms(0)).unwrap();
    let [c] = commands(&mut l).try_into().unwrap();
    l.handle_reply(
        ms(2),
        c.id,
        Reply::Array(vec![granted(9), Reply::Error("ERR WAIT failed".into())]),
    );
    let [release] = commands(&mut l).try_into().unwrap();
    l.handle_reply(ms(3), release.id, Reply::Int(1));
    assert!(matches!(
        events(&mut l)[..],
        [Event::AcquireFailed(Error::NotAcquired { .. })]
    ));
}

#[test]
fn an_unacknowledged_renewal_loses_the_lease_and_releases_it() {
    let mut l = lock(1, true);
    l.acquire(ms(0)).unwrap();
    let [c] = commands(&mut l).try_into().unwrap();
    l.handle_reply(ms(2), c.id, with_acks(granted(9), 1));
    events(&mut l);
    // Renewal at ttl/3.
    l.handle_timeout(ms(300));
    let [renew] = commands(&mut l).try_into().unwrap();
    assert_eq!(renew.script, Script::Extend);
    l.handle_reply(ms(302), renew.id, with_acks(Reply::Int(1), 0));
    assert_eq!(events(&mut l), vec![Event::Lost]);
    assert!(l.is_lost());
    let [release] = commands(&mut l).try_into().unwrap();
    assert_eq!(release.script, Script::Release);
    l.handle_reply(ms(303), release.id, Reply::Int(1));
    // The caller's release then reports the loss.
    l.release(ms(310)).unwrap();
    for c in commands(&mut l) {
        l.handle_reply(ms(311), c.id, Reply::Int(0));
    }
    assert!(matches!(
        events(&mut l)[..],
        [Event::Released(Err(Error::LockLost { .. }))]
    ));
}

#[test]
fn without_replicas_nothing_waits() {
    let mut l = lock(0, false);
    l.acquire(ms(0)).unwrap();
    let [c] = commands(&mut l).try_into().unwrap();
    assert_eq!(c.wait_replicas, None);
}
