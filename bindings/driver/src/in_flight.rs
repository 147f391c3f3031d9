//! Running what a core queued in the caller's future (the inline path: an
//! acquire, and its lease's extend and release): every queued command at
//! once, one per node in a Redlock round, with their ids noted while they
//! are in flight, so that a caller dropped meanwhile can tell the core
//! their outcome is unknown.

use fencelock_core::{CommandId, Instant, Lock, Reply};

use crate::clock::now;
use crate::connections::Connections;

/// The commands sent whose replies the core has not had.
#[derive(Debug, Default)]
pub(crate) enum InFlight {
    #[default]
    Idle,
    /// One node, one command: no vector.
    One(CommandId),
    Many(Vec<CommandId>),
}

impl InFlight {
    /// The caller stopped waiting: what was in flight may or may not have
    /// run, and the core is told so (it compensates).
    pub(crate) fn abandon(&mut self, lock: &mut Lock, at: Instant, why: &str) {
        let unknown = || Reply::Unknown(why.into());
        match std::mem::take(self) {
            InFlight::Idle => {}
            InFlight::One(id) => lock.handle_reply(at, id, unknown()),
            InFlight::Many(ids) => ids
                .into_iter()
                .for_each(|id| lock.handle_reply(at, id, unknown())),
        }
    }
}

/// Send what `lock` queued, all at once, and hand it the replies; `false`
/// if nothing was queued. An acquire's commands may retry a connection
/// until `acquire_deadline` (see `Node::run`).
pub(crate) async fn run_queued(
    conns: &Connections,
    lock: &mut Lock,
    in_flight: &mut InFlight,
    acquire_deadline: Option<tokio::time::Instant>,
) -> bool {
    let Some(first) = lock.poll_command() else {
        return false;
    };
    match lock.poll_command() {
        None => {
            *in_flight = InFlight::One(first.id);
            let reply = conns.run_one(&first, acquire_deadline).await;
            *in_flight = InFlight::Idle;
            lock.handle_reply(now(), first.id, reply);
        }
        Some(second) => {
            let mut commands = vec![first, second];
            commands.extend(std::iter::from_fn(|| lock.poll_command()));
            *in_flight = InFlight::Many(commands.iter().map(|c| c.id).collect());
            let runs = commands.iter().map(|c| conns.run_one(c, acquire_deadline));
            let replies = futures_util::future::join_all(runs).await;
            *in_flight = InFlight::Idle;
            let at = now();
            for (command, reply) in commands.iter().zip(replies) {
                lock.handle_reply(at, command.id, reply);
            }
        }
    }
    true
}
