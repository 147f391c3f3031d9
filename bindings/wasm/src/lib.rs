//! wasm-bindgen glue between JavaScript and `fencelock-core`, for JS runtimes
//! that cannot load the native addon (`fencelock/wasm` in the npm package).
//!
//! Like `bindings/node`, this crate only converts JavaScript values into the
//! core's validated types and maps errors; the lock state machine is the
//! core's. The JavaScript driver (`node/wasm/driver.js`) moves the core's
//! commands to the application's Redis client and feeds the replies, release
//! notifications and timer expiries back.
//!
//! Error protocol (the same as `bindings/node`, so `node/errors.js` maps both):
//! every thrown error, and every error carried by an event, is a message
//! `CODE: text` with CODE one of `NOT_ACQUIRED`, `LOCK_LOST`, `REDIS`,
//! `CLIENT_CLOSED`, `STALE_FENCE` (the core's `Error::code()`, with its
//! `Error::detail()` in parentheses when it has one), `INVALID_ARGUMENT` (JS
//! `RangeError`) or
//! `INVALID_TYPE` (JS `TypeError`).
//!
//! Time: every `now` is the host's monotonic clock in milliseconds
//! (`performance.now()`); instants handed back use the same scale.

use std::fmt::Display;
use std::time::Duration;

use fencelock_core::{
    Error, Event, FenceGrace, FencedUpdate, FencedWrite, ForceRelease, Forced, Handoff, Inspect,
    Instant, KeySpace, Kind, Lock, LockConfig, LockName, MaxHold, NodeView, Operation, Permits,
    Placeholders, Progress, Reply, RetryPolicy, Script, State, Successor, Timeout, Token, Ttl,
    Wait, Writer,
};
use js_sys::{Array, Object, Reflect, Uint8Array};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

// ---------------------------------------------------------------- errors

fn tag(code: &str, message: impl Display) -> String {
    format!("{code}: {message}")
}

fn tagged(code: &str, message: impl Display) -> JsValue {
    js_sys::Error::new(&tag(code, message)).into()
}

/// `CODE: message`, or `CODE(detail): message` (errors.js turns a
/// NotAcquired's reason into `err.reason`, a StaleFence's accepted fence
/// into `err.accepted`), as bindings/node does.
fn lock_tag(error: &Error) -> String {
    match error.detail() {
        Some(detail) => tag(&format!("{}({detail})", error.code()), error),
        None => tag(error.code(), error),
    }
}

fn lock_error(error: Error) -> JsValue {
    js_sys::Error::new(&lock_tag(&error)).into()
}

fn type_error(what: &str, expected: &str, got: &JsValue) -> JsValue {
    tagged(
        "INVALID_TYPE",
        format!("{what} must be {expected}, not {}", describe(got)),
    )
}

fn describe(value: &JsValue) -> &'static str {
    if value.is_null() {
        return "null";
    }
    match value.js_typeof().as_string().as_deref() {
        Some("undefined") => "undefined",
        Some("boolean") => "a boolean",
        Some("number") => "a number",
        Some("string") => "a string",
        Some("symbol") => "a symbol",
        Some("function") => "a function",
        Some("bigint") => "a bigint",
        Some("object") => "an object",
        _ => "a value of unknown type",
    }
}

// ---------------------------------------------------------------- arguments

/// `undefined` and `null` both mean "not given", as in the napi binding.
fn absent(value: &JsValue) -> bool {
    value.is_undefined() || value.is_null()
}

fn field(object: &JsValue, key: &str) -> Result<JsValue, JsValue> {
    Reflect::get(object, &JsValue::from_str(key))
}

fn number(what: &str, value: &JsValue, expected: &str) -> Result<f64, JsValue> {
    value
        .as_f64()
        .ok_or_else(|| type_error(what, expected, value))
}

fn name_bytes(value: &JsValue) -> Result<Vec<u8>, JsValue> {
    data_bytes("name", value)
}

/// A string (UTF-8) or a Buffer: a name, or a fenced write's key, field or value.
fn data_bytes(what: &str, value: &JsValue) -> Result<Vec<u8>, JsValue> {
    if let Some(text) = value.as_string() {
        return Ok(text.into_bytes());
    }
    if let Some(bytes) = value.dyn_ref::<Uint8Array>() {
        return Ok(bytes.to_vec());
    }
    Err(type_error(what, "a string or a Buffer", value))
}

fn ttl_arg(what: &str, value: &JsValue) -> Result<Option<Ttl>, JsValue> {
    if absent(value) {
        return Ok(None);
    }
    let ms = number(what, value, "a number of milliseconds")?;
    Ttl::from_millis_f64(ms).map(Some).map_err(lock_error)
}

