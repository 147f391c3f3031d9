//! `replicas=N`: a script followed by `WAIT N timeout` on the same
//! connection, pipelined (one round trip); the core reads both replies and
//! decides (see the core's `replicas` module).

use fencelock_core::WaitReplicas;
use redis::aio::ConnectionLike;
use redis::{RedisResult, Value};

use crate::topology::Conn;

/// Send `script` alone, or with `WAIT` after it: then the reply is
/// `Array([script reply, WAIT reply])`, each possibly a server error.
pub(crate) async fn send(
    conn: &mut Conn,
    script: redis::Cmd,
    wait: Option<WaitReplicas>,
) -> RedisResult<Value> {
    let Some(wait) = wait else {
        return conn.req_packed_command(&script).await;
    };
    let mut pipe = redis::pipe();
    pipe.add_command(script)
        .cmd("WAIT")
        .arg(wait.replicas)
        .arg(wait.timeout_ms.max(1));
    let values = conn.req_packed_commands(&pipe, 0, 2).await?;
    Ok(Value::Array(values))
}

/// The script was not in the server's cache (`paired`: it was sent with
/// `WAIT`, so its reply is the first of two).
pub(crate) fn is_noscript(result: &RedisResult<Value>, paired: bool) -> bool {
    let server_noscript = |v: &Value| matches!(v, Value::ServerError(e) if e.code() == "NOSCRIPT");
    match result {
        Ok(Value::Array(items)) if paired => items.first().is_some_and(server_noscript),
        Ok(value) => server_noscript(value),
        Err(e) => e.code() == Some("NOSCRIPT"),
    }
}
