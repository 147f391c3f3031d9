//! The answers of a one-shot operation sent to every node (inspect, force
//! release): at least a majority must answer, otherwise the operation fails
//! with a `Redis` error that says which nodes failed and why.

use crate::{Error, LockName};

/// The answers, if a majority of `nodes` gave one.
pub(crate) fn answers<T>(
    name: &LockName,
    nodes: usize,
    views: Vec<Result<T, Error>>,
) -> Result<Vec<T>, Error> {
    let quorum = nodes / 2 + 1;
    let mut answered = Vec::with_capacity(views.len());
    let mut errors = Vec::new();
    for view in views {
        match view {
            Ok(view) => answered.push(view),
            Err(e) => errors.push(e),
        }
    }
    if answered.len() >= quorum {
        return Ok(answered);
    }
    Err(if nodes == 1 {
        errors
            .pop()
            .unwrap_or_else(|| Error::redis(Some(name), "no reply"))
    } else {
        let reasons: Vec<String> = errors
            .iter()
            .map(|e| match e {
                Error::Redis { message, .. } => message.clone(),
                other => other.to_string(),
            })
            .collect();
        Error::redis(
            Some(name),
            format!(
                "only {} of {nodes} Redis nodes answered, {quorum} needed: {}",
                answered.len(),
                reasons.join("; ")
            ),
        )
    })
}