fn object_arg(what: &str, value: &JsValue) -> Result<Option<JsValue>, JsValue> {
    if absent(value) {
        Ok(None)
    } else if value.is_object() {
        Ok(Some(value.clone()))
    } else {
        Err(type_error(what, "an object", value))
    }
}

fn instant(now_ms: f64) -> Instant {
    let ms = if now_ms.is_finite() && now_ms > 0.0 {
        now_ms
    } else {
        0.0
    };
    Instant::from_epoch(Duration::from_secs_f64(ms / 1000.0))
}

fn millis(at: Instant) -> f64 {
    at.since_epoch().as_secs_f64() * 1000.0
}

// ---------------------------------------------------------------- client options

/// A client's validated options: `{ prefix, responseTimeout, replicas, fenceGrace }`.
#[wasm_bindgen]
#[derive(Debug)]
pub struct ClientConfig {
    keys: KeySpace,
    response_timeout: Timeout,
    /// `replicas=N`: every grant and extension waits for N acknowledgements.
    replicas: u32,
    fence_grace: FenceGrace,
}

#[wasm_bindgen]
impl ClientConfig {
    #[wasm_bindgen(constructor)]
    pub fn new(options: JsValue) -> Result<ClientConfig, JsValue> {
        let mut config = ClientConfig {
            keys: KeySpace::default(),
            response_timeout: Timeout::DEFAULT,
            replicas: 0,
            fence_grace: FenceGrace::DEFAULT,
        };
        let Some(options) = object_arg("options", &options)? else {
            return Ok(config);
        };
        let prefix = field(&options, "prefix")?;
        if !absent(&prefix) {
            let prefix = prefix
                .as_string()
                .ok_or_else(|| type_error("options.prefix", "a string", &prefix))?;
            config.keys = KeySpace::new(prefix).map_err(lock_error)?;
        }
        let timeout = field(&options, "responseTimeout")?;
        if !absent(&timeout) {
            let ms = number(
                "options.responseTimeout",
                &timeout,
                "a number of milliseconds",
            )?;
            config.response_timeout =
                Timeout::from_millis_f64("options.responseTimeout", ms).map_err(lock_error)?;
        }
        let replicas = field(&options, "replicas")?;
        if !absent(&replicas) {
            let n = number("options.replicas", &replicas, "a number")?;
            config.replicas = fencelock_core::replica_count(n).map_err(lock_error)?;
        }
        let grace = field(&options, "fenceGrace")?;
        if !absent(&grace) {
            let ms = number("options.fenceGrace", &grace, "a number of milliseconds")?;
            config.fence_grace = FenceGrace::from_millis_f64(ms).map_err(lock_error)?;
        }
        Ok(config)
    }

    /// Milliseconds after which a command without a reply is an unknown outcome.
    #[wasm_bindgen(getter, js_name = responseTimeout)]
    pub fn response_timeout(&self) -> f64 {
        self.response_timeout.as_duration().as_nanos() as f64 / 1e6
    }
}

// ---------------------------------------------------------------- kinds

/// What a lease holds: `new Kind('mutex')`, `new Kind('semaphore',
/// permits)`, `new Kind('read')`, `new Kind('write')`; validated once, when
/// the client makes a semaphore or read-write lock handle.
#[wasm_bindgen(js_name = Kind)]
#[derive(Debug, Clone, Copy)]
pub struct WasmKind {
    kind: Kind,
}

#[wasm_bindgen(js_class = Kind)]
impl WasmKind {
    /// `permits`: a whole number from 1 to 1,000,000 (RangeError outside,
    /// TypeError for a non-number).
    #[wasm_bindgen(constructor)]
    pub fn new(what: &str, permits: JsValue) -> Result<WasmKind, JsValue> {
        let kind = match what {
            "mutex" => Kind::Mutex,
            "read" => Kind::Read,
            "write" => Kind::Write,
            "semaphore" => {
                if absent(&permits) {
                    return Err(tagged(
                        "INVALID_TYPE",
                        "options.permits is required (a whole number from 1 to 1000000)",
                    ));
                }
                let n = number("options.permits", &permits, "a number")?;
                Kind::Semaphore(Permits::from_f64(n).map_err(lock_error)?)
            }
            other => return Err(tagged("INVALID_TYPE", format!("unknown kind {other:?}"))),
        };
        Ok(WasmKind { kind })
    }

