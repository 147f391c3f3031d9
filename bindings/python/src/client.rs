//! `fencelock.Client` (blocking, thread-safe) and `fencelock.AsyncClient`
//! (asyncio). Both connect lazily, on first use, and again in a forked child.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use fencelock::{ClientConfig, ClientSettings, Error, Granted, LockName, LockOptions, Operation};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use tokio::sync::OnceCell;

use crate::convert::{self, Name};
use crate::cursor::Cursor;
use crate::errors::{self, Reply};
use crate::group::{GroupGrant, LockGroup};
use crate::info::LockInfo;
use crate::kind::Kind;
use crate::lease::{self, Grant, Lease, LeaseCore};
use crate::logging;
use crate::process_local::ProcessLocal;
use crate::runtime;

type Cell = Arc<OnceCell<fencelock::Client>>;

/// The constructors' keywords (after `url`), in the stubs' order.
// <gen_stubs client-keywords>
const CLIENT_KEYWORDS: &[&str] = &[
    "prefix",
    "connect_timeout",
    "response_timeout",
    "topology",
    "service",
    "replicas",
    "fence_grace",
    "tls_ca",
    "tls_cert",
    "tls_key",
    "tls_server_name",
    "tls_dangerously_skip_verification",
];
// </gen_stubs>

/// An acquire under way: the driver's [`Granted`] lease (released by the
/// driver if it is dropped unclaimed, as is the future itself), `None` for a
/// try-once that found the lock held.
type Acquiring = Pin<Box<dyn Future<Output = Result<Option<Granted>, Error>> + Send>>;
type AcquiringMany =
    Pin<Box<dyn Future<Output = Result<Option<fencelock::GrantedGroup>, Error>> + Send>>;

/// The driver client of this process, made on first use.
#[derive(Debug)]
struct Connector {
    /// Validated once, here; each connect (first use, forked child) reuses it.
    config: ClientConfig,
    /// Locked only while attached to Python (see runtime.rs on fork safety).
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    /// In a forked child the parent's client (its connections belong to
    /// the parent's runtime) is forgotten and a new one made on first use.
    cell: ProcessLocal<Cell>,
    closed: bool,
}

