//! Redis URL parsing and redaction: the only place that sees a URL's password.
//!
//! Every message, log line and `Debug` output uses [`redact`]ed URLs, so a
//! password never leaves this module except inside redis-rs's connection info.

use fencelock_core::Error;
use redis::{ConnectionInfo, IntoConnectionInfo};

/// One parsed node address: what to connect with and how to name it.
#[derive(Clone)]
pub(crate) struct NodeUrl {
    pub info: ConnectionInfo,
    /// The URL with its password replaced by `***`, for messages and logs.
    pub redacted: String,
    /// The password, kept only to scrub it from any error text we pass on.
    pub password: Option<String>,
    /// `rediss://` (TLS).
    pub tls: bool,
    /// The URL chose the protocol (`?protocol=resp2|resp3`); otherwise the
    /// driver picks RESP3 (see `connection.rs`).
    pub protocol_given: bool,
}

/// `redis://user:secret@host:6379/0` -> `redis://user:***@host:6379/0`.
///
/// Works on malformed input too (it never parses): everything between the
/// scheme and the LAST `@` of the URL is userinfo, because a password may
/// hold `/`, `?`, `#`, `:` or `@` unencoded; its password part (or all of
/// it, when there is no `:`) is masked. Masking too much (an `@` in a query)
/// beats showing a secret. A `pass=` / `password=` query parameter
/// (unix-socket URLs) is masked too.
pub(crate) fn redact(url: &str) -> String {
    let (scheme, rest) = match url.find("://") {
        Some(at) => url.split_at(at + 3),
        None => ("", url),
    };
    match rest.rfind('@') {
        Some(at) => {
            let (userinfo, tail) = rest.split_at(at);
            let user = match userinfo.find(':') {
                Some(colon) => format!("{}:***", &userinfo[..colon]),
                None if userinfo.is_empty() => String::new(),
                None => "***".to_owned(),
            };
            format!("{scheme}{user}{}", redact_query_password(tail))
        }
        None => format!("{scheme}{}", redact_query_password(rest)),
    }
}

fn redact_query_password(tail: &str) -> String {
    let Some(q) = tail.find('?') else {
        return tail.to_owned();
    };
    let (path, query) = tail.split_at(q + 1);
    let (query, fragment) = match query.find('#') {
        Some(h) => query.split_at(h),
        None => (query, ""),
    };
    let parts: Vec<String> = query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((k, _))
                if k.eq_ignore_ascii_case("pass") || k.eq_ignore_ascii_case("password") =>
            {
                format!("{k}=***")
            }
            _ => pair.to_owned(),
        })
        .collect();
    format!("{path}{}{fragment}", parts.join("&"))
}

/// Parse one URL (`redis://`, `rediss://`, `user:password@`, `/db`,
/// `?protocol=resp3`, `redis+unix://`). Malformed input is `InvalidArgument`
/// naming the redacted URL.
pub(crate) fn parse(url: &str) -> Result<NodeUrl, Error> {
    let redacted = redact(url);
    let trimmed = url.trim();
    if trimmed.is_empty() {
        return Err(Error::invalid("Redis URL must not be empty"));
    }
    if !trimmed.contains("://") {
        return Err(Error::invalid(format!(
            "invalid Redis URL {redacted:?}: expected redis://[user:password@]host[:port][/db] or rediss://..."
        )));
    }
    let info = trimmed.into_connection_info().map_err(|e| {
        // redis-rs's URL errors carry a description and at most the bad
        // protocol value, never the URL itself; scrub anyway.
        let reason = scrub(&e.to_string(), None);
        Error::invalid(format!("invalid Redis URL {redacted:?}: {reason}"))
    })?;
    let password = info.redis_settings().password().map(str::to_owned);
    let tls = matches!(info.addr(), redis::ConnectionAddr::TcpTls { .. });
    let protocol_given = trimmed
        .split_once('?')
        .map(|(_, query)| query.split('#').next().unwrap_or(""))
        .is_some_and(|query| {
            query.split('&').any(|pair| {
                pair.split('=')
                    .next()
                    .is_some_and(|k| k.eq_ignore_ascii_case("protocol"))
            })
        });
    Ok(NodeUrl {
        info,
        tls,
        protocol_given,
        redacted,
        password: password.filter(|p| !p.is_empty()),
    })
}

