//! napi-rs glue between Node.js and the `fencelock` driver.
//!
//! This crate only converts JavaScript arguments into the core's validated
//! types (one constructor each, re-exported by `fencelock`, its only
//! dependency of ours) and maps errors; every lock semantic lives in the
//! driver and its core. The JavaScript package (`node/index.js`) wraps these
//! classes into the public API.
//!
//! Error protocol with `index.js`: every error thrown or rejected here has a
//! message of the form `CODE: text`, where CODE is one of
//! `NOT_ACQUIRED`, `LOCK_LOST`, `REDIS`, `CLIENT_CLOSED` (the driver's `Error::code()`),
//! `INVALID_ARGUMENT` (a value out of range: JS `RangeError`),
//! `INVALID_TYPE` (a JS value of the wrong type: JS `TypeError`) or
//! `ABORTED` (the acquire was cancelled through its `CancelHandle`). A
//! call on several names adds which of them the error is about:
//! `CODE[i]: text` (`group_error`).
//!
//! Asynchronous calls (`start*`) take a promise id from `node/calls.js` and
//! return at once; their results reach JavaScript in batches
//! ([`completions`]). An acquire settles with its [`NativeLease`], claimed
//! on the JS thread as it is delivered or, when the caller passed a signal,
//! with a [`NativeGrant`] that `client.js` claims once it knows the signal
//! did not abort; a lease that never reaches the caller is released by the
//! driver (its `Granted`), and loss is watched by the driver's
//! `Lease::on_lost`.

mod completions;
mod runtime;

use std::sync::{Arc, Mutex};

use completions::{Completions, Queue};

use fencelock::{
    ClientConfig, ClientSettings, FenceGrace, KeySpace, LockName, MaxHold, Timeout, Ttl, Wait,
};
use napi::bindgen_prelude::{BigInt, Buffer, Either, Either3, Object, Unknown};
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::{Status, ValueType};
use napi_derive::napi;
use tokio::sync::watch;

mod group;
mod ops;

type Result<T> = napi::Result<T>;

fn tagged(code: &str, message: impl std::fmt::Display) -> napi::Error {
    napi::Error::new(Status::GenericFailure, format!("{code}: {message}"))
}

/// `CODE: message`, or `CODE(detail): message` (errors.js turns a
/// NotAcquired's reason into `err.reason`, a StaleFence's accepted fence
/// into `err.accepted`).
fn lock_error(error: fencelock::Error) -> napi::Error {
    indexed_error(error, None)
}

/// The error of a call on several names (`acquireMany`, a group's
/// release): `CODE(detail)[i]: message`, `i` the place among `names` of the
/// name the error is about, so that errors.js gives the caller's own name
/// back as `err.lockName` (only an index crosses: never bytes or a token).
fn group_error<'a>(
    error: fencelock::Error,
    names: impl IntoIterator<Item = &'a [u8]>,
) -> napi::Error {
    let about = error.lock_name().map(LockName::as_bytes);
    let index = about.and_then(|about| names.into_iter().position(|name| name == about));
    indexed_error(error, index)
}

fn indexed_error(error: fencelock::Error, index: Option<usize>) -> napi::Error {
    let mut tag = error.code().to_owned();
    if let Some(detail) = error.detail() {
        tag.push_str(&format!("({detail})"));
    }
    if let Some(index) = index {
        tag.push_str(&format!("[{index}]"));
    }
    tagged(&tag, error)
}

fn type_error(what: &str, expected: &str, got: &Unknown<'_>) -> napi::Error {
    tagged(
        "INVALID_TYPE",
        format!("{what} must be {expected}, not {}", describe(got)),
    )
}