impl Connector {
    /// `Client(url, **options)`: each keyword (one of [`CLIENT_KEYWORDS`])
    /// converted by its one core constructor, then the URLs and TLS by the
    /// driver's config. `None` means "not given", as for every keyword.
    fn new(
        class: &str,
        url: &Bound<'_, PyAny>,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let empty = PyDict::new(url.py());
        let options = options.unwrap_or(&empty);
        for key in options.keys() {
            let key: String = key.extract()?;
            if !CLIENT_KEYWORDS.contains(&key.as_str()) {
                return Err(PyTypeError::new_err(format!(
                    "{class}() got an unexpected keyword argument '{key}'"
                )));
            }
        }
        let get = |key: &str| -> PyResult<Option<Bound<'_, PyAny>>> {
            Ok(options.get_item(key)?.filter(|value| !value.is_none()))
        };
        let str_option = |key: &str| convert::optional_str(key, get(key)?.as_ref());
        let mut settings = ClientSettings {
            tls: fencelock::TlsOptions {
                ca: convert::pem("tls_ca", get("tls_ca")?.as_ref())?,
                client_cert: convert::pem("tls_cert", get("tls_cert")?.as_ref())?,
                client_key: convert::pem("tls_key", get("tls_key")?.as_ref())?,
                server_name: str_option("tls_server_name")?,
                dangerously_skip_verification: get("tls_dangerously_skip_verification")?
                    .map(|value| convert::flag("tls_dangerously_skip_verification", &value))
                    .transpose()?
                    .unwrap_or(false),
            },
            ..ClientSettings::default()
        };
        let urls = convert::urls(url)?;
        if let Some(value) = get("prefix")? {
            settings.keyspace = convert::prefix(&value)?;
        }
        for (key, timeout) in [
            ("connect_timeout", &mut settings.connect_timeout),
            ("response_timeout", &mut settings.response_timeout),
        ] {
            if let Some(value) = get(key)? {
                *timeout = convert::timeout(key, &value)?;
            }
        }
        settings.topology = fencelock::Topology::parse(
            str_option("topology")?.as_deref(),
            str_option("service")?.as_deref(),
        )
        .map_err(errors::invalid)?;
        if let Some(value) = get("replicas")? {
            settings.replicas = convert::count("replicas", &value)?;
        }
        if let Some(value) = get("fence_grace")? {
            settings.fence_grace = convert::fence_grace(&value)?;
        }
        Ok(Connector {
            config: ClientConfig::from_settings(urls, settings).map_err(errors::invalid)?,
            state: Mutex::new(State {
                cell: ProcessLocal::new(Cell::default()),
                closed: false,
            }),
        })
    }

    /// The connection cell for this process (see [`State::cell`]); a closed
    /// client refuses `operation` on `name`.
    fn cell(&self, py: Python<'_>, name: &LockName, operation: Operation) -> PyResult<Cell> {
        logging::refresh(py);
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let cell = state.cell.renew(Cell::default).clone();
        if state.closed {
            return Err(errors::to_py(py, Error::closed(name, operation)));
        }
        Ok(cell)
    }

    fn close(&self, py: Python<'_>) -> Cell {
        logging::refresh(py);
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        state.closed = true;
        state.cell.renew(Cell::default).clone()
    }

    /// The cell's driver client, connected on first use.
    fn connect(&self, cell: Cell) -> impl Future<Output = Result<fencelock::Client, Error>> + Send {
        let config = self.config.clone();
        async move {
            let connect = || fencelock::Client::connect_config(config);
            cell.get_or_try_init(connect).await.cloned()
        }
    }

    /// Start an acquire. On a connected client it takes its place in the
    /// local line now, during the Python call, so waiters are served in
    /// call order; on first use it does so once connected.
    fn acquire(
        &self,
        py: Python<'_>,
        kind: fencelock::Kind,
        name: LockName,
        options: LockOptions,
        once: bool,
    ) -> PyResult<Acquiring> {
        let cell = self.cell(py, &name, Operation::Acquire)?;
        if let Some(client) = cell.get() {
            return Ok(Box::pin(client.acquire_as(kind, name, &options, once)));
        }
        let connected = self.connect(cell);
        Ok(Box::pin(async move {
            let client = connected.await?;
            client.acquire_as(kind, name, &options, once).await
        }))
    }

    /// Start an `acquire_many` (the driver checks the names and options in
    /// the call, or once connected on first use).
    fn acquire_many(
        &self,
        py: Python<'_>,
        names: Vec<LockName>,
        options: LockOptions,
        once: bool,
    ) -> PyResult<AcquiringMany> {
        // The name a closed client's error names (none: the driver refuses
        // the empty list).
        let first = names.first().cloned();
        let label = first.unwrap_or_else(|| LockName::new("acquire_many").expect("a valid name"));
        let cell = self.cell(py, &label, Operation::Acquire)?;
        if let Some(client) = cell.get() {
            return Ok(Box::pin(client.acquire_many_named(names, &options, once)));
        }
        let connected = self.connect(cell);
        Ok(Box::pin(async move {
            let client = connected.await?;
            client.acquire_many_named(names, &options, once).await
        }))
    }

    /// A one-shot client operation (inspect, force-release) on `name`:
    /// connects on first use, like an acquire.
    fn run<T, F>(
        &self,
        py: Python<'_>,
        name: LockName,
        operation: Operation,
        op: impl FnOnce(fencelock::Client, LockName) -> F + Send + 'static,
    ) -> PyResult<impl Future<Output = Result<T, Error>> + Send + 'static>
    where
        F: Future<Output = Result<T, Error>> + Send,
    {
        let connected = self.connect(self.cell(py, &name, operation)?);
        Ok(async move { op(connected.await?, name).await })
    }

    /// `Client.list(pattern)`: a [`Cursor`] over the held locks matching
    /// it (the pattern is checked now; the client connects on first use).
    fn list(&self, py: Python<'_>, pattern: &Bound<'_, PyAny>) -> PyResult<Cursor> {
        let (pattern, is_bytes) = convert::pattern(pattern)?;
        let connected = self.connect(self.cell(py, pattern.as_name(), Operation::List)?);
        Ok(Cursor::list(
            async move { connected.await?.list_matching(pattern) },
            !is_bytes,
        ))
    }

    /// `Client.watch(name, interval=...)`: a [`Cursor`] over the lock's changes.
    fn watch(
        &self,
        py: Python<'_>,
        name: &Bound<'_, PyAny>,
        interval: &Bound<'_, PyAny>,
    ) -> PyResult<Cursor> {
        let name = convert::name(name)?.lock;
        let interval = convert::timeout("interval", interval)?;
        let connected = self.connect(self.cell(py, &name, Operation::Watch)?);
        Ok(Cursor::watch(async move {
            connected.await?.watch_named(name, interval)
        }))
    }

    fn repr(&self, class: &str) -> String {
        // No URLs: they may carry a password.
        format!(
            "<fencelock.{class} nodes={} prefix={:?}>",
            self.config.node_count(),
            String::from_utf8_lossy(self.config.prefix())
        )
    }
}

