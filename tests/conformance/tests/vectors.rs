//! tests/vectors/*.json against fencelock-core: the key layout, argument
//! validation, and the exact commands and outcomes of each scenario with
//! scripted replies. Python and Node check the same files through their own
//! front ends (tests/python, tests/node).

use std::time::Duration;

use fencelock_conformance::{bytes, kind_of, number, vectors};
use fencelock_core::keys::hash_slot;
use fencelock_core::{
    Command, Error, Event, FenceGrace, FencedWrite, Instant, KeySpace, Listing, Lock, LockConfig,
    LockName, NamePattern, Reply, RetryPolicy, Script, Successor, Token, Ttl, Wait, Writer,
};
use serde_json::Value;

#[test]
fn keys_follow_the_documented_layout() {
    let doc = vectors("keys.json");
    let cases = doc["cases"].as_array().unwrap();
    assert!(cases.len() >= 20);
    for case in cases {
        let why = case["why"].as_str().unwrap();
        let space = KeySpace::new(case["prefix"].as_str().unwrap()).unwrap();
        let keys = space.keys(&LockName::new(bytes(&case["name"])).unwrap());
        assert_eq!(keys.lock(), bytes(&case["lock"]), "{why}");
        assert_eq!(keys.fence(), bytes(&case["fence"]), "{why}");
        assert_eq!(keys.channel(), bytes(&case["channel"]), "{why}");
        let slot = case["slot"].as_u64().unwrap() as u16;
        for key in [&keys.lock(), &keys.fence(), &keys.channel()] {
            assert_eq!(hash_slot(key), slot, "{why}");
        }
    }
}

#[test]
fn listing_sends_the_documented_match_and_keeps_exactly_the_matching_names() {
    let doc = vectors("list.json");
    let space = KeySpace::new(doc["prefix"].as_str().unwrap()).unwrap();
    let names = |key: &str| -> Vec<LockName> {
        doc[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| LockName::new(bytes(n)).unwrap())
            .collect()
    };
    // What a SCAN of that key space returns: the held locks' lock and fence
    // keys, the released ones' fence keys.
    let mut scanned: Vec<Reply> = Vec::new();
    for name in names("held") {
        let keys = space.keys(&name);
        scanned.extend([
            Reply::Bulk(keys.lock().to_vec()),
            Reply::Bulk(keys.fence().to_vec()),
        ]);
    }
    for name in names("released") {
        scanned.push(Reply::Bulk(space.keys(&name).fence().to_vec()));
    }
    for case in doc["cases"].as_array().unwrap() {
        let why = case["why"].as_str().unwrap();
        let listing = Listing::new(&space, NamePattern::new(bytes(&case["pattern"])).unwrap());
        let command = listing.command(b"0");
        assert_eq!(command[3], bytes(&case["match"]), "{why}");
        let page = listing
            .read(Reply::Array(vec![
                Reply::Bulk(b"0".to_vec()),
                Reply::Array(scanned.clone()),
            ]))
            .unwrap();
        let found = listing.combine(1, vec![Ok(page.names)]).unwrap();
        let expected: Vec<Vec<u8>> = case["names"]
            .as_array()
            .unwrap()
            .iter()
            .map(bytes)
            .collect();
        let found: Vec<Vec<u8>> = found.iter().map(|n| n.as_bytes().to_vec()).collect();
        assert_eq!(found, expected, "{why}");
    }
    for bad in doc["bad"].as_array().unwrap() {
        assert!(
            matches!(NamePattern::new(bytes(bad)), Err(Error::InvalidArgument(_))),
            "{bad}"
        );
    }
}

#[test]
fn invalid_names_are_rejected() {
    let doc = vectors("validation.json");
    for case in doc["names"]["invalid"].as_array().unwrap() {
        let name = bytes(&case["name"]);
        assert!(
            matches!(LockName::new(&name), Err(Error::InvalidArgument(_))),
            "{}",
            case["why"]
        );
    }
    // And the valid extremes of keys.json are accepted.
    for case in vectors("keys.json")["cases"].as_array().unwrap() {
        LockName::new(bytes(&case["name"])).unwrap();
    }
}