fn describe(value: &Unknown<'_>) -> &'static str {
    match value.get_type() {
        Ok(ValueType::Undefined) => "undefined",
        Ok(ValueType::Null) => "null",
        Ok(ValueType::Boolean) => "a boolean",
        Ok(ValueType::Number) => "a number",
        Ok(ValueType::String) => "a string",
        Ok(ValueType::Symbol) => "a symbol",
        Ok(ValueType::Object) => "an object",
        Ok(ValueType::Function) => "a function",
        Ok(ValueType::BigInt) => "a bigint",
        Ok(ValueType::External) => "an external",
        _ => "a value of unknown type",
    }
}

// ---------------------------------------------------------------- arguments

/// A lock name as given: the lease returns it in the same JS type.
#[derive(Clone, Debug)]
struct Name {
    name: LockName,
    is_buffer: bool,
}

type NameArg<'a> = Either3<String, Buffer, Unknown<'a>>;

fn name_arg(value: NameArg<'_>) -> Result<Name> {
    let (bytes, is_buffer) = match value {
        Either3::A(s) => (s.into_bytes(), false),
        Either3::B(b) => (b.to_vec(), true),
        Either3::C(other) => return Err(type_error("name", "a string or a Buffer", &other)),
    };
    let name = LockName::new(bytes).map_err(lock_error)?;
    Ok(Name { name, is_buffer })
}

/// A key, field or value of a fenced write: a string (UTF-8) or a Buffer.
fn data_arg(what: &str, value: NameArg<'_>) -> Result<Vec<u8>> {
    match value {
        Either3::A(s) => Ok(s.into_bytes()),
        Either3::B(b) => Ok(b.to_vec()),
        Either3::C(other) => Err(type_error(what, "a string or a Buffer", &other)),
    }
}

type NumberArg<'a> = Option<Either<f64, Unknown<'a>>>;

/// A number, if given, turned into its core type by `convert`.
fn number_arg<T>(
    what: &str,
    expected: &str,
    value: NumberArg<'_>,
    convert: impl FnOnce(f64) -> fencelock::Result<T>,
) -> Result<Option<T>> {
    match value {
        None => Ok(None),
        Some(Either::A(n)) => convert(n).map(Some).map_err(lock_error),
        Some(Either::B(other)) => Err(type_error(what, expected, &other)),
    }
}

const MILLIS: &str = "a number of milliseconds";

fn ttl_arg(what: &str, value: NumberArg<'_>) -> Result<Option<Ttl>> {
    number_arg(what, MILLIS, value, Ttl::from_millis_f64)
}

/// `object[key]`, if given, as a string (`what` names it in the message).
fn string_field(object: &Object<'_>, what: &str, key: &str) -> Result<Option<String>> {
    match object
        .get::<Option<Either<String, Unknown>>>(key)?
        .flatten()
    {
        None => Ok(None),
        Some(Either::A(value)) => Ok(Some(value)),
        Some(Either::B(other)) => Err(type_error(what, "a string", &other)),
    }
}

fn wait_arg(value: NumberArg<'_>) -> Result<Wait> {
    let ms = match value {
        None => None,
        Some(Either::A(ms)) => Some(ms),
        Some(Either::B(other)) => {
            let expected = "a number of milliseconds or undefined";
            return Err(type_error("wait", expected, &other));
        }
    };
    Wait::from_millis_f64(ms).map_err(lock_error)
}

fn bool_arg(what: &str, value: Option<Either<bool, Unknown<'_>>>) -> Result<bool> {
    match value {
        None => Ok(false),
        Some(Either::A(b)) => Ok(b),
        Some(Either::B(other)) => Err(type_error(what, "a boolean", &other)),
    }
}

type OptionsArg<'a> = Option<Either<Object<'a>, Unknown<'a>>>;

fn options_object<'a>(what: &str, value: OptionsArg<'a>) -> Result<Option<Object<'a>>> {
    match value {
        None => Ok(None),
        Some(Either::A(object)) => Ok(Some(object)),
        Some(Either::B(other)) => Err(type_error(what, "an object", &other)),
    }
}

/// A misspelled option would otherwise be ignored (`{ wiat: 100 }` waiting
/// for ever): every key must be one the caller reads.
fn known_keys(what: &str, object: &Object<'_>, known: &[&str]) -> Result<()> {
    for key in Object::keys(object)? {
        if !known.contains(&key.as_str()) {
            return Err(tagged(
                "INVALID_TYPE",
                format!(
                    "{what} has an unknown key {key:?} (known: {})",
                    known.join(", ")
                ),
            ));
        }
    }
    Ok(())
}

/// The keys of acquire / tryAcquire / withLock options.
const LOCK_OPTIONS: &[&str] = &["ttl", "wait", "autoRenew", "maxHold", "fair", "signal"];