fn inspect(
    py: Python<'_>,
    connector: &Connector,
    kind: fencelock::Kind,
    name: &Bound<'_, PyAny>,
) -> PyResult<impl Future<Output = Result<LockInfo, Error>> + Send + 'static> {
    let name = convert::name(name)?.lock;
    connector.run(
        py,
        name,
        Operation::Inspect,
        move |client, name| async move { client.inspect_as(kind, name).await.map(LockInfo::new) },
    )
}

fn force_release(
    py: Python<'_>,
    connector: &Connector,
    name: &Bound<'_, PyAny>,
) -> PyResult<impl Future<Output = Result<u64, Error>> + Send + 'static> {
    let name = convert::name(name)?.lock;
    connector.run(
        py,
        name,
        Operation::ForceRelease,
        |client, name| async move { client.force_release_named(name).await },
    )
}

/// Converted `acquire` arguments.
struct Request {
    kind: fencelock::Kind,
    name: Name,
    options: LockOptions,
    on_lost: Option<Py<PyAny>>,
}

fn request(
    name: &Bound<'_, PyAny>,
    ttl: &Bound<'_, PyAny>,
    wait: Option<&Bound<'_, PyAny>>,
    auto_renew: bool,
    max_hold: Option<&Bound<'_, PyAny>>,
    on_lost: Option<&Bound<'_, PyAny>>,
    fair: bool,
) -> PyResult<Request> {
    let name = convert::name(name)?;
    let ttl = convert::ttl(ttl)?;
    let wait = convert::wait(wait)?;
    let max_hold = convert::max_hold(max_hold)?;
    let on_lost = convert::given(on_lost).map(convert::callback).transpose()?;
    Ok(Request {
        kind: fencelock::Kind::Mutex,
        name,
        options: LockOptions::with_ttl(ttl)
            .wait_policy(wait)
            .auto_renew(auto_renew)
            .with_max_hold(max_hold)
            .fair(fair),
        on_lost,
    })
}

/// Converted `acquire_many` arguments.
struct ManyRequest {
    names: Vec<Name>,
    options: LockOptions,
}

fn many_request(
    names: &Bound<'_, PyAny>,
    ttl: &Bound<'_, PyAny>,
    wait: Option<&Bound<'_, PyAny>>,
    auto_renew: bool,
    max_hold: Option<&Bound<'_, PyAny>>,
) -> PyResult<ManyRequest> {
    let names = convert::names(names)?;
    let ttl = convert::ttl(ttl)?;
    let wait = convert::wait(wait)?;
    let max_hold = convert::max_hold(max_hold)?;
    Ok(ManyRequest {
        names,
        options: LockOptions::with_ttl(ttl)
            .wait_policy(wait)
            .auto_renew(auto_renew)
            .with_max_hold(max_hold),
    })
}

/// A blocking client: one Redis URL, or a list of independent Redis URLs
/// (Redlock). Thread-safe; blocking calls release the GIL.
#[pyclass(module = "fencelock._native", name = "Client", frozen, subclass)]
#[derive(Debug)]
pub struct Client {
    connector: Connector,
}

#[pymethods]
impl Client {
    #[new]
    #[pyo3(signature = (url, **options))]
    fn new(url: &Bound<'_, PyAny>, options: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        let connector = Connector::new("Client", url, options)?;
        Ok(Client { connector })
    }

