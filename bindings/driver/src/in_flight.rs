//! Running what a core queued in the caller's future (the inline path: an
//! acquire, and its lease's extend and release): every queued command at
//! once, one per node in a Redlock round, with their ids noted while they
//! are in flight, so that a caller dropped meanwhile can tell the core
//! their outcome is unknown. The caller waits only for the replies the
//! core awaits.

use std::sync::Arc;

use fencelock_core::{CommandId, Instant, Lock, Reply};
use futures_util::stream::{FuturesUnordered, StreamExt};

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

/// Send what `lock` queued, all at once, and hand it the replies as they
/// come; `false` if nothing was queued. An acquire's commands may retry a
/// connection until `acquire_deadline` (see `Node::run`). Once the core
/// awaits none of the commands left (a Redlock round a majority decided),
/// this returns, and they finish in a task of the client's: sent already,
/// they run on their nodes all the same.
pub(crate) async fn run_queued(
    conns: &Arc<Connections>,
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
            let mut unanswered: Vec<CommandId> = commands.iter().map(|c| c.id).collect();
            *in_flight = InFlight::Many(unanswered.clone());
            // Each future owns its command, so that the rest can move to a task.
            let mut replies: FuturesUnordered<_> = commands
                .into_iter()
                .map(|command| {
                    let conns = Arc::clone(conns);
                    async move {
                        let reply = conns.run_one(&command, acquire_deadline).await;
                        (command.id, reply)
                    }
                })
                .collect();
            while let Some((id, reply)) = replies.next().await {
                unanswered.retain(|&other| other != id);
                lock.handle_reply(now(), id, reply);
                if !unanswered.iter().any(|&id| lock.awaits(id)) {
                    break;
                }
            }
            *in_flight = InFlight::Idle;
            if !replies.is_empty() {
                conns
                    .actors
                    .spawn(async move { while replies.next().await.is_some() {} });
            }
        }
    }
    true
}