/// `{ ttl, wait, autoRenew, maxHold, fair }` (the `signal` is handled in JavaScript).
fn lock_options(value: OptionsArg<'_>) -> Result<fencelock::LockOptions> {
    let Some(object) = options_object("options", value)? else {
        return Err(tagged(
            "INVALID_TYPE",
            "options must be an object with a ttl in milliseconds",
        ));
    };
    known_keys("options", &object, LOCK_OPTIONS)?;
    lock_fields(LockFields {
        ttl: object.get::<NumberArg>("ttl")?.flatten(),
        wait: object.get::<NumberArg>("wait")?.flatten(),
        auto_renew: object.get::<BoolArg>("autoRenew")?.flatten(),
        max_hold: object.get::<NumberArg>("maxHold")?.flatten(),
        fair: object.get::<BoolArg>("fair")?.flatten(),
    })
}

type BoolArg<'a> = Option<Either<bool, Unknown<'a>>>;

/// The values of an acquire's options, as read from the object (by
/// [`lock_options`], or by `calls.js` for a plain object: then they cross
/// as arguments, a few napi calls instead of a property lookup each).
struct LockFields<'a> {
    ttl: NumberArg<'a>,
    wait: NumberArg<'a>,
    auto_renew: BoolArg<'a>,
    max_hold: NumberArg<'a>,
    fair: BoolArg<'a>,
}

fn lock_fields(fields: LockFields<'_>) -> Result<fencelock::LockOptions> {
    let Some(ttl) = ttl_arg("options.ttl", fields.ttl)? else {
        return Err(tagged(
            "INVALID_TYPE",
            "options.ttl is required (a number of milliseconds)",
        ));
    };
    let wait = wait_arg(fields.wait)?;
    let auto_renew = bool_arg("options.autoRenew", fields.auto_renew)?;
    let max_hold = number_arg(
        "options.maxHold",
        MILLIS,
        fields.max_hold,
        MaxHold::from_millis_f64,
    )?;
    let fair = bool_arg("options.fair", fields.fair)?;
    Ok(fencelock::LockOptions::with_ttl(ttl)
        .wait_policy(wait)
        .auto_renew(auto_renew)
        .with_max_hold(max_hold)
        .fair(fair))
}

/// The keys of `Client.connect` options.
const CLIENT_OPTIONS: &[&str] = &[
    "prefix",
    "connectTimeout",
    "responseTimeout",
    "topology",
    "service",
    "replicas",
    "fenceGrace",
    "tls",
];

/// The keys of `options.tls`.
const TLS_OPTIONS: &[&str] = &[
    "ca",
    "cert",
    "key",
    "serverName",
    "dangerouslySkipVerification",
];

/// PEM as a Buffer (the data), a string holding PEM text (the data), or
/// any other string (a file path).
fn pem_arg(what: &str, object: &Object<'_>) -> Result<Option<fencelock::Pem>> {
    let key = what.rsplit('.').next().unwrap_or(what);
    match object
        .get::<Option<Either3<String, Buffer, Unknown>>>(key)?
        .flatten()
    {
        None => Ok(None),
        Some(Either3::A(text)) => Ok(Some(fencelock::Pem::from_text_or_path(text))),
        Some(Either3::B(buffer)) => Ok(Some(fencelock::Pem::Data(buffer.to_vec()))),
        Some(Either3::C(other)) => Err(type_error(
            what,
            "PEM text (a string or Buffer) or a file path",
            &other,
        )),
    }
}

/// `options.tls`: `{ ca, cert, key, serverName, dangerouslySkipVerification }`.
fn tls_options(value: OptionsArg<'_>) -> Result<fencelock::TlsOptions> {
    let Some(object) = options_object("options.tls", value)? else {
        return Ok(fencelock::TlsOptions::default());
    };
    known_keys("options.tls", &object, TLS_OPTIONS)?;
    Ok(fencelock::TlsOptions {
        ca: pem_arg("options.tls.ca", &object)?,
        client_cert: pem_arg("options.tls.cert", &object)?,
        client_key: pem_arg("options.tls.key", &object)?,
        server_name: string_field(&object, "options.tls.serverName", "serverName")?,
        dangerously_skip_verification: bool_arg(
            "options.tls.dangerouslySkipVerification",
            object
                .get::<Option<Either<bool, Unknown>>>("dangerouslySkipVerification")?
                .flatten(),
        )?,
    })
}