    /// The semaphore's permits; undefined for another kind.
    #[wasm_bindgen(getter)]
    pub fn permits(&self) -> Option<u32> {
        match self.kind {
            Kind::Semaphore(p) => Some(p.get()),
            _ => None,
        }
    }
}

// ---------------------------------------------------------------- one acquire

/// A validated acquire request (`name`, `{ ttl, wait, autoRenew, maxHold, fair }`), before
/// it has its turn in the client's local queue for the name.
#[wasm_bindgen]
#[derive(Debug)]
pub struct LockSpec {
    config: LockConfig,
    replicas: u32,
    /// How long WAIT may block: half the response timeout, as in the driver.
    replica_timeout: Duration,
}

#[wasm_bindgen]
impl LockSpec {
    /// Throws (tagged) on a bad name or option; nothing is sent then.
    /// `try_once` (tryAcquire) validates `wait` too, then ignores it.
    /// `kind`: what the lease holds (`new Kind('mutex')` for the mutex).
    #[wasm_bindgen(constructor)]
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        client: &ClientConfig,
        name: JsValue,
        options: JsValue,
        token: String,
        nodes: usize,
        seed: u64,
        try_once: bool,
        kind: &WasmKind,
    ) -> Result<LockSpec, JsValue> {
        let kind = kind.kind;
        let name = LockName::new(name_bytes(&name)?).map_err(lock_error)?;
        let Some(options) = object_arg("options", &options)? else {
            return Err(tagged(
                "INVALID_TYPE",
                "options must be an object with a ttl in milliseconds",
            ));
        };
        let ttl = ttl_arg("options.ttl", &field(&options, "ttl")?)?.ok_or_else(|| {
            tagged(
                "INVALID_TYPE",
                "options.ttl is required (a number of milliseconds)",
            )
        })?;
        let wait = field(&options, "wait")?;
        let wait = if absent(&wait) {
            Wait::Forever
        } else {
            let ms = number("wait", &wait, "a number of milliseconds or undefined")?;
            Wait::from_millis_f64(Some(ms)).map_err(lock_error)?
        };
        let auto_renew = field(&options, "autoRenew")?;
        let auto_renew = if absent(&auto_renew) {
            false
        } else {
            auto_renew
                .as_bool()
                .ok_or_else(|| type_error("options.autoRenew", "a boolean", &auto_renew))?
        };
        let fair = field(&options, "fair")?;
        let fair = if absent(&fair) {
            false
        } else {
            fair.as_bool()
                .ok_or_else(|| type_error("options.fair", "a boolean", &fair))?
        };
        // The core picks the fair mutex's scripts and keys (`Kind::fair`).
        let kind = kind.fair(fair);
        let max_hold = field(&options, "maxHold")?;
        let max_hold = if absent(&max_hold) {
            None
        } else {
            let ms = number("options.maxHold", &max_hold, "a number of milliseconds")?;
            Some(MaxHold::from_millis_f64(ms).map_err(lock_error)?)
        };
        Ok(LockSpec {
            config: LockConfig {
                kind,
                keys: client.keys.keys_for(&name, kind),
                name,
                token: Token(token.into()),
                ttl,
                wait: if try_once { Wait::TRY_ONCE } else { wait },
                nodes,
                auto_renew,
                max_hold,
                retry: RetryPolicy::default(),
                fence_grace: client.fence_grace,
                seed,
            },
            replicas: client.replicas,
            replica_timeout: client.response_timeout.as_duration() / 2,
        })
    }

    /// Whether acquires of one client for this name line up in the local
    /// queue (the mutex); permits and readers do not (see `Kind`).
    #[wasm_bindgen(getter, js_name = linesUpLocally)]
    pub fn lines_up_locally(&self) -> bool {
        self.config.kind.lines_up_locally()
    }

    /// The wait bound in ms (`undefined`: no bound), for the local queue.
    #[wasm_bindgen(getter)]
    pub fn wait(&self) -> Option<f64> {
        match self.config.wait {
            Wait::Forever => None,
            Wait::Bounded(d) => Some(d.as_secs_f64() * 1000.0),
        }
    }

    /// The lease's TTL in milliseconds.
    #[wasm_bindgen(getter)]
    pub fn ttl(&self) -> f64 {
        self.config.ttl.as_millis() as f64
    }

    /// Identifies the name in the client's local queue (the exact bytes).
    #[wasm_bindgen(getter, js_name = nameBytes)]
    pub fn name_bytes(&self) -> Vec<u8> {
        self.config.name.as_bytes().to_vec()
    }

    /// The tagged error for "the local queue did not give us a turn in time".
    #[wasm_bindgen(js_name = notAcquiredMessage)]
    pub fn not_acquired_message(&self) -> String {
        lock_tag(&Error::not_acquired(&self.config.name))
    }

    /// The tagged error for an acquire refused or cut short by
    /// `Client.close()` (`CLIENT_CLOSED`).
    #[wasm_bindgen(js_name = closedMessage)]
    pub fn closed_message(&self) -> String {
        lock_tag(&Error::closed(&self.config.name, Operation::Acquire))
    }

    /// The lock, once it is this acquire's turn, `waited_ms` after the call.
    pub fn start(&self, waited_ms: f64) -> WasmLock {
        let mut config = self.config.clone();
        if let Wait::Bounded(d) = config.wait {
            let waited = Duration::from_secs_f64(waited_ms.max(0.0) / 1000.0);
            config.wait = Wait::Bounded(d.saturating_sub(waited));
        }
        let mut lock = Lock::new(config);
        lock.require_replicas(self.replicas, self.replica_timeout);
        WasmLock { lock }
    }
}