    /// Acquire `name`, waiting as `wait` allows (`None`: until acquired).
    // <gen_stubs signature>
    #[pyo3(signature = (name, ttl, *, wait=None, auto_renew=false, max_hold=None, on_lost=None, fair=false))]
    // </gen_stubs>
    #[allow(clippy::too_many_arguments)]
    fn acquire<'py>(
        &self,
        py: Python<'py>,
        name: &Bound<'py, PyAny>,
        ttl: &Bound<'py, PyAny>,
        wait: Option<&Bound<'py, PyAny>>,
        auto_renew: bool,
        max_hold: Option<&Bound<'py, PyAny>>,
        on_lost: Option<&Bound<'py, PyAny>>,
        fair: bool,
    ) -> PyResult<Bound<'py, Lease>> {
        let request = request(name, ttl, wait, auto_renew, max_hold, on_lost, fair)?;
        let lease = self.acquire_blocking(py, request, false)?;
        Ok(lease.expect("a waiting acquire yields a lease or an error"))
    }

    /// One attempt: the lease, or `None` if someone else holds the lock.
    // <gen_stubs signature try>
    #[pyo3(signature = (name, ttl, *, auto_renew=false, max_hold=None, on_lost=None, fair=false))]
    // </gen_stubs>
    #[allow(clippy::too_many_arguments)]
    fn try_acquire<'py>(
        &self,
        py: Python<'py>,
        name: &Bound<'py, PyAny>,
        ttl: &Bound<'py, PyAny>,
        auto_renew: bool,
        max_hold: Option<&Bound<'py, PyAny>>,
        on_lost: Option<&Bound<'py, PyAny>>,
        fair: bool,
    ) -> PyResult<Option<Bound<'py, Lease>>> {
        let request = request(name, ttl, None, auto_renew, max_hold, on_lost, fair)?;
        self.acquire_blocking(py, request, true)
    }

    /// Acquire every one of `names`, all or nothing, waiting as `wait`
    /// allows: a `LockGroup` of mutex leases.
    // <gen_stubs signature many>
    #[pyo3(signature = (names, ttl, *, wait=None, auto_renew=false, max_hold=None))]
    // </gen_stubs>
    fn acquire_many(
        &self,
        py: Python<'_>,
        names: &Bound<'_, PyAny>,
        ttl: &Bound<'_, PyAny>,
        wait: Option<&Bound<'_, PyAny>>,
        auto_renew: bool,
        max_hold: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<LockGroup> {
        let request = many_request(names, ttl, wait, auto_renew, max_hold)?;
        let group = self.acquire_many_blocking(py, request, false)?;
        Ok(group.expect("a waiting acquire yields a group or an error"))
    }

    /// One attempt of `acquire_many`: the group, or `None` if any name is
    /// held by someone else (nothing of the group is held then).
    // <gen_stubs signature many try>
    #[pyo3(signature = (names, ttl, *, auto_renew=false, max_hold=None))]
    // </gen_stubs>
    fn try_acquire_many(
        &self,
        py: Python<'_>,
        names: &Bound<'_, PyAny>,
        ttl: &Bound<'_, PyAny>,
        auto_renew: bool,
        max_hold: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Option<LockGroup>> {
        let request = many_request(names, ttl, None, auto_renew, max_hold)?;
        self.acquire_many_blocking(py, request, true)
    }

    /// What Redis says about `name` now: a `LockInfo` (read-only).
    fn inspect(&self, py: Python<'_>, name: &Bound<'_, PyAny>) -> PyResult<LockInfo> {
        self._inspect_as(py, &Kind(fencelock::Kind::Mutex), name)
    }

    /// `acquire` of a lease of `kind` (a semaphore permit, a read or a
    /// write lock): `Semaphore.acquire`, `RwSide.acquire`.
    // <gen_stubs signature as>
    #[pyo3(signature = (kind, name, ttl, *, wait=None, auto_renew=false, max_hold=None, on_lost=None))]
    // </gen_stubs>
    #[allow(clippy::too_many_arguments)]
    fn _acquire_as<'py>(
        &self,
        py: Python<'py>,
        kind: &Kind,
        name: &Bound<'py, PyAny>,
        ttl: &Bound<'py, PyAny>,
        wait: Option<&Bound<'py, PyAny>>,
        auto_renew: bool,
        max_hold: Option<&Bound<'py, PyAny>>,
        on_lost: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, Lease>> {
        let request = request(name, ttl, wait, auto_renew, max_hold, on_lost, false)?;
        let request = Request {
            kind: kind.0,
            ..request
        };
        let lease = self.acquire_blocking(py, request, false)?;
        Ok(lease.expect("a waiting acquire yields a lease or an error"))
    }

    /// `try_acquire` of a lease of `kind`.
    // <gen_stubs signature as try>
    #[pyo3(signature = (kind, name, ttl, *, auto_renew=false, max_hold=None, on_lost=None))]
    // </gen_stubs>
    #[allow(clippy::too_many_arguments)]
    fn _try_acquire_as<'py>(
        &self,
        py: Python<'py>,
        kind: &Kind,
        name: &Bound<'py, PyAny>,
        ttl: &Bound<'py, PyAny>,
        auto_renew: bool,
        max_hold: Option<&Bound<'py, PyAny>>,
        on_lost: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Option<Bound<'py, Lease>>> {
        let request = request(name, ttl, None, auto_renew, max_hold, on_lost, false)?;
        let request = Request {
            kind: kind.0,
            ..request
        };
        self.acquire_blocking(py, request, true)
    }

    /// `inspect` of `kind`'s keys (`Semaphore.inspect`).
    fn _inspect_as(
        &self,
        py: Python<'_>,
        kind: &Kind,
        name: &Bound<'_, PyAny>,
    ) -> PyResult<LockInfo> {
        let inspecting = inspect(py, &self.connector, kind.0, name)?;
        runtime::block_on(py, inspecting)?.map_err(|e| errors::to_py(py, e))
    }

    /// Remove `name` whoever holds it and advance its fence (see the README's
    /// "Force-release"); returns the new fence. Logged as a warning.
    fn force_release(&self, py: Python<'_>, name: &Bound<'_, PyAny>) -> PyResult<u64> {
        let forcing = force_release(py, &self.connector, name)?;
        runtime::block_on(py, forcing)?.map_err(|e| errors::to_py(py, e))
    }

    /// A cursor over the held locks whose names match `pattern` (see
    /// `fencelock.Client.list`, which iterates it).
    fn _list(&self, py: Python<'_>, pattern: &Bound<'_, PyAny>) -> PyResult<Cursor> {
        self.connector.list(py, pattern)
    }

    /// A cursor over `name`'s changes (see `fencelock.Client.watch`).
    fn _watch(
        &self,
        py: Python<'_>,
        name: &Bound<'_, PyAny>,
        interval: &Bound<'_, PyAny>,
    ) -> PyResult<Cursor> {
        self.connector.watch(py, name, interval)
    }

    /// Close the connections. Leases still held expire by their TTL.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let cell = self.connector.close(py);
        if let Some(client) = cell.get().cloned() {
            let _ = runtime::block_on(py, async move {
                client.close().await;
                Ok::<(), Error>(())
            })?;
        }
        logging::flush(py);
        Ok(())
    }

    fn __repr__(&self) -> String {
        self.connector.repr("Client")
    }
}