fn client_options(value: OptionsArg<'_>) -> Result<ClientSettings> {
    let mut options = ClientSettings::default();
    let Some(object) = options_object("options", value)? else {
        return Ok(options);
    };
    known_keys("options", &object, CLIENT_OPTIONS)?;
    if let Some(prefix) = string_field(&object, "options.prefix", "prefix")? {
        options.keyspace = KeySpace::new(prefix).map_err(lock_error)?;
    }
    for (key, timeout) in [
        ("connectTimeout", &mut options.connect_timeout),
        ("responseTimeout", &mut options.response_timeout),
    ] {
        let what = format!("options.{key}");
        let ms = object.get::<NumberArg>(key)?.flatten();
        if let Some(t) = number_arg(&what, MILLIS, ms, |ms| Timeout::from_millis_f64(&what, ms))? {
            *timeout = t;
        }
    }
    let text = |key: &str| string_field(&object, &format!("options.{key}"), key);
    options.topology =
        fencelock::Topology::parse(text("topology")?.as_deref(), text("service")?.as_deref())
            .map_err(lock_error)?;
    let replicas = object.get::<NumberArg>("replicas")?.flatten();
    if let Some(n) = number_arg(
        "options.replicas",
        "a number",
        replicas,
        fencelock::replica_count,
    )? {
        options.replicas = n;
    }
    let grace = object.get::<NumberArg>("fenceGrace")?.flatten();
    if let Some(grace) = number_arg(
        "options.fenceGrace",
        MILLIS,
        grace,
        FenceGrace::from_millis_f64,
    )? {
        options.fence_grace = grace;
    }
    options.tls = tls_options(object.get::<OptionsArg>("tls")?.flatten())?;
    Ok(options)
}

fn urls_arg(value: Either3<String, Vec<String>, Unknown<'_>>) -> Result<Vec<String>> {
    match value {
        Either3::A(url) => Ok(vec![url]),
        Either3::B(urls) => Ok(urls),
        Either3::C(other) => Err(type_error("url", "a string or an array of strings", &other)),
    }
}

// ---------------------------------------------------------------- kinds

/// What a lease holds, validated once when `client.semaphore()` or
/// `client.rwLock()` makes its handle: `new Kind('semaphore', permits)`,
/// `new Kind('read')`, `new Kind('write')`. Passed to every acquire.
#[napi(js_name = "Kind")]
#[derive(Debug)]
pub struct NativeKind {
    kind: fencelock::Kind,
}

#[napi]
impl NativeKind {
    /// `permits`: a whole number from 1 to 1,000,000 (RangeError outside,
    /// TypeError for a non-number).
    #[napi(constructor)]
    pub fn new(what: String, permits: NumberArg<'_>) -> Result<Self> {
        let kind = match what.as_str() {
            "read" => fencelock::Kind::Read,
            "write" => fencelock::Kind::Write,
            "semaphore" => {
                let permits = number_arg(
                    "options.permits",
                    "a number",
                    permits,
                    fencelock::Permits::from_f64,
                )?
                .ok_or_else(|| {
                    tagged(
                        "INVALID_TYPE",
                        "options.permits is required (a whole number from 1 to 1000000)",
                    )
                })?;
                fencelock::Kind::Semaphore(permits)
            }
            other => return Err(tagged("INVALID_TYPE", format!("unknown kind {other:?}"))),
        };
        Ok(NativeKind { kind })
    }

    /// The semaphore's permits; null for another kind.
    #[napi(getter)]
    pub fn permits(&self) -> Option<u32> {
        match self.kind {
            fencelock::Kind::Semaphore(p) => Some(p.get()),
            _ => None,
        }
    }
}

fn kind_of(kind: Option<&NativeKind>) -> fencelock::Kind {
    kind.map_or(fencelock::Kind::Mutex, |k| k.kind)
}

// ---------------------------------------------------------------- cancellation

/// Cancels one acquire: `client.js` calls `cancel()` when the caller's
/// AbortSignal fires. Before the grant the Rust future is dropped (the driver
/// sends the compensating release if a request may have reached Redis);
/// after it, [`NativeGrant::claim`] refuses and the driver releases the lease.
#[napi]
#[derive(Debug)]
pub struct CancelHandle {
    tx: watch::Sender<bool>,
}

impl Default for CancelHandle {
    fn default() -> Self {
        Self::new()
    }
}