// ---------------------------------------------------------------- one-shot operations

/// The core's one-shot operation and the answers read so far.
#[derive(Debug)]
enum Op {
    Inspect(Inspect, Vec<Result<NodeView, Error>>),
    ForceRelease(ForceRelease, Vec<Result<Forced, Error>>),
    FencedWrite(FencedWrite, Vec<Result<(), Error>>),
}

/// One `client.inspect(name)` / `lease.isHeld()` (the core's [`Inspect`]),
/// `client.forceRelease(name)` (its [`ForceRelease`]) or a lease's
/// `fencedSet` / `fencedHSet` (its [`FencedWrite`], on the one node): the driver runs
/// `command(node)` on every node, hands each outcome in (`handleReply` /
/// `handleError` / `handleUnknown`, one per node), then reads `result()`.
#[wasm_bindgen]
#[derive(Debug)]
pub struct WasmOneShot {
    op: Op,
}

#[wasm_bindgen]
impl WasmOneShot {
    /// `tokens`: the caller's own tokens for `name` (strings), for `heldByMe`;
    /// `kind`: whose keys (a semaphore's holders, a read-write side's).
    /// A bad name throws as `LockSpec` does.
    pub fn inspect(
        client: &ClientConfig,
        name: JsValue,
        tokens: Array,
        nodes: usize,
        kind: &WasmKind,
    ) -> Result<WasmOneShot, JsValue> {
        let name = LockName::new(name_bytes(&name)?).map_err(lock_error)?;
        let kind = kind.kind;
        let keys = client.keys.keys_for(&name, kind);
        let tokens: Vec<Token> = tokens
            .iter()
            .filter_map(|t| t.as_string())
            .map(|token| Token(token.into()))
            .collect();
        let inspect = Inspect::of_kind(name, kind, &keys, &tokens, nodes);
        Ok(WasmOneShot {
            op: Op::Inspect(inspect, Vec::new()),
        })
    }

    /// An operator's force-release of `name`. A bad name throws.
    #[wasm_bindgen(js_name = forceRelease)]
    pub fn force_release(
        client: &ClientConfig,
        name: JsValue,
        nodes: usize,
    ) -> Result<WasmOneShot, JsValue> {
        let name = LockName::new(name_bytes(&name)?).map_err(lock_error)?;
        let keys = client.keys.keys(&name);
        let force = ForceRelease::new(name, &keys, client.fence_grace, nodes);
        Ok(WasmOneShot {
            op: Op::ForceRelease(force, Vec::new()),
        })
    }

    /// A lease's `fencedSet(key, value)` (the field `value` of the hash
    /// `key`). Throws (tagged) on a bad argument, a Redlock client, or a
    /// lease no longer valid: nothing is sent then.
    #[wasm_bindgen(js_name = fencedSet)]
    pub fn fenced_set(
        lock: &WasmLock,
        now: f64,
        nodes: usize,
        key: JsValue,
        value: JsValue,
    ) -> Result<WasmOneShot, JsValue> {
        Self::fenced(lock, now, nodes, &key, None, &value)
    }

    /// A lease's `fencedHSet(key, field, value)`, as `fencedSet`.
    #[wasm_bindgen(js_name = fencedHset)]
    pub fn fenced_hset(
        lock: &WasmLock,
        now: f64,
        nodes: usize,
        key: JsValue,
        field: JsValue,
        value: JsValue,
    ) -> Result<WasmOneShot, JsValue> {
        Self::fenced(lock, now, nodes, &key, Some(&field), &value)
    }

