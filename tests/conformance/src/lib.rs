//! Cross-language conformance, Rust side: reading tests/vectors/*.json
//! (their byte strings and special numbers) and the script calls of a
//! MONITOR capture, normalised as tests/support/fltest.py does (the RESP
//! client, MONITOR and the redis-server are fencelock-testkit's). The vectors are checked against
//! fencelock-core in tests/vectors.rs and through the driver against a real
//! Redis in tests/real.rs; the driver also takes part in the interop and
//! wire tests through the `fencelock-agent` binary (src/bin/fencelock-agent.rs,
//! driven by tests/python/test_interop.py).

use std::path::{Path, PathBuf};

use fencelock_core::{Kind, Permits};
use fencelock_testkit::Seen;
use serde_json::Value;

/// A commands.json scenario's `primitive` (`{"fair": true}`,
/// `{"semaphore": permits}`, `{"rw": "read" | "write"}`): the mutex when
/// absent.
pub fn kind_of(sc: &Value) -> Kind {
    let primitive = &sc["primitive"];
    if primitive.get("fair").and_then(Value::as_bool) == Some(true) {
        return Kind::FairMutex;
    }
    if let Some(permits) = primitive.get("semaphore") {
        return Kind::Semaphore(Permits::new(permits.as_u64().unwrap()).unwrap());
    }
    match primitive.get("rw").and_then(Value::as_str) {
        Some("read") => Kind::Read,
        Some("write") => Kind::Write,
        Some(other) => panic!("unknown rw side {other}"),
        None => Kind::Mutex,
    }
}

/// A commands.json scenario's argument: `$token` (and a handoff's
/// `$waiter_token`) kept as the mask, `$key` the scenario's key of that
/// name, anything else its bytes.
pub fn resolve(v: &Value, sc: &Value) -> Vec<u8> {
    match v.as_str() {
        Some(mask @ ("$token" | "$waiter_token")) => mask.as_bytes().to_vec(),
        Some(key) if key.starts_with('$') && sc["keys"].get(&key[1..]).is_some() => {
            bytes(&sc["keys"][&key[1..]])
        }
        _ => bytes(v),
    }
}

/// `tests/vectors/<file>` parsed.
pub fn vectors(file: &str) -> Value {
    let path = repo_root().join("tests/vectors").join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The vectors' byte strings: `"text"` (UTF-8), `{"hex": ".."}`,
/// `{"repeat": "s", "count": n}`.
pub fn bytes(v: &Value) -> Vec<u8> {
    match v {
        Value::String(s) => s.as_bytes().to_vec(),
        Value::Object(o) if o.contains_key("hex") => hex(o["hex"].as_str().expect("hex string")),
        Value::Object(o) if o.contains_key("repeat") => o["repeat"]
            .as_str()
            .expect("repeat string")
            .repeat(o["count"].as_u64().expect("count") as usize)
            .into_bytes(),
        other => panic!("not a byte string: {other}"),
    }
}

pub fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex digit"))
        .collect()
}

/// A number of the vectors: JSON number or "NaN" / "Infinity" / "-Infinity".
pub fn number(v: &Value) -> f64 {
    match v {
        Value::Number(n) => n.as_f64().expect("f64"),
        Value::String(s) if s == "NaN" => f64::NAN,
        Value::String(s) if s == "Infinity" => f64::INFINITY,
        Value::String(s) if s == "-Infinity" => f64::NEG_INFINITY,
        other => panic!("not a number: {other}"),
    }
}

/// One script call as the vectors describe it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptCall {
    pub client: String,
    pub script: String,
    pub keys: Vec<Vec<u8>>,
    pub args: Vec<Vec<u8>>,
}

/// The script calls of clients (not the commands scripts run), EVAL turned
/// into its SHA1, and an EVAL that repeats that client's previous call, an
/// EVALSHA (the NOSCRIPT fallback), dropped. `scripts` maps SHA1 -> name.
pub fn script_calls(seen: &[Seen], scripts: &[(String, String)]) -> Vec<ScriptCall> {
    let name_of = |sha: &str| {
        scripts
            .iter()
            .find(|(_, s)| s == sha)
            .map(|(n, _)| n.clone())
    };
    let mut out: Vec<ScriptCall> = Vec::new();
    let mut last_evalsha: std::collections::HashMap<String, ScriptCall> = Default::default();
    for s in seen
        .iter()
        .filter(|s| s.client != "lua" && s.args.len() >= 3)
    {
        let verb = String::from_utf8_lossy(&s.args[0]).to_ascii_uppercase();
        let sha = match verb.as_str() {
            "EVALSHA" => String::from_utf8_lossy(&s.args[1]).to_ascii_lowercase(),
            "EVAL" => sha1_hex(&s.args[1]),
            _ => continue,
        };
        let Some(script) = name_of(&sha) else {
            continue;
        };
        let numkeys: usize = String::from_utf8_lossy(&s.args[2])
            .parse()
            .expect("numkeys");
        let call = ScriptCall {
            client: s.client.clone(),
            script,
            keys: s.args[3..3 + numkeys].to_vec(),
            args: s.args[3 + numkeys..].to_vec(),
        };
        let previous = last_evalsha.remove(&call.client);
        if verb == "EVAL" && previous.as_ref() == Some(&call) {
            continue;
        }
        if verb == "EVALSHA" {
            last_evalsha.insert(call.client.clone(), call.clone());
        }
        out.push(call);
    }
    out
}

/// Is this a UUID v4, lowercase and hyphenated (the token format)?
pub fn is_token(arg: &[u8]) -> bool {
    arg.len() == 36
        && arg.iter().enumerate().all(|(i, &b)| match i {
            8 | 13 | 18 | 23 => b == b'-',
            14 => b == b'4',
            19 => matches!(b, b'8' | b'9' | b'a' | b'b'),
            _ => b.is_ascii_digit() || (b'a'..=b'f').contains(&b),
        })
}

/// SHA1 (for EVAL bodies); small and dependency-free, tests only.
pub fn sha1_hex(data: &[u8]) -> String {
    let mut h: [u32; 5] = [0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476, 0xC3D2E1F0];
    let mut msg = data.to_vec();
    msg.push(0x80);
    while msg.len() % 64 != 56 {
        msg.push(0);
    }
    msg.extend_from_slice(&((data.len() as u64) * 8).to_be_bytes());
    for chunk in msg.chunks(64) {
        let mut w = [0u32; 80];
        for i in 0..16 {
            w[i] = u32::from_be_bytes(chunk[4 * i..4 * i + 4].try_into().unwrap());
        }
        for i in 16..80 {
            w[i] = (w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16]).rotate_left(1);
        }
        let [mut a, mut b, mut c, mut d, mut e] = h;
        for (i, wi) in w.iter().enumerate() {
            let (f, k) = match i {
                0..=19 => ((b & c) | (!b & d), 0x5A827999),
                20..=39 => (b ^ c ^ d, 0x6ED9EBA1),
                40..=59 => ((b & c) | (b & d) | (c & d), 0x8F1BBCDC),
                _ => (b ^ c ^ d, 0xCA62C1D6),
            };
            let t = a
                .rotate_left(5)
                .wrapping_add(f)
                .wrapping_add(e)
                .wrapping_add(k)
                .wrapping_add(*wi);
            e = d;
            d = c;
            c = b.rotate_left(30);
            b = a;
            a = t;
        }
        for (x, y) in h.iter_mut().zip([a, b, c, d, e]) {
            *x = x.wrapping_add(y);
        }
    }
    h.iter().map(|x| format!("{x:08x}")).collect()
}
