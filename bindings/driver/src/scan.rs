//! Listing's IO: the core's `SCAN` ([`Listing`]) walked to the end on one
//! node — on every primary of a cluster, each with its own cursor. Never
//! `KEYS`, which blocks the server for the whole keyspace.

use fencelock_core::{Error, Listing, LockName, Reply};
use redis::{RedisResult, Value};

use crate::connection::Node;

/// Every matching lock name on `node` (a name may repeat: a `SCAN` may
/// return a key twice). A failure on any of its servers fails the walk:
/// a cluster's primaries each hold a share of the keys.
pub(crate) async fn walk(node: &Node, listing: &Listing) -> Result<Vec<LockName>, Error> {
    let mut conn = node.conn();
    let first = command(listing, &Listing::first_cursor());
    let answers = conn
        .on_every_primary(&first)
        .await
        .map_err(|e| failed(node, listing, &e))?;
    let walks = answers.into_iter().map(|(server, answer)| {
        let mut conn = node.conn();
        async move {
            let mut page = listing.read(reply(node, answer))?;
            let mut names = std::mem::take(&mut page.names);
            while let Some(cursor) = page.next {
                let answer = conn.on(&server, &command(listing, &cursor)).await;
                page = listing.read(reply(node, answer))?;
                names.append(&mut page.names);
            }
            Ok::<_, Error>(names)
        }
    });
    let mut names = Vec::new();
    for walked in futures_util::future::join_all(walks).await {
        names.extend(walked?);
    }
    Ok(names)
}

fn command(listing: &Listing, cursor: &[u8]) -> redis::Cmd {
    let words = listing.command(cursor);
    let mut cmd = redis::Cmd::with_capacity(words.len(), words.iter().map(Vec::len).sum());
    for word in words {
        cmd.arg(word);
    }
    cmd
}

fn failed(node: &Node, listing: &Listing, e: &redis::RedisError) -> Error {
    Error::redis(Some(listing.pattern().as_name()), node.describe(e))
}

/// A `SCAN` answer for the core (which reads its shape): errors as
/// `Reply::Error`, described without the node's password.
fn reply(node: &Node, answer: RedisResult<Value>) -> Reply {
    match answer {
        Ok(value) => value_reply(value),
        Err(e) => Reply::Error(node.describe(&e)),
    }
}

fn value_reply(value: Value) -> Reply {
    match value {
        Value::BulkString(bytes) => Reply::Bulk(bytes),
        Value::SimpleString(text) => Reply::Bulk(text.into_bytes()),
        Value::Int(n) => Reply::Int(n),
        Value::Nil => Reply::Nil,
        Value::Array(items) | Value::Set(items) => {
            Reply::Array(items.into_iter().map(value_reply).collect())
        }
        Value::ServerError(e) => {
            Reply::Error(format!("{} {}", e.code(), e.details().unwrap_or("")))
        }
        other => Reply::Error(format!("unexpected reply to SCAN: {other:?}")),
    }
}
