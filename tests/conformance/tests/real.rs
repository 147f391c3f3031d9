//! commands.json's `real` scenarios through the Rust driver (crate
//! `fencelock`) against a real redis-server, like Python and Node do: run
//! each scenario, capture MONITOR, compare the script calls (token masked),
//! the outcomes and the final keys. The harness's server when
//! FENCELOCK_TEST_REDIS_URL is set, else a private one.

use std::time::Duration;

use fencelock::{Acquire, Client, ClientOptions, Error, Kind, Lease, LockOptions};
use fencelock_conformance::{bytes, is_token, kind_of, resolve, script_calls, vectors};
use fencelock_testkit::resp::{Conn, Value as Resp};
use fencelock_testkit::{redis_url, Monitor};
use serde_json::Value;

/// (script name, KEYS, ARGV) of one script call.
type Call = (String, Vec<Vec<u8>>, Vec<Vec<u8>>);

fn raw_cmd(raw: &mut Conn, cmd: &Value, sc: &Value) {
    let args: Vec<Vec<u8>> = cmd
        .as_array()
        .unwrap()
        .iter()
        .map(|a| resolve(a, sc))
        .collect();
    let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
    let reply = raw.cmd(&refs);
    assert!(!matches!(reply, Resp::Error(_)), "{cmd}: {reply:?}");
}

fn outcome(result: Result<(), Error>) -> Value {
    match result {
        Ok(()) => Value::from("ok"),
        Err(e) => {
            let kind = match e {
                Error::NotAcquired { .. } => "NotAcquired",
                Error::LockLost { .. } => "LockLost",
                Error::Redis { .. } => "Redis",
                Error::Closed { .. } => "Closed",
                Error::StaleFence { .. } => "StaleFence",
                Error::InvalidArgument(_) => "InvalidArgument",
            };
            match e.reason() {
                Some(reason) => serde_json::json!({"error": kind, "reason": reason.as_str()}),
                None => serde_json::json!({"error": kind}),
            }
        }
    }
}

/// An acquire's outcome in the vectors' notation (with the validity, which
/// the outcome step checks); the lease is kept.
fn acquired(result: Result<Lease, Error>, lease: &mut Option<Lease>) -> Value {
    match result {
        Ok(l) => {
            let v = serde_json::json!({"acquired": l.fence().to_string(), "validity": l.valid_for().as_millis() as u64});
            *lease = Some(l);
            v
        }
        Err(e) => outcome(Err(e)),
    }
}

fn token_of(lease: &Option<Lease>) -> Option<Vec<u8>> {
    lease.as_ref().map(|l| l.token().as_bytes().to_vec())
}

