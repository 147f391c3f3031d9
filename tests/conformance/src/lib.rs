//! Cross-language conformance, Rust side: reading tests/vectors/*.json
//! (their byte strings and special numbers). The vectors are checked against
//! fencelock-core in tests/vectors.rs; the Rust driver takes part in the
//! interop and MONITOR tests through the `fencelock-agent` binary
//! (src/bin/fencelock-agent.rs, driven by tests/python/test_interop.py).

use std::path::{Path, PathBuf};

use serde_json::Value;

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