#[napi]
impl CancelHandle {
    #[napi(constructor)]
    pub fn new() -> Self {
        CancelHandle {
            tx: watch::channel(false).0,
        }
    }

    #[napi]
    pub fn cancel(&self) {
        self.tx.send_replace(true);
    }
}

/// Resolves when `cancel()` was called; never if the handle goes away.
async fn cancelled(mut rx: watch::Receiver<bool>) {
    if rx.wait_for(|c| *c).await.is_err() {
        std::future::pending::<()>().await;
    }
}

async fn cancellable<T>(
    cancel: Option<watch::Receiver<bool>>,
    fut: impl std::future::Future<Output = fencelock::Result<T>>,
    to_error: impl FnOnce(fencelock::Error) -> napi::Error,
) -> Result<T> {
    match cancel {
        None => fut.await.map_err(to_error),
        Some(rx) => tokio::select! {
            r = fut => r.map_err(to_error),
            _ = cancelled(rx) => Err(tagged("ABORTED", "the operation was aborted")),
        },
    }
}

/// What a grant holds, taken by its one `claim()`: `None` if claimed
/// already, or if the caller's signal aborted (then it is dropped here,
/// unclaimed, and the driver releases what was granted).
fn claim_once<T>(granted: &Mutex<Option<T>>, cancel: &watch::Receiver<bool>) -> Option<T> {
    let granted = granted.lock().unwrap_or_else(|e| e.into_inner()).take()?;
    if *cancel.borrow() {
        drop(granted); // unclaimed: the driver releases it
        return None;
    }
    Some(granted)
}

/// A lease won for a JS acquire with a signal, not yet taken by its
/// caller: the driver's `Granted`. Dropped unclaimed (refused by `claim()`,
/// or garbage-collected), the driver releases the lock.
#[napi]
#[derive(Debug)]
pub struct NativeGrant {
    granted: Mutex<Option<fencelock::Granted>>,
    cancel: watch::Receiver<bool>,
    is_buffer: bool,
    calls: Arc<Queue>,
}

#[napi]
impl NativeGrant {
    /// The lease, now the caller's; null if the acquire was cancelled after
    /// the grant (the caller's signal aborted before it got the lease):
    /// then the lock is released instead. Once.
    #[napi]
    pub fn claim(&self) -> Option<NativeLease> {
        let granted = claim_once(&self.granted, &self.cancel)?;
        Some(NativeLease {
            inner: Arc::new(granted.claim()),
            is_buffer: self.is_buffer,
            calls: Arc::clone(&self.calls),
        })
    }
}

// ---------------------------------------------------------------- client

/// Connect to one Redis URL or to several independent nodes (Redlock);
/// settles `id` with the [`NativeClient`]. Its calls report to `completions`.
#[napi]
pub fn start_connect(
    completions: &Completions,
    id: u32,
    urls: Either3<String, Vec<String>, Unknown<'_>>,
    options: OptionsArg<'_>,
) -> Result<()> {
    let urls = urls_arg(urls)?;
    let config = ClientConfig::from_settings(urls, client_options(options)?).map_err(lock_error)?;
    let calls = Arc::clone(completions.queue());
    completions.queue().spawn(id, async move {
        let inner = fencelock::Client::connect_config(config)
            .await
            .map_err(lock_error)?;
        Ok(NativeClient { inner, calls })
    });
    Ok(())
}

#[napi]
#[derive(Debug)]
pub struct NativeClient {
    inner: fencelock::Client,
    calls: Arc<Queue>,
}

