//! `Client::acquire_many`: several mutexes, all or nothing ([`LockGroup`]).
//!
//! One task drives the core's [`AcquireMany`] (commands out, replies,
//! release notifications and timeouts in) and, when every name is set,
//! starts one ordinary lease actor per name from the core's handoff: each
//! name is then a mutex [`Lease`] like any other (extend, release,
//! auto-renewal, loss). Dropping the acquire future cancels: the task gives
//! back whatever the attempt in flight set; leases granted but never
//! claimed are released by their actors.

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use fencelock_core::{AcquireMany, Error, LockName, ManyEvent, Operation, Wait};
use futures_util::stream::{FuturesUnordered, StreamExt};
use tokio::sync::{oneshot, watch};

use crate::clock::{now, to_tokio};
use crate::connections::Connections;
use crate::lease::{Granted, Lease};
use crate::notify::Subscription;
use crate::{Client, LockOptions};

/// Several mutex leases taken together by [`Client::acquire_many`], in the
/// order the names were given. Each is an ordinary [`Lease`] (its own fence,
/// extend, release, auto-renewal and loss).
pub struct LockGroup {
    leases: Vec<Lease>,
}

impl fmt::Debug for LockGroup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(&self.leases).finish()
    }
}

impl LockGroup {
    /// The leases, in the order the names were given.
    pub fn leases(&self) -> &[Lease] {
        &self.leases
    }

    /// The lease of `name`, if it is one of the group's.
    pub fn get(&self, name: impl AsRef<[u8]>) -> Option<&Lease> {
        self.leases.iter().find(|l| l.name() == name.as_ref())
    }

    /// The leases, taken out of the group.
    pub fn into_leases(self) -> Vec<Lease> {
        self.leases
    }

    /// Whether any lease of the group is lost.
    pub fn lost(&self) -> bool {
        self.leases.iter().any(Lease::lost)
    }

    /// Release every lease (all at once). If one was lost (or Redis
    /// failed), the others are still released and that error is returned
    /// (`LockLost` before any other). Released already: `Ok`.
    pub async fn release(&self) -> Result<(), Error> {
        Self::release_leases(self.leases.iter()).await
    }

    /// [`LockGroup::release`] for leases held apart from their group (the
    /// bindings' lease objects).
    pub async fn release_leases<'a>(
        leases: impl IntoIterator<Item = &'a Lease>,
    ) -> Result<(), Error> {
        let results = futures_util::future::join_all(leases.into_iter().map(Lease::release)).await;
        let mut first: Option<Error> = None;
        for result in results {
            if let Err(e) = result {
                match (&first, &e) {
                    (None, _) | (Some(Error::Redis { .. }), Error::LockLost { .. }) => {
                        first = Some(e)
                    }
                    _ => {}
                }
            }
        }
        first.map_or(Ok(()), Err)
    }
}

/// A group granted but not yet claimed by its caller (the bindings'): its
/// leases are released by their actors if it is dropped unclaimed.
pub struct GrantedGroup(Vec<Granted>);

impl fmt::Debug for GrantedGroup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("GrantedGroup")
    }
}

impl GrantedGroup {
    /// The caller has really taken the group.
    pub fn claim(self) -> LockGroup {
        LockGroup {
            leases: self.0.into_iter().map(Granted::claim).collect(),
        }
    }
}

impl Client {
    /// Acquire every one of `names` (at most 64, no name twice), all or
    /// nothing, waiting as `options` allow (`NotAcquired` when the wait runs
    /// out; nothing of the group is left held then). On a single Redis one
    /// round trip takes them all; on a Redis Cluster one per slot, in a
    /// fixed order every client follows, so overlapping groups cannot
    /// deadlock. Not with Redlock or `replicas` (`InvalidArgument`).
    /// Dropping the future leaves no lock behind.
    pub async fn acquire_many<N: AsRef<[u8]>>(
        &self,
        names: impl IntoIterator<Item = N>,
        options: &LockOptions,
    ) -> Result<LockGroup, Error> {
        let names = names
            .into_iter()
            .map(LockName::new)
            .collect::<Result<Vec<_>, _>>()?;
        let group = self.acquire_many_named(names, options, false).await?;
        Ok(group.expect("a waiting acquire is never None").claim())
    }

    /// One attempt of [`Client::acquire_many`]: `Ok(None)` if any of the
    /// names is held by someone else (nothing of the group is then held).
    pub async fn try_acquire_many<N: AsRef<[u8]>>(
        &self,
        names: impl IntoIterator<Item = N>,
        options: &LockOptions,
    ) -> Result<Option<LockGroup>, Error> {
        let names = names
            .into_iter()
            .map(LockName::new)
            .collect::<Result<Vec<_>, _>>()?;
        let group = self.acquire_many_named(names, options, true).await?;
        Ok(group.map(GrantedGroup::claim))
    }