#[test]
fn ttl_conversions_match_the_vectors() {
    let doc = vectors("validation.json");
    for case in doc["ttl"]["valid"].as_array().unwrap() {
        let sent: u64 = case["sent"].as_str().unwrap().parse().unwrap();
        // Node's unit (ms) and Python's (s) go through these two.
        assert_eq!(
            Ttl::from_millis_f64(number(&case["ms"]))
                .unwrap()
                .as_millis(),
            sent,
            "{case}"
        );
        assert_eq!(
            Ttl::from_secs_f64(number(&case["s"])).unwrap().as_millis(),
            sent,
            "{case}"
        );
        // Rust's own unit, Duration, when the value is a whole number of ns.
        let ns = number(&case["ms"]) * 1e6;
        if ns.fract() == 0.0 {
            let ttl = Ttl::from_duration(Duration::from_nanos(ns as u64)).unwrap();
            assert_eq!(ttl.as_millis(), sent, "{case}");
        }
    }
    for case in doc["ttl"]["invalid"].as_array().unwrap() {
        assert!(
            matches!(
                Ttl::from_millis_f64(number(&case["ms"])),
                Err(Error::InvalidArgument(_))
            ),
            "{case}"
        );
        assert!(
            matches!(
                Ttl::from_secs_f64(number(&case["s"])),
                Err(Error::InvalidArgument(_))
            ),
            "{case}"
        );
    }
    for case in doc["wait"]["invalid"].as_array().unwrap() {
        assert!(
            matches!(
                Wait::from_millis_f64(Some(number(&case["ms"]))),
                Err(Error::InvalidArgument(_))
            ),
            "{case}"
        );
        assert!(
            matches!(
                Wait::from_secs_f64(Some(number(&case["s"]))),
                Err(Error::InvalidArgument(_))
            ),
            "{case}"
        );
    }
}

// ---------------------------------------------------------------------------
// commands.json

fn script_named(name: &str) -> Script {
    Script::ALL
        .into_iter()
        .find(|s| s.name() == name)
        .unwrap_or_else(|| panic!("unknown script {name}"))
}

fn reply(v: &Value) -> Reply {
    match v {
        Value::Null => Reply::Nil,
        Value::Number(n) => Reply::Int(n.as_i64().unwrap()),
        Value::String(s) => Reply::Bulk(s.as_bytes().to_vec()),
        Value::Array(items) => Reply::Array(items.iter().map(reply).collect()),
        Value::Object(o) if o.contains_key("error") => {
            Reply::Error(o["error"].as_str().unwrap().into())
        }
        Value::Object(o) if o.contains_key("unknown") => {
            Reply::Unknown(o["unknown"].as_str().unwrap().into())
        }
        other => panic!("bad reply {other}"),
    }
}

/// `$lock` etc. (any of the scenario's `keys`) replaced by its values.
fn resolve(v: &Value, scenario: &Value) -> Vec<u8> {
    match v.as_str() {
        Some("$token") => scenario["token"].as_str().unwrap().as_bytes().to_vec(),
        Some("$waiter_token") => scenario["waiter_token"]
            .as_str()
            .unwrap()
            .as_bytes()
            .to_vec(),
        Some(key) if key.starts_with('$') && scenario["keys"].get(&key[1..]).is_some() => {
            bytes(&scenario["keys"][&key[1..]])
        }
        _ => bytes(v),
    }
}

fn error_kind(e: &Error) -> &'static str {
    match e {
        Error::InvalidArgument(_) => "InvalidArgument",
        Error::NotAcquired { .. } => "NotAcquired",
        Error::LockLost { .. } => "LockLost",
        Error::Redis { .. } => "Redis",
        Error::Closed { .. } => "Closed",
        Error::StaleFence { .. } => "StaleFence",
    }
}

/// The outcome events of one call, in the vectors' notation.
fn outcome(event: &Event, t0: Instant) -> Option<Value> {
    let ms = |i: Instant| i.saturating_duration_since(t0).as_millis() as u64;
    Some(match event {
        Event::Acquired { fence, valid_until } => {
            serde_json::json!({"acquired": fence.to_string(), "valid_until_ms": ms(*valid_until)})
        }
        Event::Extended { .. } | Event::Released(Ok(())) => Value::from("ok"),
        Event::AcquireFailed(e) | Event::ExtendFailed(e) | Event::Released(Err(e)) => {
            match e.reason() {
                Some(reason) => {
                    serde_json::json!({"error": error_kind(e), "reason": reason.as_str()})
                }
                None => serde_json::json!({"error": error_kind(e)}),
            }
        }
        Event::Subscribe
        | Event::Unsubscribe
        | Event::Lost
        | Event::NotPublished
        | Event::Handoff(_) => return None,
    })
}