impl NativeClient {
    fn start(
        &self,
        id: u32,
        name: NameArg<'_>,
        options: impl FnOnce() -> Result<fencelock::LockOptions>,
        cancel: Option<&CancelHandle>,
        once: bool,
        kind: Option<&NativeKind>,
    ) -> Result<()> {
        let name = name_arg(name)?;
        let options = options()?;
        let cancel = cancel.map(|c| c.tx.subscribe());
        // Called here, not in the task: the place in the local line is
        // taken in call order.
        let acquiring = self
            .inner
            .acquire_as(kind_of(kind), name.name, &options, once);
        let calls = Arc::clone(&self.calls);
        let is_buffer = name.is_buffer;
        let grant = async move {
            let granted = cancellable(cancel.clone(), acquiring, lock_error).await?;
            Ok(granted.map(|granted| (granted, cancel, is_buffer, calls)))
        };
        self.calls.spawn_then(id, grant, |grant| {
            grant.map(|(granted, cancel, is_buffer, calls)| match cancel {
                // Claimed here, on the JS thread, as the promise settles:
                // a grant that never gets here is released by the driver.
                None => Either::A(NativeLease {
                    inner: Arc::new(granted.claim()),
                    is_buffer,
                    calls,
                }),
                // The caller's signal may still abort before it takes it.
                Some(cancel) => Either::B(NativeGrant {
                    granted: Mutex::new(Some(granted)),
                    cancel,
                    is_buffer,
                    calls,
                }),
            })
        });
        Ok(())
    }
}

#[napi]
impl NativeClient {
    /// Settles `id` with the lease or, given a `cancel` handle, the grant to
    /// claim (never null: a waiting acquire fails instead). `kind`: a
    /// semaphore permit, a read or a write lock (default: the mutex).
    #[napi]
    pub fn start_acquire(
        &self,
        id: u32,
        name: NameArg<'_>,
        options: OptionsArg<'_>,
        cancel: Option<&CancelHandle>,
        kind: Option<&NativeKind>,
    ) -> Result<()> {
        self.start(id, name, || lock_options(options), cancel, false, kind)
    }

    /// Settles `id` as [`NativeClient::start_acquire`] does, or with null if
    /// the lock is held.
    #[napi]
    pub fn start_try_acquire(
        &self,
        id: u32,
        name: NameArg<'_>,
        options: OptionsArg<'_>,
        cancel: Option<&CancelHandle>,
        kind: Option<&NativeKind>,
    ) -> Result<()> {
        self.start(id, name, || lock_options(options), cancel, true, kind)
    }

    /// [`NativeClient::start_acquire`] (or, `once`, the try) with the
    /// options' values as arguments: `calls.js` reads them from a plain
    /// object whose keys are all known, in the order `lock_options` does.
    #[napi]
    #[allow(clippy::too_many_arguments)]
    pub fn start_acquire_fields(
        &self,
        id: u32,
        name: NameArg<'_>,
        ttl: NumberArg<'_>,
        wait: NumberArg<'_>,
        auto_renew: BoolArg<'_>,
        max_hold: NumberArg<'_>,
        fair: BoolArg<'_>,
        cancel: Option<&CancelHandle>,
        kind: Option<&NativeKind>,
        once: bool,
    ) -> Result<()> {
        let fields = LockFields {
            ttl,
            wait,
            auto_renew,
            max_hold,
            fair,
        };
        self.start(id, name, || lock_fields(fields), cancel, once, kind)
    }

    /// Settles `id` with a [`group::NativeLockGroup`] of every one of
    /// `names` (all or nothing) or, given a `cancel` handle, the group
    /// grant to claim. `client.js` checks `names` is an array.
    #[napi]
    pub fn start_acquire_many(
        &self,
        id: u32,
        names: Vec<NameArg<'_>>,
        options: OptionsArg<'_>,
        cancel: Option<&CancelHandle>,
    ) -> Result<()> {
        self.start_many(id, names, options, cancel, false)
    }

    /// As [`NativeClient::start_acquire_many`], or null if a name is held.
    #[napi]
    pub fn start_try_acquire_many(
        &self,
        id: u32,
        names: Vec<NameArg<'_>>,
        options: OptionsArg<'_>,
        cancel: Option<&CancelHandle>,
    ) -> Result<()> {
        self.start_many(id, names, options, cancel, true)
    }

    /// What Redis says about `name` now (read-only), a [`NativeLockInfo`];
    /// `client.js` turns the absent `ttl` / `fence` into null. `kind`: a
    /// semaphore's holders.
    #[napi]
    pub fn start_inspect(
        &self,
        id: u32,
        name: NameArg<'_>,
        kind: Option<&NativeKind>,
    ) -> Result<()> {
        let name = name_arg(name)?;
        let client = self.inner.clone();
        let kind = kind_of(kind);
        self.calls.spawn(id, async move {
            let info = client.inspect_as(kind, name.name).await;
            info.map(ops::info).map_err(lock_error)
        });
        Ok(())
    }