    /// [`Client::acquire_many`] (or, if `try_once`, the try variant) for
    /// validated names, resolving to a group still to be claimed (the
    /// bindings'). The arguments are checked in this call.
    pub fn acquire_many_named(
        &self,
        names: Vec<LockName>,
        options: &LockOptions,
        try_once: bool,
    ) -> impl Future<Output = Result<Option<GrantedGroup>, Error>> + Send + 'static {
        let started = self.start_many(names, options, try_once);
        async move {
            let rx = started?;
            match rx.await {
                Ok(Ok(group)) => Ok(Some(group)),
                Ok(Err(Error::NotAcquired { .. })) if try_once => Ok(None),
                Ok(Err(e)) => Err(e),
                Err(_) => Err(Error::redis(None, "the lock driver stopped unexpectedly")),
            }
        }
    }

    fn start_many(
        &self,
        names: Vec<LockName>,
        options: &LockOptions,
        try_once: bool,
    ) -> Result<oneshot::Receiver<Result<GrantedGroup, Error>>, Error> {
        let wait = if try_once {
            Wait::TRY_ONCE
        } else {
            options.wait
        };
        if options.is_fair() {
            return Err(Error::invalid(
                "acquire_many takes plain mutexes: fair is not supported",
            ));
        }
        let first = names
            .first()
            .ok_or_else(|| Error::invalid("acquire_many needs at least one lock name"))?;
        let conns = self.connections(first, Operation::Acquire)?;
        let members = names
            .into_iter()
            .map(|name| self.lock_config(fencelock_core::Kind::Mutex, name, options, wait, &conns))
            .collect::<Result<Vec<_>, _>>()?;
        let seed = members[0].seed;
        let many = AcquireMany::new(members, self.is_cluster(), conns.replicas.0 > 0, seed)?;
        let (reply, rx) = oneshot::channel();
        let actors = conns.actors.clone();
        actors.spawn_on(run(self.clone(), conns, many, reply), self.runtime());
        Ok(rx)
    }
}

type Caller = oneshot::Sender<Result<GrantedGroup, Error>>;

/// The task's body: the core's run loop, then the leases' hand-over.
async fn run(client: Client, conns: Arc<Connections>, mut many: AcquireMany, reply: Caller) {
    let mut reply = Some(reply);
    let mut closed = conns.closed.subscribe();
    let give_up = watch::Sender::new(false);
    let deadline = match many.members()[0].wait {
        Wait::Bounded(d) => tokio::time::Instant::now().checked_add(d),
        Wait::Forever => None,
    };
    let mut inflight = FuturesUnordered::new();
    let mut subscription: Option<Subscription> = None;
    let mut sleep = Box::pin(tokio::time::sleep_until(tokio::time::Instant::now()));
    if *closed.borrow_and_update() {
        let error = Error::closed(many.names().next().expect("one name"), Operation::Acquire);
        let _ = reply.take().expect("not answered").send(Err(error));
        return;
    }
    many.start(now());
    loop {
        while let Some(command) = many.poll_command() {
            let node = conns.nodes[command.node].clone();
            let retry_until = node.retry_bound(&command, deadline, conns.nodes.len());
            let give_up = give_up.subscribe();
            inflight.push(async move {
                let reply = node.run(&command, retry_until, give_up).await;
                (command.id, reply)
            });
        }
        while let Some(event) = many.poll_event() {
            match event {
                ManyEvent::Subscribe(channel) => {
                    subscription = Some(conns.notifier.subscribe(&channel));
                }
                ManyEvent::Failed(error) => {
                    if let Some(caller) = reply.take() {
                        let _ = caller.send(Err(error));
                    }
                }
                ManyEvent::Acquired(handoffs) => {
                    subscription = None;
                    let caller = reply.take();
                    hand_over(&client, &conns, &many, handoffs, caller).await;
                }
            }
        }
        if many.is_done() && inflight.is_empty() {
            break;
        }
        let timeout = many.poll_timeout();
        if let Some(at) = timeout {
            sleep.as_mut().reset(to_tokio(at));
        }
        let waiter = subscription.as_ref().map(Subscription::waiter);
        let caller_waits = reply.is_some();
        tokio::select! {
            biased;
            Some((id, answer)) = inflight.next(), if !inflight.is_empty() => {
                many.handle_reply(now(), id, answer);
            }
            () = async { waiter.expect("guarded").notify.notified().await }, if waiter.is_some() => {
                many.handle_wakeup(now());
            }
            () = sleep.as_mut(), if timeout.is_some() => many.handle_timeout(now()),
            () = async { reply.as_mut().expect("guarded").closed().await }, if caller_waits => {
                reply = None;
                give_up.send_replace(true);
                many.cancel(now());
            }
            changed = closed.changed(), if caller_waits => {
                if changed.is_err() || *closed.borrow() {
                    let name = many.names().next().expect("one name").clone();
                    let _ = reply.take().expect("guarded").send(Err(Error::closed(&name, Operation::Acquire)));
                    give_up.send_replace(true);
                    many.cancel(now());
                }
            }
        }
    }
}

/// Every name is set: start each name's lease actor from its handoff and
/// hand the group to the caller (or, if it left, drop it: the actors then
/// release every lease).
async fn hand_over(
    client: &Client,
    conns: &Arc<Connections>,
    many: &AcquireMany,
    handoffs: Vec<fencelock_core::Handoff>,
    caller: Option<Caller>,
) {
    let granting = many
        .members()
        .iter()
        .zip(handoffs)
        .map(|(config, handoff)| {
            // Taken already: the actor never waits, and a handoff its lock
            // does not grant (validity gone) gives up after one attempt.
            let mut config = config.clone();
            config.wait = Wait::TRY_ONCE;
            client.adopt(Arc::clone(conns), config, handoff)
        })
        .collect::<Vec<_>>();
    let results = futures_util::future::join_all(granting).await;
    let mut granted = Vec::with_capacity(results.len());
    let mut failure = None;
    for result in results {
        match result {
            Ok(g) => granted.push(g),
            Err(e) => failure = failure.or(Some(e)),
        }
    }
    let Some(caller) = caller else { return };
    let _ = match failure {
        // Dropping the others releases them: all or nothing.
        Some(e) => caller.send(Err(e)),
        None => caller.send(Ok(GrantedGroup(granted))),
    };
}