/// Remove a secret from a message before it goes anywhere.
pub(crate) fn scrub(message: &str, secret: Option<&str>) -> String {
    match secret {
        Some(secret) if !secret.is_empty() && message.contains(secret) => {
            message.replace(secret, "***")
        }
        _ => message.to_owned(),
    }
}

/// Every node URL of one client: at least one, each well-formed, no node
/// twice (the same node would vote against itself in Redlock).
pub(crate) fn parse_all(urls: &[String]) -> Result<Vec<NodeUrl>, Error> {
    if urls.is_empty() {
        return Err(Error::invalid("at least one Redis URL is required"));
    }
    let parsed = urls
        .iter()
        .map(|u| parse(u))
        .collect::<Result<Vec<_>, _>>()?;
    for (i, url) in parsed.iter().enumerate() {
        if parsed[..i]
            .iter()
            .any(|earlier| earlier.info.addr() == url.info.addr())
        {
            return Err(Error::invalid(format!(
                "Redis node {:?} is listed twice; Redlock needs independent nodes",
                url.redacted
            )));
        }
    }
    Ok(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_passwords() {
        assert_eq!(redact("redis://u:pw@h:1/0"), "redis://u:***@h:1/0");
        assert_eq!(redact("redis://:pw@h"), "redis://:***@h");
        assert_eq!(redact("redis://pw@h"), "redis://***@h");
        assert_eq!(redact("redis://h:6379/2"), "redis://h:6379/2");
        assert_eq!(redact("rediss://u:p@w@h"), "rediss://u:***@h");
        assert_eq!(
            redact("redis+unix:///tmp/r.sock?db=1&pass=pw"),
            "redis+unix:///tmp/r.sock?db=1&pass=***"
        );
        assert_eq!(redact("not a url :pw@"), "not a url :***@");
        // Delimiters inside the password (issue: the redaction stopped at
        // the first `/`, `?` or `#` before the `@`).
        for password in ["ab/S3cr3t", "a?b", "a#b", "a@b", "a:b", "a%2Fb", "/?#@:"] {
            let url = format!("redis://locker:{password}@127.0.0.1:6508/0");
            assert_eq!(redact(&url), "redis://locker:***@127.0.0.1:6508/0", "{url}");
        }
    }

    #[test]
    fn malformed_urls_are_invalid_arguments_without_the_password() {
        for bad in [
            "",
            "localhost:6379",
            "http://u:hunter2@h:1",
            "redis://u:hunter2@h:1/notadb",
            "redis://u:hunter2@h:99999",
            "redis://u:hunter2@h:1/?protocol=resp9",
        ] {
            match parse(bad) {
                Err(Error::InvalidArgument(m)) => assert!(!m.contains("hunter2"), "{m}"),
                Err(other) => panic!("{bad}: {other:?}"),
                Ok(_) => panic!("{bad} parsed"),
            }
        }
        let ok = parse("redis://u:hunter2@127.0.0.1:6379/3").unwrap();
        assert_eq!(ok.redacted, "redis://u:***@127.0.0.1:6379/3");
        assert_eq!(ok.info.redis_settings().db(), 3);
        assert_eq!(ok.password.as_deref(), Some("hunter2"));
        assert!(!ok.protocol_given);
    }

    #[test]
    fn an_explicit_protocol_is_kept() {
        for (url, given) in [
            ("redis://h:1/0", false),
            ("redis://h:1/0?protocol=resp2", true),
            ("redis://h:1/?db=2&protocol=resp3", true),
            ("redis://h:1/0#protocol=resp2", false),
        ] {
            assert_eq!(parse(url).unwrap().protocol_given, given, "{url}");
        }
    }
}