    /// Remove `name` whoever holds it and advance its fence: settles `id`
    /// with it (a bigint).
    #[napi]
    pub fn start_force_release(&self, id: u32, name: NameArg<'_>) -> Result<()> {
        let name = name_arg(name)?;
        let client = self.inner.clone();
        self.calls.spawn(id, async move {
            let fence = client.force_release_named(name.name).await;
            fence.map(BigInt::from).map_err(lock_error)
        });
        Ok(())
    }

    /// A cursor over the held locks whose names match `pattern` (checked
    /// now); `client.js` iterates it.
    #[napi]
    pub fn list(&self, pattern: NameArg<'_>) -> Result<ops::NativeLockList> {
        let (pattern, is_buffer) = ops::pattern_arg(pattern)?;
        let list = self.inner.list_matching(pattern).map_err(lock_error)?;
        Ok(ops::NativeLockList::new(list, is_buffer, &self.calls))
    }

    /// A cursor over `name`'s changes (`{ interval }` in ms); `client.js`
    /// iterates it.
    #[napi]
    pub fn watch(
        &self,
        name: NameArg<'_>,
        options: OptionsArg<'_>,
    ) -> Result<ops::NativeLockWatch> {
        let name = name_arg(name)?;
        let interval = ops::watch_interval(options)?;
        let watch = self
            .inner
            .watch_named(name.name, interval)
            .map_err(lock_error)?;
        Ok(ops::NativeLockWatch::new(watch, &self.calls))
    }

    #[napi]
    pub fn start_close(&self, id: u32) {
        let client = self.inner.clone();
        self.calls.spawn(id, async move {
            client.close().await;
            Ok(())
        });
    }
}

/// `client.inspect(name)`'s answer (never a token).
#[napi(object)]
#[derive(Debug)]
pub struct NativeLockInfo {
    pub held: bool,
    /// The holder's remaining TTL in whole ms.
    pub ttl: Option<f64>,
    pub fence: Option<BigInt>,
    pub held_by_me: bool,
}

// ---------------------------------------------------------------- lease

/// Called with a tagged `LOCK_LOST: ...` message when the lease is lost.
/// Weak (unref'd): it never keeps the Node process alive.
type LostCallback = ThreadsafeFunction<String, (), String, Status, false, true>;

#[napi]
#[derive(Debug)]
pub struct NativeLease {
    inner: Arc<fencelock::Lease>,
    is_buffer: bool,
    calls: Arc<Queue>,
}

fn lost_message(lease: &fencelock::Lease) -> String {
    let name = lease.lock_name().clone();
    lock_error(fencelock::Error::LockLost { name }).reason
}

#[napi]
impl NativeLease {
    #[napi(getter)]
    pub fn name(&self) -> Either<String, Buffer> {
        let bytes = self.inner.name();
        if self.is_buffer {
            Either::B(bytes.to_vec().into())
        } else {
            Either::A(String::from_utf8_lossy(bytes).into_owned())
        }
    }

    #[napi(getter)]
    pub fn token(&self) -> String {
        self.inner.token().to_owned()
    }

    #[napi(getter)]
    pub fn fence(&self) -> BigInt {
        BigInt::from(self.inner.fence())
    }

    /// The lease's TTL in milliseconds.
    #[napi(getter)]
    pub fn ttl(&self) -> f64 {
        self.inner.ttl().as_millis() as f64
    }

    /// Whole milliseconds left before the lease must be assumed lost.
    #[napi(getter)]
    pub fn valid_for(&self) -> f64 {
        self.inner.valid_for().as_millis() as f64
    }

    #[napi(getter)]
    pub fn lost(&self) -> bool {
        self.inner.lost()
    }

    /// The tagged `LOCK_LOST: ...` message if the lease is known lost, else null.
    #[napi]
    pub fn lost_message(&self) -> Option<String> {
        self.inner.lost().then(|| lost_message(&self.inner))
    }

    /// Call `callback(message)` once if the lease is lost: the driver's one
    /// loss watcher (never after a release, over when the lease is
    /// garbage-collected).
    #[napi]
    pub fn watch_lost(&self, callback: LostCallback) {
        let message = lost_message(&self.inner);
        self.inner.on_lost(move || {
            callback.call(message, ThreadsafeFunctionCallMode::NonBlocking);
        });
    }