    fn fenced(
        lock: &WasmLock,
        now: f64,
        nodes: usize,
        key: &JsValue,
        field: Option<&JsValue>,
        value: &JsValue,
    ) -> Result<WasmOneShot, JsValue> {
        let key = data_bytes("key", key)?;
        let field = field.map(|f| data_bytes("field", f)).transpose()?;
        let value = data_bytes("value", value)?;
        let writer = Writer {
            name: lock.lock.name(),
            fence: lock.lock.fence().unwrap_or(0),
            valid_for: lock.lock.valid_for(instant(now)),
            nodes,
        };
        let write = FencedWrite::new(writer, &key, field.as_deref(), &value).map_err(lock_error)?;
        Ok(WasmOneShot {
            op: Op::FencedWrite(write, Vec::new()),
        })
    }

    fn name(&self) -> &LockName {
        match &self.op {
            Op::Inspect(inspect, _) => inspect.name(),
            Op::ForceRelease(force, _) => force.name(),
            Op::FencedWrite(write, _) => write.name(),
        }
    }

    #[wasm_bindgen(getter, js_name = nameBytes)]
    pub fn name_bytes(&self) -> Vec<u8> {
        self.name().as_bytes().to_vec()
    }

    #[wasm_bindgen(js_name = closedMessage)]
    pub fn closed_message(&self) -> String {
        let operation = match self.op {
            Op::Inspect(..) => Operation::Inspect,
            Op::ForceRelease(..) => Operation::ForceRelease,
            Op::FencedWrite(..) => Operation::FencedWrite,
        };
        lock_tag(&Error::closed(self.name(), operation))
    }

    /// The command for node `node` (`{ id, node, sha, keys, args }`).
    pub fn command(&self, node: usize) -> JsValue {
        command_record(&match &self.op {
            Op::Inspect(inspect, _) => inspect.command(node),
            Op::ForceRelease(force, _) => force.command(node),
            Op::FencedWrite(write, _) => write.command(),
        })
    }

    fn read(&mut self, reply: Reply) {
        match &mut self.op {
            Op::Inspect(inspect, views) => views.push(inspect.read(reply)),
            Op::ForceRelease(force, answers) => answers.push(force.read(reply)),
            Op::FencedWrite(write, answers) => answers.push(write.read(reply)),
        }
    }

    #[wasm_bindgen(js_name = handleReply)]
    pub fn handle_reply(&mut self, reply: JsValue) {
        self.read(to_reply(&reply));
    }

    #[wasm_bindgen(js_name = handleError)]
    pub fn handle_error(&mut self, message: String) {
        self.read(Reply::Error(message));
    }

    #[wasm_bindgen(js_name = handleUnknown)]
    pub fn handle_unknown(&mut self, message: String) {
        self.read(Reply::Unknown(message));
    }

    /// Inspect: `{ held, ttl (ms or null), fence (bigint or null), heldByMe }`;
    /// force-release: the new fence (a bigint); a fenced write: undefined.
    /// Throws the tagged error when too few nodes answered, or the write was
    /// refused.
    pub fn result(&self) -> Result<JsValue, JsValue> {
        let bigint = |f: u64| JsValue::from(js_sys::BigInt::from(f));
        let info = match &self.op {
            Op::FencedWrite(_, answers) => {
                let missing = || {
                    Err(Error::redis(
                        Some(self.name()),
                        "no answer to the fenced write",
                    ))
                };
                let answer = answers.first().cloned().unwrap_or_else(missing);
                return answer.map(|()| JsValue::UNDEFINED).map_err(lock_error);
            }
            Op::ForceRelease(force, answers) => {
                let forced = force.combine(answers.clone()).map_err(lock_error)?;
                return Ok(bigint(forced.fence));
            }
            Op::Inspect(inspect, views) => inspect.combine(views.clone()).map_err(lock_error)?,
        };
        Ok(record(&[
            ("held", JsValue::from(info.held)),
            (
                "ttl",
                info.ttl
                    .map_or(JsValue::NULL, |d| JsValue::from(d.as_millis() as f64)),
            ),
            ("fence", info.fence.map_or(JsValue::NULL, bigint)),
            ("heldByMe", JsValue::from(info.held_by_me)),
        ]))
    }
}

// ---------------------------------------------------------------- SQL recipe

/// The statements of one fenced SQL update (the core's [`FencedUpdate`],
/// `$n` placeholders), for `fencelock/sql` where the addon cannot load.
#[wasm_bindgen]
#[derive(Debug)]
pub struct WasmFencedUpdate {
    inner: FencedUpdate,
    /// The writer's fence, and its lease's lock (for `StaleFence`).
    fence: u64,
    name: Option<LockName>,
}