impl Client {
    /// Wait for the acquire with the GIL released. Ctrl-C drops the future:
    /// the driver releases whatever it won.
    fn acquire_blocking<'py>(
        &self,
        py: Python<'py>,
        request: Request,
        once: bool,
    ) -> PyResult<Option<Bound<'py, Lease>>> {
        let name = request.name.lock.clone();
        let acquiring = self
            .connector
            .acquire(py, request.kind, name, request.options, once)?;
        let result = runtime::block_on(py, acquiring)?.map_err(|e| errors::to_py(py, e))?;
        let Some(granted) = result else {
            return Ok(None);
        };
        let core = LeaseCore::new(granted.claim(), request.name);
        lease::new_lease(py, core, request.on_lost.as_ref()).map(Some)
    }
}

impl Client {
    /// Wait for the group with the GIL released (Ctrl-C drops the future:
    /// the driver gives back whatever it set).
    fn acquire_many_blocking(
        &self,
        py: Python<'_>,
        request: ManyRequest,
        once: bool,
    ) -> PyResult<Option<LockGroup>> {
        let names = request.names.iter().map(|n| n.lock.clone()).collect();
        let acquiring = self
            .connector
            .acquire_many(py, names, request.options, once)?;
        let result = runtime::block_on(py, acquiring)?.map_err(|e| errors::to_py(py, e))?;
        result
            .map(|granted| LockGroup::new(py, granted.claim(), request.names))
            .transpose()
    }
}