    #[napi]
    pub fn start_extend(&self, id: u32, ttl: NumberArg<'_>) -> Result<()> {
        let ttl = ttl_arg("ttl", ttl)?;
        let lease = Arc::clone(&self.inner);
        self.calls.spawn(id, async move {
            lease.extend_ttl(ttl).await.map_err(lock_error)
        });
        Ok(())
    }

    #[napi]
    pub fn start_release(&self, id: u32) {
        let lease = Arc::clone(&self.inner);
        self.calls
            .spawn(id, async move { lease.release().await.map_err(lock_error) });
    }

    /// Whether this lease still holds the lock, asked of Redis (a boolean).
    #[napi]
    pub fn start_held(&self, id: u32) {
        let lease = Arc::clone(&self.inner);
        self.calls
            .spawn(id, async move { lease.held().await.map_err(lock_error) });
    }

    /// Stop auto-renewal (no command; a no-op without autoRenew).
    #[napi]
    pub fn stop_renewing(&self) {
        self.inner.stop_renewing();
    }

    /// Fenced write of the hash `key` (field `value`): settles `id`, or
    /// fails with `STALE_FENCE(accepted)` if it accepted a newer fence.
    #[napi]
    pub fn start_fenced_set(&self, id: u32, key: NameArg<'_>, value: NameArg<'_>) -> Result<()> {
        let (key, value) = (data_arg("key", key)?, data_arg("value", value)?);
        let lease = Arc::clone(&self.inner);
        self.calls.spawn(id, async move {
            lease.fenced_set(key, value).await.map_err(lock_error)
        });
        Ok(())
    }

    /// Fenced write of one field of the hash `key`.
    #[napi]
    pub fn start_fenced_hset(
        &self,
        id: u32,
        key: NameArg<'_>,
        field: NameArg<'_>,
        value: NameArg<'_>,
    ) -> Result<()> {
        let key = data_arg("key", key)?;
        let (field, value) = (data_arg("field", field)?, data_arg("value", value)?);
        let lease = Arc::clone(&self.inner);
        self.calls.spawn(id, async move {
            let written = lease.fenced_hset(key, field, value).await;
            written.map_err(lock_error)
        });
        Ok(())
    }
}

// ---------------------------------------------------------------- SQL recipe

/// The statements of one fenced SQL update (the core's `FencedUpdate`, `$n`
/// placeholders): `fencelock/sql` runs them with node-postgres.
#[napi]
#[derive(Debug)]
pub struct NativeFencedUpdate {
    inner: fencelock::FencedUpdate,
    /// The writer's fence, and its lease's lock (for `StaleFence`).
    fence: u64,
    name: Option<LockName>,
}

#[napi]
impl NativeFencedUpdate {
    /// `table`: the qualified parts; `set`, `filter` (the where): column names; `fence`
    /// (a decimal string): the writer's, from the lease of lock `name` if any.
    #[napi(constructor)]
    pub fn new(
        table: Vec<String>,
        set: Vec<String>,
        filter: Vec<String>,
        fence_column: String,
        fence: String,
        name: Option<NameArg<'_>>,
    ) -> Result<Self> {
        let name = name.map(name_arg).transpose()?.map(|n| n.name);
        let fence = fence.parse::<u64>().map_err(|_| {
            tagged(
                "INVALID_ARGUMENT",
                "a fence is an integer from 0 to 2^64 - 1",
            )
        })?;
        let inner = fencelock::FencedUpdate::new(
            &table,
            &set,
            &filter,
            &fence_column,
            fencelock::Placeholders::Dollar,
        )
        .map_err(lock_error)?;
        Ok(NativeFencedUpdate { inner, fence, name })
    }

    /// The `UPDATE`: set values, fence, where values, fence.
    #[napi(getter)]
    pub fn update(&self) -> String {
        self.inner.update().to_owned()
    }

    /// The `SELECT max(fence)` after an update that changed no row.
    #[napi(getter)]
    pub fn check(&self) -> String {
        self.inner.check().to_owned()
    }

    /// Rows updated (`updated`, else 0), or throws `STALE_FENCE(accepted)`
    /// when the check found `newest` (a decimal string, or null), a newer
    /// fence than the writer's.
    #[napi]
    pub fn outcome(&self, updated: u32, newest: Option<String>) -> Result<u32> {
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