#[wasm_bindgen]
impl WasmFencedUpdate {
    /// `table`: the qualified parts; `set`, `filter` (the where): column names; `fence`
    /// (a decimal string): the writer's, from the lease of lock `name` if any.
    #[wasm_bindgen(constructor)]
    pub fn new(
        table: Vec<String>,
        set: Vec<String>,
        filter: Vec<String>,
        fence_column: String,
        fence: String,
        name: JsValue,
    ) -> Result<WasmFencedUpdate, JsValue> {
        let name = if absent(&name) {
            None
        } else {
            Some(LockName::new(name_bytes(&name)?).map_err(lock_error)?)
        };
        let fence = fence.parse::<u64>().map_err(|_| {
            tagged(
                "INVALID_ARGUMENT",
                "a fence is an integer from 0 to 2^64 - 1",
            )
        })?;
        let inner = FencedUpdate::new(&table, &set, &filter, &fence_column, Placeholders::Dollar)
            .map_err(lock_error)?;
        Ok(WasmFencedUpdate { inner, fence, name })
    }

    #[wasm_bindgen(getter)]
    pub fn update(&self) -> String {
        self.inner.update().to_owned()
    }

    #[wasm_bindgen(getter)]
    pub fn check(&self) -> String {
        self.inner.check().to_owned()
    }

    /// Rows updated (`updated`, else 0), or throws `STALE_FENCE(accepted)`
    /// when the check found `newest` (a decimal string, or null), a newer
    /// fence than the writer's.
    pub fn outcome(&self, updated: u32, newest: Option<String>) -> Result<u32, JsValue> {
        let newest = newest
            .map(|n| n.parse::<i128>())
            .transpose()
            .map_err(|_| tagged("INVALID_ARGUMENT", "the newest fence is not an integer"))?;
        let rows = self
            .inner
            .outcome(self.name.as_ref(), self.fence, u64::from(updated), newest)
            .map_err(lock_error)?;
        Ok(u32::try_from(rows).unwrap_or(u32::MAX))
    }
}

// ---------------------------------------------------------------- the lock

/// What a release with handoff did for the waiter it handed the lock to
/// (the core's [`Handoff`]), on its way to that waiter's lock. Opaque.
#[wasm_bindgen]
#[derive(Debug)]
pub struct WasmHandoff {
    handoff: Handoff,
}

/// The core's [`Lock`], with JavaScript values in and out.
#[wasm_bindgen]
#[derive(Debug)]
pub struct WasmLock {
    lock: Lock,
}

#[wasm_bindgen]
impl WasmLock {
    pub fn acquire(&mut self, now: f64) -> Result<(), JsValue> {
        self.lock.acquire(instant(now)).map_err(lock_error)
    }

    /// `ttl`: ms, or `undefined` for the lease's own TTL.
    pub fn extend(&mut self, now: f64, ttl: JsValue) -> Result<(), JsValue> {
        let ttl = ttl_arg("ttl", &ttl)?;
        self.lock.extend(instant(now), ttl).map_err(lock_error)
    }

    pub fn release(&mut self, now: f64) -> Result<(), JsValue> {
        self.lock.release(instant(now)).map_err(lock_error)
    }

    /// Release, handing the lock in the same round trip to `successor`, the
    /// next waiter of this client for the name (`Lock::release_to`): a
    /// `handoff` event comes before `released`, for that waiter's lock.
    #[wasm_bindgen(js_name = releaseTo)]
    pub fn release_to(&mut self, now: f64, successor: &LockSpec) -> Result<(), JsValue> {
        let successor = Successor::new(&successor.config);
        self.lock
            .release_to(instant(now), successor)
            .map_err(lock_error)
    }

    /// Start from the handoff a release made for this lock, instead of
    /// `acquire` (`Lock::accept_handoff`).
    #[wasm_bindgen(js_name = acceptHandoff)]
    pub fn accept_handoff(&mut self, now: f64, handoff: WasmHandoff) -> Result<(), JsValue> {
        self.lock
            .accept_handoff(instant(now), handoff.handoff)
            .map_err(lock_error)
    }

    /// The acquire's caller left while a release was handing it the lock:
    /// give it back at once (`Lock::refuse_handoff`); drive until done.
    #[wasm_bindgen(js_name = refuseHandoff)]
    pub fn refuse_handoff(&mut self, now: f64, handoff: WasmHandoff) -> Result<(), JsValue> {
        self.lock
            .refuse_handoff(instant(now), handoff.handoff)
            .map_err(lock_error)
    }