/// The scenario's acquire, through the handle its primitive has.
async fn acquire(client: &Client, sc: &Value, lock: &LockOptions) -> Result<Lease, Error> {
    let name = bytes(&sc["lock_name"]);
    match kind_of(sc) {
        Kind::Mutex => client.acquire(name, lock).await,
        Kind::FairMutex => client.acquire(name, &lock.clone().fair(true)).await,
        Kind::Semaphore(permits) => client.semaphore(name, permits.get())?.acquire(lock).await,
        Kind::Read => client.rw_lock(name)?.read(lock).await,
        Kind::Write => client.rw_lock(name)?.write(lock).await,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_scenarios_send_exactly_the_vectors_commands() {
    let doc = vectors("commands.json");
    let scripts: Vec<(String, String)> = doc["scripts"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(name, sha)| (name.clone(), sha.as_str().unwrap().to_owned()))
        .collect();
    let (url, _server) = redis_url();
    let real: Vec<&Value> = doc["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["real"] == true)
        .collect();
    assert!(real.len() >= 5);
    for sc in real {
        let title = sc["name"].as_str().unwrap();
        let mut raw = Conn::connect(&url);
        for cmd in sc["setup"].as_array().unwrap() {
            raw_cmd(&mut raw, cmd, sc);
        }
        let monitor = Monitor::start(&url);
        let options = ClientOptions {
            prefix: sc["prefix"].as_str().unwrap().to_owned(),
            ..ClientOptions::default()
        };
        let client = Client::connect_with(url.as_str(), options).await.unwrap();
        let ttl = Duration::from_nanos((sc["ttl_ms"].as_f64().unwrap() * 1e6) as u64);
        let mut lock = LockOptions::new(ttl);
        if let Some(wait) = sc["wait_ms"].as_u64() {
            lock = lock.wait(Duration::from_millis(wait));
        }
        // The scenario's lease [0] and, in handoff scenarios, the waiter [1]
        // of the same client: its acquire lines up inside the call, and is
        // awaited at its outcome step.
        let mut leases: [Option<Lease>; 2] = [None, None];
        let mut waiting: Option<Acquire> = None;
        let mut got = [Value::Null, Value::Null];
        let mut expected: Vec<Call> = Vec::new();
        for step in sc["steps"].as_array().unwrap() {
            let at = format!("{title}: {step}");
            let who = usize::from(step["lease"] == "waiter");
            if let Some(call) = step["call"].as_str() {
                got[who] = match call {
                    // The waiter (a mutex lease) lines up inside the call.
                    "acquire" if who == 1 => {
                        waiting = Some(client.acquire(bytes(&sc["lock_name"]), &lock));
                        continue;
                    }
                    "acquire" => acquired(acquire(&client, sc, &lock).await, &mut leases[0]),
                    "extend" => {
                        let ttl = step["ttl_ms"].as_u64().map(Duration::from_millis);
                        outcome(leases[who].as_ref().unwrap().extend(ttl).await)
                    }
                    "release" => outcome(leases[who].as_ref().unwrap().release().await),
                    other => panic!("{at}: unknown call {other}"),
                };
            } else if let Some(sent) = step.get("sent") {
                for c in sent.as_array().unwrap() {
                    expected.push((
                        c["script"].as_str().unwrap().to_owned(),
                        c["keys"]
                            .as_array()
                            .unwrap()
                            .iter()
                            .map(|k| resolve(k, sc))
                            .collect(),
                        c["args"]
                            .as_array()
                            .unwrap()
                            .iter()
                            .map(|a| resolve(a, sc))
                            .collect(),
                    ));
                }
            } else if let Some(external) = step.get("external") {
                for cmd in external.as_array().unwrap() {
                    raw_cmd(&mut raw, cmd, sc);
                }
            } else if let Some(want) = step.get("outcome").filter(|o| !o.is_null()) {
                if who == 1 {
                    if let Some(waiter) = waiting.take() {
                        got[1] = acquired(waiter.await, &mut leases[1]);
                    }
                }
                let mut got = got[who].clone();
                if let (Some(limit), Some(o)) = (want.get("valid_until_ms"), got.as_object_mut()) {
                    let validity = o.remove("validity").unwrap().as_u64().unwrap();
                    assert!(
                        validity > 0 && validity <= limit.as_u64().unwrap(),
                        "{at}: validity {validity}"
                    );
                    o.insert("valid_until_ms".into(), limit.clone());
                } else if let Some(o) = got.as_object_mut() {
                    o.remove("validity");
                }
                assert_eq!(&got, want, "{at}");
            }
        }
        client.close().await;
        monitor.sync();
        let (lock_key, fence_key) = (bytes(&sc["keys"]["lock"]), bytes(&sc["keys"]["fence"]));
        let calls: Vec<_> = script_calls(&monitor.seen(), &scripts)
            .into_iter()
            .filter(|c| c.keys[0] == lock_key || c.keys[0] == fence_key)
            .collect();
        // Each lease's token is its placeholder (a failed first acquire's too).
        let tokens: Vec<(Option<Vec<u8>>, &[u8])> = vec![
            (token_of(&leases[0]), b"$token"),
            (token_of(&leases[1]), b"$waiter_token"),
        ];
        let masked: Vec<Call> = calls
            .into_iter()
            .map(|c| {
                let mut args = c.args;
                if c.script != "raise_fence" {
                    for arg in args.iter_mut().filter(|a| is_token(a)) {
                        let (_, mask) = tokens
                            .iter()
                            .find(|(t, _)| t.as_deref() == Some(arg.as_slice()))
                            .or_else(|| tokens[0].0.is_none().then_some(&tokens[0]))
                            .unwrap_or_else(|| panic!("{title}: a token of no lease"));
                        *arg = mask.to_vec();
                    }
                    assert!(
                        args[0] == b"$token" || args[0] == b"$waiter_token",
                        "{title}: the first argument is a lease's token (a UUID v4)"
                    );
                }
                (c.script, c.keys, args)
            })
            .collect();
        assert!(
            masked == expected,
            "{title}: script calls differ:\n got {masked:?}\nwant {expected:?}"
        );
        for (key, value) in sc["final"].as_object().into_iter().flatten() {
            let got = raw.cmd(&[b"GET", &resolve(&Value::from(key.as_str()), sc)]);
            let want = Resp::Bulk(value.as_str().map(|v| v.as_bytes().to_vec()));
            assert_eq!(got, want, "{title}: final {key}");
        }
    }
}