impl AsyncClient {
    /// An awaitable of a [`GroupGrant`] (or `None`), claimed as a `Grant`.
    fn start_many<'py>(
        &self,
        py: Python<'py>,
        request: ManyRequest,
        once: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let event_loop = pyo3_async_runtimes::get_running_loop(py)?.unbind();
        let ManyRequest { names, options } = request;
        let locks = names.iter().map(|n| n.lock.clone()).collect();
        let acquiring = self.connector.acquire_many(py, locks, options, once)?;
        runtime::future_into_py(py, async move {
            let result = acquiring.await;
            Ok(Reply::new(result.map(|maybe| {
                maybe.map(|granted| GroupGrant::new(granted, names, event_loop))
            })))
        })
    }

    /// An awaitable of a [`Grant`] (or `None`). Cancelling it drops the
    /// acquire; a lease won meanwhile is dropped unclaimed with the result:
    /// either way the driver leaves no lock behind.
    fn start<'py>(
        &self,
        py: Python<'py>,
        request: Request,
        once: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let event_loop = pyo3_async_runtimes::get_running_loop(py)?.unbind();
        let Request {
            kind,
            name,
            options,
            on_lost,
        } = request;
        let acquiring = self
            .connector
            .acquire(py, kind, name.lock.clone(), options, once)?;
        runtime::future_into_py(py, async move {
            let result = acquiring.await;
            Ok(Reply::new(result.map(|maybe| {
                maybe.map(|granted| Grant::new(granted, name, event_loop, on_lost))
            })))
        })
    }
}

/// The asyncio client: the same operations as awaitables. Cancelling an
/// awaiting task leaves no lock behind.
#[pyclass(module = "fencelock._native", name = "AsyncClient", frozen, subclass)]
#[derive(Debug)]
pub struct AsyncClient {
    connector: Connector,
}

#[pymethods]
impl AsyncClient {
    #[new]
    #[pyo3(signature = (url, **options))]
    fn new(url: &Bound<'_, PyAny>, options: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        let connector = Connector::new("AsyncClient", url, options)?;
        Ok(AsyncClient { connector })
    }