    pub fn cancel(&mut self, now: f64) {
        self.lock.cancel(instant(now));
    }

    /// No more auto-renewal (see `Lock::stop_renewing`); no command.
    #[wasm_bindgen(js_name = stopRenewing)]
    pub fn stop_renewing(&mut self, now: f64) {
        self.lock.stop_renewing(instant(now));
    }

    /// The server's reply (`null`, number, string, bytes, or an array of those).
    #[wasm_bindgen(js_name = handleReply)]
    pub fn handle_reply(&mut self, now: f64, id: f64, reply: JsValue) {
        self.input(now, id, to_reply(&reply));
    }

    /// The server answered with an error (WRONGTYPE, NOPERM, ...).
    #[wasm_bindgen(js_name = handleError)]
    pub fn handle_error(&mut self, now: f64, id: f64, message: String) {
        self.input(now, id, Reply::Error(message));
    }

    /// The command may or may not have run (connection lost, timed out).
    #[wasm_bindgen(js_name = handleUnknown)]
    pub fn handle_unknown(&mut self, now: f64, id: f64, message: String) {
        self.input(now, id, Reply::Unknown(message));
    }

    /// Look at the lock again (the subscription is active, or was made anew).
    #[wasm_bindgen(js_name = handleWakeup)]
    pub fn handle_wakeup(&mut self, now: f64) {
        self.lock.handle_wakeup(instant(now));
    }

    /// A release message's bytes as they came: the core decides whether it
    /// is for this waiter (a fair mutex's release names one by wake id).
    #[wasm_bindgen(js_name = handleMessage)]
    pub fn handle_message(&mut self, now: f64, message: &[u8]) {
        self.lock.handle_message(instant(now), message);
    }

    #[wasm_bindgen(js_name = handleTimeout)]
    pub fn handle_timeout(&mut self, now: f64) {
        self.lock.handle_timeout(instant(now));
    }

    /// `{ id, node, sha, keys: Uint8Array[], args: Uint8Array[], waitReplicas? }`
    /// or undefined; `waitReplicas: [replicas, timeoutMs]` asks for `WAIT`
    /// right after the script, on the same connection, and the reply
    /// `[script reply, WAIT reply]`.
    #[wasm_bindgen(js_name = pollCommand)]
    pub fn poll_command(&mut self) -> JsValue {
        let Some(command) = self.lock.poll_command() else {
            return JsValue::UNDEFINED;
        };
        command_record(&command)
    }

    /// When to call `handleTimeout` next (ms on the `now` clock), if ever.
    #[wasm_bindgen(js_name = pollTimeout)]
    pub fn poll_timeout(&self) -> Option<f64> {
        self.lock.poll_timeout().map(millis)
    }

    /// `{ type, fence?, error? }` or undefined; `error` is a tagged message.
    #[wasm_bindgen(js_name = pollEvent)]
    pub fn poll_event(&mut self) -> JsValue {
        let Some(event) = self.lock.poll_event() else {
            return JsValue::UNDEFINED;
        };
        let kind = |name: &str| ("type", JsValue::from_str(name));
        let error = |e: Error| ("error", JsValue::from(lock_tag(&e)));
        match event {
            Event::Subscribe => record(&[kind("subscribe")]),
            Event::Unsubscribe => record(&[kind("unsubscribe")]),
            Event::Acquired { fence, .. } => {
                record(&[kind("acquired"), ("fence", JsValue::from(fence))])
            }
            Event::AcquireFailed(e) => record(&[kind("acquireFailed"), error(e)]),
            Event::Extended { .. } => record(&[kind("extended")]),
            Event::ExtendFailed(e) => record(&[kind("extendFailed"), error(e)]),
            Event::Released(Ok(())) => record(&[kind("released")]),
            Event::Released(Err(e)) => record(&[kind("released"), error(e)]),
            Event::Lost => record(&[kind("lost")]),
            // Released, but the server refused the PUBLISH (ACL without
            // channel rights): other clients' waiters rely on their timers.
            Event::NotPublished => record(&[kind("notPublished")]),
            // For the waiter the release was handing the lock to: its
            // lock's acceptHandoff (or refuseHandoff).
            Event::Handoff(handoff) => record(&[
                kind("handoff"),
                ("handoff", JsValue::from(WasmHandoff { handoff })),
            ]),
        }
    }

