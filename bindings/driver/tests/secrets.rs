//! Random passwords through every error path — a malformed URL, a wrong
//! password, an unreachable server, a TLS failure — and a working client's
//! `Debug`: the password, raw or percent-encoded, never appears in an
//! error, a `Debug` output or a log event.

mod common;
#[path = "common/recorder.rs"]
mod recorder;

use std::time::Duration;

use common::*;
use fencelock::{Client, ClientOptions, Error, Pem, TlsOptions};
use recorder::Recorder;

/// Characters that break naive redaction: URL delimiters, `%`, spaces.
const ALPHABET: &[u8] = b"abcdefXYZ0123456789/?#@:%!$&'()*+,;= -._~[]";

/// `n` random passwords of 8..24 characters from the OS CSPRNG (via uuid).
fn passwords(n: usize) -> Vec<String> {
    (0..n)
        .map(|_| {
            let bytes: Vec<u8> = (0..2)
                .flat_map(|_| *uuid::Uuid::new_v4().as_bytes())
                .collect();
            let len = 8 + usize::from(bytes[0]) % 16;
            bytes[1..=len]
                .iter()
                .map(|b| char::from(ALPHABET[usize::from(*b) % ALPHABET.len()]))
                .collect()
        })
        .collect()
}

fn encode(password: &str) -> String {
    password
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() {
                char::from(b).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// The forms a password could leak in.
fn forms(password: &str) -> [String; 2] {
    [password.to_owned(), encode(password)]
}

fn assert_clean(password: &str, text: &str, path: &str) {
    for form in forms(password) {
        assert!(
            !text.contains(&form),
            "{path}: password {password:?} leaked as {form:?} in {text:?}"
        );
    }
}

fn fast() -> ClientOptions {
    ClientOptions {
        connect_timeout: Duration::from_millis(500),
        response_timeout: Duration::from_millis(500),
        ..ClientOptions::default()
    }
}

fn described(result: Result<Client, Error>) -> String {
    match result {
        Ok(client) => format!("{client:?}"),
        Err(e) => format!("{e} | {e:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_passwords_never_leak() {
    let recorder = Recorder::install();
    let server = Server::start();
    let mut down = Server::start();
    let down_port = down.port;
    down.stop();
    let tls_dir =
        std::env::temp_dir().join(format!("fencelock-tls-secrets-{}", std::process::id()));
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../ci/tls.sh");
    assert!(std::process::Command::new("bash")
        .arg(script)
        .arg(&tls_dir)
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap()
        .success());
    let cert = |f: &str| tls_dir.join(f).to_string_lossy().into_owned();
    let tls_port = fencelock_testkit::Port::claim();
    let _tls = Server::start_with(&[
        "--tls-port",
        &tls_port.0.to_string(),
        "--tls-cert-file",
        &cert("server.crt"),
        "--tls-key-file",
        &cert("server.key"),
        "--tls-ca-cert-file",
        &cert("ca.crt"),
        "--tls-auth-clients",
        "no",
    ]);
    let wrong_ca = ClientOptions {
        tls: TlsOptions {
            ca: Some(Pem::File(tls_dir.join("other-ca.crt"))),
            ..TlsOptions::default()
        },
        ..fast()
    };
    let passwords = passwords(40);
    let mut outputs = Vec::new();
    for (i, password) in passwords.iter().enumerate() {
        let enc = encode(password);
        let user = format!("fuzz{i}");
        // The password as typed (often a malformed URL) and as it should be.
        for url in [
            format!("redis://{user}:{password}@127.0.0.1:{}/0", server.port),
            format!("redis://{user}:{password}@127.0.0.1:99999/0"),
            format!("redis://{user}:{password}@127.0.0.1:{}/nodb", server.port),
        ] {
            outputs.push((
                "malformed or raw",
                password,
                described(Client::connect_with(url, fast()).await),
            ));
        }
        // Wrong password (no such user yet), then the right one.
        let url = format!("redis://{user}:{enc}@127.0.0.1:{}/0", server.port);
        outputs.push((
            "wrong password",
            password,
            described(Client::connect_with(url.as_str(), fast()).await),
        ));
        let _: () = redis::cmd("ACL")
            .arg("SETUSER")
            .arg(&user)
            .arg("on")
            .arg(format!(">{password}"))
            .arg("~*")
            .arg("&*")
            .arg("+@all")
            .query(&mut conn(&server.url()))
            .unwrap();
        let client = Client::connect_with(url.as_str(), fast()).await;
        assert!(client.is_ok(), "{user}: {:?}", client.as_ref().err());
        outputs.push(("connected", password, described(client)));
        // Unreachable, TLS failure.
        let url = format!("redis://{user}:{enc}@127.0.0.1:{down_port}/0");
        outputs.push((
            "unreachable",
            password,
            described(Client::connect_with(url, fast()).await),
        ));
        let url = format!("rediss://{user}:{enc}@127.0.0.1:{}/0", tls_port.0);
        outputs.push((
            "tls",
            password,
            described(Client::connect_with(url, wrong_ca.clone()).await),
        ));
        if let Err(e) = fencelock::check_urls(format!("redis://{user}:{password}@h:1/x")) {
            outputs.push(("check_urls", password, format!("{e} | {e:?}")));
        }
    }
    for (path, password, text) in &outputs {
        assert_clean(password, text, path);
    }
    let lines = recorder.lines();
    assert!(!lines.is_empty());
    for line in &lines {
        for password in &passwords {
            assert_clean(password, line, "log");
        }
    }
}