    /// An awaitable of a `Grant`, which the Python wrapper claims (`_claim()`
    /// gives the `AsyncLease`) once its `await` returned: a lease that never
    /// reaches the caller is released by the driver (see [`Grant`]).
    // <gen_stubs signature>
    #[pyo3(signature = (name, ttl, *, wait=None, auto_renew=false, max_hold=None, on_lost=None, fair=false))]
    // </gen_stubs>
    #[allow(clippy::too_many_arguments)]
    fn _acquire<'py>(
        &self,
        py: Python<'py>,
        name: &Bound<'py, PyAny>,
        ttl: &Bound<'py, PyAny>,
        wait: Option<&Bound<'py, PyAny>>,
        auto_renew: bool,
        max_hold: Option<&Bound<'py, PyAny>>,
        on_lost: Option<&Bound<'py, PyAny>>,
        fair: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let request = request(name, ttl, wait, auto_renew, max_hold, on_lost, fair)?;
        self.start(py, request, false)
    }

    // <gen_stubs signature try>
    #[pyo3(signature = (name, ttl, *, auto_renew=false, max_hold=None, on_lost=None, fair=false))]
    // </gen_stubs>
    #[allow(clippy::too_many_arguments)]
    fn _try_acquire<'py>(
        &self,
        py: Python<'py>,
        name: &Bound<'py, PyAny>,
        ttl: &Bound<'py, PyAny>,
        auto_renew: bool,
        max_hold: Option<&Bound<'py, PyAny>>,
        on_lost: Option<&Bound<'py, PyAny>>,
        fair: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let request = request(name, ttl, None, auto_renew, max_hold, on_lost, fair)?;
        self.start(py, request, true)
    }

    /// An awaitable of a `GroupGrant` for `acquire_many` (claimed by the
    /// Python wrapper once its `await` returned).
    // <gen_stubs signature many>
    #[pyo3(signature = (names, ttl, *, wait=None, auto_renew=false, max_hold=None))]
    // </gen_stubs>
    fn _acquire_many<'py>(
        &self,
        py: Python<'py>,
        names: &Bound<'py, PyAny>,
        ttl: &Bound<'py, PyAny>,
        wait: Option<&Bound<'py, PyAny>>,
        auto_renew: bool,
        max_hold: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let request = many_request(names, ttl, wait, auto_renew, max_hold)?;
        self.start_many(py, request, false)
    }

    // <gen_stubs signature many try>
    #[pyo3(signature = (names, ttl, *, auto_renew=false, max_hold=None))]
    // </gen_stubs>
    fn _try_acquire_many<'py>(
        &self,
        py: Python<'py>,
        names: &Bound<'py, PyAny>,
        ttl: &Bound<'py, PyAny>,
        auto_renew: bool,
        max_hold: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let request = many_request(names, ttl, None, auto_renew, max_hold)?;
        self.start_many(py, request, true)
    }

    /// An awaitable of a `LockInfo` (read-only).
    fn inspect<'py>(
        &self,
        py: Python<'py>,
        name: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self._inspect_as(py, &Kind(fencelock::Kind::Mutex), name)
    }

    /// An awaitable of a `Grant` of a lease of `kind` (see `_acquire`).
    // <gen_stubs signature as>
    #[pyo3(signature = (kind, name, ttl, *, wait=None, auto_renew=false, max_hold=None, on_lost=None))]
    // </gen_stubs>
    #[allow(clippy::too_many_arguments)]
    fn _acquire_as<'py>(
        &self,
        py: Python<'py>,
        kind: &Kind,
        name: &Bound<'py, PyAny>,
        ttl: &Bound<'py, PyAny>,
        wait: Option<&Bound<'py, PyAny>>,
        auto_renew: bool,
        max_hold: Option<&Bound<'py, PyAny>>,
        on_lost: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let request = request(name, ttl, wait, auto_renew, max_hold, on_lost, false)?;
        self.start(
            py,
            Request {
                kind: kind.0,
                ..request
            },
            false,
        )
    }

    // <gen_stubs signature as try>
    #[pyo3(signature = (kind, name, ttl, *, auto_renew=false, max_hold=None, on_lost=None))]
    // </gen_stubs>
    #[allow(clippy::too_many_arguments)]
    fn _try_acquire_as<'py>(
        &self,
        py: Python<'py>,
        kind: &Kind,
        name: &Bound<'py, PyAny>,
        ttl: &Bound<'py, PyAny>,
        auto_renew: bool,
        max_hold: Option<&Bound<'py, PyAny>>,
        on_lost: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let request = request(name, ttl, None, auto_renew, max_hold, on_lost, false)?;
        self.start(
            py,
            Request {
                kind: kind.0,
                ..request
            },
            true,
        )
    }

    /// An awaitable of a `LockInfo` of `kind`'s keys.
    fn _inspect_as<'py>(
        &self,
        py: Python<'py>,
        kind: &Kind,
        name: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let inspecting = inspect(py, &self.connector, kind.0, name)?;
        runtime::future_into_py(py, async move { Ok(Reply::new(inspecting.await)) })
    }

    /// An awaitable of the new fence (see `Client.force_release`).
    fn force_release<'py>(
        &self,
        py: Python<'py>,
        name: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let forcing = force_release(py, &self.connector, name)?;
        runtime::future_into_py(py, async move { Ok(Reply::new(forcing.await)) })
    }

    /// A cursor over the held locks whose names match `pattern` (see
    /// `fencelock.AsyncClient.list`, which iterates it asynchronously).
    fn _list(&self, py: Python<'_>, pattern: &Bound<'_, PyAny>) -> PyResult<Cursor> {
        self.connector.list(py, pattern)
    }

    /// A cursor over `name`'s changes (see `fencelock.AsyncClient.watch`).
    fn _watch(
        &self,
        py: Python<'_>,
        name: &Bound<'_, PyAny>,
        interval: &Bound<'_, PyAny>,
    ) -> PyResult<Cursor> {
        self.connector.watch(py, name, interval)
    }

    fn close<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let cell = self.connector.close(py);
        runtime::future_into_py(py, async move {
            if let Some(client) = cell.get().cloned() {
                client.close().await;
            }
            // Off the runtime's workers: the log thread may wait for the GIL.
            let _ = tokio::task::spawn_blocking(logging::flush_wait).await;
            Ok(())
        })
    }

    fn __repr__(&self) -> String {
        self.connector.repr("AsyncClient")
    }
}