    /// `idle`, `acquiring`, `held`, `releasing` or `done`.
    #[wasm_bindgen(getter)]
    pub fn state(&self) -> String {
        match self.lock.state() {
            State::Idle => "idle",
            State::Acquiring => "acquiring",
            State::Held => "held",
            State::Releasing => "releasing",
            State::Done => "done",
        }
        .to_owned()
    }

    /// What the run loop has left to do, read after draining (the core's
    /// `Lock::progress`): `underway` (keep pumping), `holding` (held, nobody
    /// waits: renew, or stop and let it expire) or `finished` (may stop).
    #[wasm_bindgen(getter)]
    pub fn progress(&self) -> String {
        match self.lock.progress() {
            Progress::Underway => "underway",
            Progress::Holding => "holding",
            Progress::Finished => "finished",
        }
        .to_owned()
    }

    /// Whole milliseconds of validity left at `now`; 0 once lost or released.
    #[wasm_bindgen(js_name = validFor)]
    pub fn valid_for(&self, now: f64) -> f64 {
        self.lock.valid_for(instant(now)).as_millis() as f64
    }

    #[wasm_bindgen(getter)]
    pub fn lost(&self) -> bool {
        self.lock.is_lost()
    }

    /// The tagged `LOCK_LOST` message for this lease.
    #[wasm_bindgen(js_name = lostMessage)]
    pub fn lost_message(&self) -> String {
        let error = Error::LockLost {
            name: self.lock.name().clone(),
        };
        lock_tag(&error)
    }

    /// The pub/sub channel release notifications arrive on.
    #[wasm_bindgen(getter)]
    pub fn channel(&self) -> Vec<u8> {
        self.lock.keys().channel().to_vec()
    }
}

impl WasmLock {
    fn input(&mut self, now: f64, id: f64, reply: Reply) {
        self.lock
            .handle_reply(instant(now), fencelock_core::CommandId(id as u64), reply);
    }
}

/// `{ id, node, sha, keys, args, waitReplicas? }` (see `WasmLock::poll_command`).
fn command_record(command: &fencelock_core::Command) -> JsValue {
    let bytes = |items: &[fencelock_core::Bytes]| -> Array {
        items
            .iter()
            .map(|item| JsValue::from(Uint8Array::from(&**item)))
            .collect()
    };
    let mut fields = vec![
        ("id", JsValue::from(command.id.0 as f64)),
        ("node", JsValue::from(command.node as f64)),
        ("sha", JsValue::from_str(command.script.sha1())),
        ("keys", bytes(&command.keys).into()),
        ("args", bytes(&command.args).into()),
    ];
    if let Some(wait) = command.wait_replicas {
        let pair: Array = [
            JsValue::from(wait.replicas),
            JsValue::from(f64::from(wait.timeout_ms)),
        ]
        .iter()
        .collect();
        fields.push(("waitReplicas", pair.into()));
    }
    record(&fields)
}

/// The source of the script with this SHA1, for `EVAL` after `NOSCRIPT`.
#[wasm_bindgen(js_name = scriptSource)]
pub fn script_source(sha: &str) -> Option<String> {
    Script::ALL
        .iter()
        .find(|s| s.sha1() == sha)
        .map(|s| s.source().to_owned())
}

fn record(fields: &[(&str, JsValue)]) -> JsValue {
    let object = Object::new();
    for (key, value) in fields {
        // Setting a plain property on a fresh object cannot fail.
        let _ = Reflect::set(&object, &JsValue::from_str(key), value);
    }
    object.into()
}

/// A JavaScript Redis reply as the core's [`Reply`]. Anything else is an
/// unknown outcome: the core then assumes the script may have run.
fn to_reply(value: &JsValue) -> Reply {
    if absent(value) {
        return Reply::Nil;
    }
    if let Some(n) = value.as_f64() {
        return if n.fract() == 0.0 && n.abs() < 9.2e18 {
            Reply::Int(n as i64)
        } else {
            Reply::Unknown(format!("a non-integer number {n} in a reply"))
        };
    }
    if value.is_bigint() {
        return match i64::try_from(value.clone()) {
            Ok(n) => Reply::Int(n),
            Err(_) => Reply::Unknown("an integer reply out of range".to_owned()),
        };
    }
    if let Some(text) = value.as_string() {
        return Reply::Bulk(text.into_bytes());
    }
    if let Some(bytes) = value.dyn_ref::<Uint8Array>() {
        return Reply::Bulk(bytes.to_vec());
    }
    if let Some(items) = value.dyn_ref::<Array>() {
        return Reply::Array(items.iter().map(|item| to_reply(&item)).collect());
    }
    Reply::Unknown(format!("a reply of type {}", describe(value)))
}