#[test]
fn commands_and_outcomes_match_the_vectors() {
    let doc = vectors("commands.json");
    let shas = &doc["scripts"];
    assert_eq!(shas.as_object().unwrap().len(), Script::ALL.len());
    for script in Script::ALL {
        let name = script.name();
        assert_eq!(
            shas[name].as_str().unwrap(),
            script.sha1(),
            "SHA1 of {name}"
        );
    }
    let scenarios = doc["scenarios"].as_array().unwrap();
    assert!(scenarios.len() >= 8);
    for sc in scenarios {
        run_scenario(sc);
    }
}

#[test]
fn fenced_writes_match_the_vectors() {
    let cases = vectors("commands.json")["fenced_writes"]["cases"].clone();
    let cases = cases.as_array().unwrap();
    assert!(cases.len() >= 3);
    for case in cases {
        let title = case["name"].as_str().unwrap();
        let name = LockName::new(bytes(&case["lock_name"])).unwrap();
        let writer = Writer {
            name: &name,
            fence: case["fence"].as_str().unwrap().parse().unwrap(),
            valid_for: Duration::from_secs(10),
            nodes: 1,
        };
        let field = case.get("field").map(|f| resolve(f, case));
        let key = resolve(&case["key"], case);
        let value = resolve(&case["value"], case);
        let write = FencedWrite::new(writer, &key, field.as_deref(), &value).unwrap();
        let command = write.command();
        let sent = &case["sent"];
        assert_eq!(
            command.script,
            script_named(sent["script"].as_str().unwrap()),
            "{title}"
        );
        let each = |items: &Value| -> Vec<Vec<u8>> {
            items
                .as_array()
                .unwrap()
                .iter()
                .map(|v| resolve(v, case))
                .collect()
        };
        assert_eq!(command.keys, each(&sent["keys"]), "{title}");
        assert_eq!(command.args, each(&sent["args"]), "{title}");
        let got = match write.read(reply(&case["reply"])) {
            Ok(()) => Value::from("ok"),
            Err(Error::StaleFence { accepted, .. }) => {
                serde_json::json!({"error": "StaleFence", "accepted": accepted.to_string()})
            }
            Err(other) => panic!("{title}: {other:?}"),
        };
        assert_eq!(got, case["outcome"], "{title}");
    }
}

