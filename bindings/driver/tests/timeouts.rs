//! Honest timeouts: an acquire whose reply does not come reports within the
//! response timeout (not twice it: its compensating release goes on in the
//! background), and `close()` waits for that release.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::*;
use fencelock::{Client, ClientOptions, Error, LockOptions};

/// Stall the server for `secs` (DEBUG SLEEP on a connection of its own),
/// and return once a PING on another connection goes unanswered.
fn stall(port: u16, secs: u32) -> TcpStream {
    let mut sleeper = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let secs = secs.to_string();
    write!(
        sleeper,
        "*3\r\n$5\r\nDEBUG\r\n$5\r\nSLEEP\r\n${}\r\n{secs}\r\n",
        secs.len()
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let mut ping = TcpStream::connect(("127.0.0.1", port)).unwrap();
        ping.set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        ping.write_all(b"PING\r\n").unwrap();
        let mut buf = [0u8; 16];
        if ping.read(&mut buf).is_err() {
            return sleeper; // no answer: the server is asleep
        }
        assert!(Instant::now() < deadline, "the server never stalled");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timed_out_acquire_reports_within_the_response_timeout() {
    // Redis 7 refuses DEBUG unless enabled.
    let server = Server::start_with(&["--enable-debug-command", "yes"]);
    let options = ClientOptions {
        response_timeout: Duration::from_secs(1),
        ..ClientOptions::default()
    };
    let client = Client::connect_with(server.url().as_str(), options)
        .await
        .unwrap();
    let name = unique("stalled");
    let _sleeper = stall(server.port, 3);
    let t = Instant::now();
    let err = client
        .acquire(
            &name,
            &LockOptions::new(Duration::from_secs(30)).wait(Duration::ZERO),
        )
        .await
        .unwrap_err();
    let reported = t.elapsed();
    assert!(matches!(err, Error::Redis { .. }), "{err:?}");
    assert!(reported >= Duration::from_millis(900), "{reported:?}");
    // Not doubled by the compensating release's own timeout.
    assert!(reported < Duration::from_millis(1600), "{reported:?}");
    // close() waits for the compensating release (answered or timed out).
    client.close().await;
    assert!(
        t.elapsed() >= Duration::from_millis(1900),
        "{:?}",
        t.elapsed()
    );
    // The server runs the acquire and then the release once it wakes: the
    // lock is not left held.
    eventually(
        Duration::from_secs(5),
        "the compensating release ran",
        || !exists(&server.url(), &keys(&name).lock()),
    )
    .await;
}