fn run_scenario(sc: &Value) {
    let title = sc["name"].as_str().unwrap();
    let name = LockName::new(bytes(&sc["lock_name"])).unwrap();
    let kind = kind_of(sc);
    let keys = KeySpace::new(sc["prefix"].as_str().unwrap())
        .unwrap()
        .keys_for(&name, kind);
    assert_eq!(keys.lock(), bytes(&sc["keys"]["lock"]), "{title}: lock key");
    assert_eq!(
        keys.fence(),
        bytes(&sc["keys"]["fence"]),
        "{title}: fence key"
    );
    assert_eq!(
        keys.channel(),
        bytes(&sc["keys"]["channel"]),
        "{title}: channel"
    );
    let line = keys.line();
    let key = |k: &str| sc["keys"].get(k).map(bytes);
    assert_eq!(
        line.as_ref().map(|l| l.waiting.to_vec()),
        key("waiting"),
        "{title}: line"
    );
    assert_eq!(
        line.map(|l| l.until.to_vec()),
        key("until"),
        "{title}: line"
    );
    assert_eq!(
        keys.other().as_deref().map(<[u8]>::to_vec),
        key("other"),
        "{title}: other side"
    );
    let wait = match &sc["wait_ms"] {
        Value::Null => Wait::Forever,
        v => Wait::from_millis_f64(Some(number(v))).unwrap(),
    };
    let config = LockConfig {
        name,
        kind,
        keys,
        token: Token(sc["token"].as_str().unwrap().into()),
        ttl: Ttl::from_millis_f64(number(&sc["ttl_ms"])).unwrap(),
        wait,
        nodes: sc["nodes"].as_u64().unwrap() as usize,
        auto_renew: false,
        max_hold: None,
        retry: RetryPolicy::default(),
        fence_grace: FenceGrace::DEFAULT,
        seed: 1,
    };
    // The waiter: a second lease of the same client (handoff scenarios).
    let waiter_config = LockConfig {
        token: Token(sc["waiter_token"].as_str().unwrap_or("no waiter").into()),
        ..config.clone()
    };
    let mut leases = Leases {
        locks: [Lock::new(config), Lock::new(waiter_config.clone())],
        waiter_in_line: false,
        events: [Vec::new(), Vec::new()],
    };
    // Time stands still: every validity is measured from t0.
    let t0 = Instant::from_epoch(Duration::from_secs(1000));
    let mut last_sent: Vec<(usize, Command)> = Vec::new();
    for (i, step) in sc["steps"].as_array().unwrap().iter().enumerate() {
        let at = format!("{title}, step {i} {step}");
        let lease = usize::from(step.get("lease").and_then(Value::as_str) == Some("waiter"));
        if let Some(call) = step.get("call") {
            match (call.as_str().unwrap(), lease) {
                // Lines up behind the first lease: nothing is sent yet.
                ("acquire", 1) => leases.waiter_in_line = true,
                ("acquire", _) => leases.locks[lease].acquire(t0).unwrap(),
                ("extend", _) => {
                    let ttl = step
                        .get("ttl_ms")
                        .map(|v| Ttl::from_millis_f64(number(v)).unwrap());
                    leases.locks[lease].extend(t0, ttl).unwrap()
                }
                ("release", 0) if std::mem::take(&mut leases.waiter_in_line) => leases.locks[0]
                    .release_to(t0, Successor::new(&waiter_config))
                    .unwrap(),
                ("release", _) => leases.locks[lease].release(t0).unwrap(),
                (other, _) => panic!("{at}: unknown call {other}"),
            }
        } else if let Some(sent) = step.get("sent") {
            leases.pump(t0);
            last_sent = (0..2)
                .flat_map(|l| {
                    let lock = &mut leases.locks[l];
                    std::iter::from_fn(|| lock.poll_command())
                        .map(move |c| (l, c))
                        .collect::<Vec<_>>()
                })
                .collect();
            let want = sent.as_array().unwrap();
            assert_eq!(
                last_sent.len(),
                want.len(),
                "{at}: number of commands, got {last_sent:?}"
            );
            for ((_, got), want) in last_sent.iter().zip(want) {
                assert_eq!(
                    got.node,
                    want["node"].as_u64().unwrap() as usize,
                    "{at}: node"
                );
                assert_eq!(
                    got.script,
                    script_named(want["script"].as_str().unwrap()),
                    "{at}: script"
                );
                let keys: Vec<Vec<u8>> = want["keys"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|k| resolve(k, sc))
                    .collect();
                let args: Vec<Vec<u8>> = want["args"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|a| resolve(a, sc))
                    .collect();
                assert_eq!(got.keys, keys, "{at}: keys");
                assert!(got.args == args, "{at}: args differ");
            }
        } else if let Some(replies) = step.get("replies") {
            let replies = replies.as_array().unwrap();
            assert_eq!(
                replies.len(),
                last_sent.len(),
                "{at}: one reply per command sent"
            );
            for ((l, command), r) in last_sent.iter().zip(replies) {
                leases.locks[*l].handle_reply(t0, command.id, reply(r));
            }
            leases.pump(t0);
        } else if let Some(want) = step.get("outcome") {
            leases.pump(t0);
            let events = &mut leases.events[lease];
            match want {
                Value::Null => assert!(events.is_empty(), "{at}: no outcome yet, got {events:?}"),
                want => {
                    assert!(!events.is_empty(), "{at}: expected {want}, got nothing");
                    let got = events.remove(0);
                    // valid_until_ms is checked when the vector gives it.
                    let got = match (want.get("valid_until_ms"), got) {
                        (None, Value::Object(mut o)) => {
                            o.remove("valid_until_ms");
                            Value::Object(o)
                        }
                        (_, got) => got,
                    };
                    assert_eq!(&got, want, "{at}");
                }
            }
        } else if step.get("external").is_some() {
            // Only meaningful against a real Redis (the next replies say it).
        } else {
            panic!("{at}: unknown step");
        }
    }
    leases.pump(t0);
    for (l, lock) in leases.locks.iter_mut().enumerate() {
        assert!(
            lock.poll_command().is_none(),
            "{title}: unexpected commands of lease {l} at the end"
        );
    }
    assert!(
        leases.events.iter().all(Vec::is_empty),
        "{title}: unexpected outcomes at the end: {:?}",
        leases.events
    );
}

/// The scenario's lease and, in handoff scenarios, the waiter of the same
/// client behind it, with the outcomes each has reported so far.
struct Leases {
    locks: [Lock; 2],
    /// The waiter called acquire and waits in the local line.
    waiter_in_line: bool,
    events: [Vec<Value>; 2],
}

impl Leases {
    /// Collect the outcomes; a handoff goes to the waiter's lock, as the
    /// driver hands it over.
    fn pump(&mut self, t0: Instant) {
        for l in 0..2 {
            while let Some(event) = self.locks[l].poll_event() {
                if let Event::Handoff(handoff) = event {
                    self.locks[1].accept_handoff(t0, handoff).unwrap();
                } else if let Some(outcome) = outcome(&event, t0) {
                    self.events[l].push(outcome);
                }
            }
        }
    }
}
