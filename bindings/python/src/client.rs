//! `fencelock.Client` (blocking, thread-safe) and `fencelock.AsyncClient`
//! (asyncio). Both connect lazily, on first use, and again in a forked child.

use std::sync::{Arc, Mutex};

use fencelock::{ClientConfig, ClientSettings, Granted, LockName, LockOptions};
use pyo3::prelude::*;
use tokio::sync::OnceCell;

use crate::convert::{self, Name};
use crate::errors::{self, Reply};
use crate::info::LockInfo;
use crate::lease::{self, Grant, Lease, LeaseCore};
use crate::logging;
use crate::process_local::ProcessLocal;
use crate::runtime;

type Cell = Arc<OnceCell<fencelock::Client>>;

/// An acquire under way: the driver's [`Granted`] lease (released by the
/// driver if it is dropped unclaimed, as is the future itself), `None` for a
/// try-once that found the lock held.
type Acquiring = std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<Option<Granted>, fencelock::Error>> + Send>,
>;

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
    /// The constructors' keywords, converted in order: each value by its one
    /// core constructor, then the URLs and TLS by the driver's config.
    #[allow(clippy::too_many_arguments)]
    fn new(
        url: &Bound<'_, PyAny>,
        prefix: Option<&Bound<'_, PyAny>>,
        connect_timeout: Option<&Bound<'_, PyAny>>,
        response_timeout: Option<&Bound<'_, PyAny>>,
        topology: Option<&Bound<'_, PyAny>>,
        service: Option<&Bound<'_, PyAny>>,
        replicas: Option<&Bound<'_, PyAny>>,
        fence_grace: Option<&Bound<'_, PyAny>>,
        tls_ca: Option<&Bound<'_, PyAny>>,
        tls_cert: Option<&Bound<'_, PyAny>>,
        tls_key: Option<&Bound<'_, PyAny>>,
        tls_server_name: Option<&Bound<'_, PyAny>>,
        tls_dangerously_skip_verification: bool,
    ) -> PyResult<Self> {
        use convert::given;
        let tls = convert::tls(
            tls_ca,
            tls_cert,
            tls_key,
            tls_server_name,
            tls_dangerously_skip_verification,
        )?;
        let urls = convert::urls(url)?;
        let mut settings = ClientSettings {
            tls,
            ..ClientSettings::default()
        };
        if let Some(value) = given(prefix) {
            settings.keyspace = convert::prefix(value)?;
        }
        if let Some(value) = given(connect_timeout) {
            settings.connect_timeout = convert::timeout("connect_timeout", value)?;
        }
        if let Some(value) = given(response_timeout) {
            settings.response_timeout = convert::timeout("response_timeout", value)?;
        }
        settings.topology = fencelock::Topology::parse(
            convert::optional_str("topology", topology)?.as_deref(),
            convert::optional_str("service", service)?.as_deref(),
        )
        .map_err(errors::invalid)?;
        if let Some(value) = given(replicas) {
            settings.replicas = convert::count("replicas", value)?;
        }
        if let Some(value) = given(fence_grace) {
            settings.fence_grace = convert::fence_grace(value)?;
        }
        Ok(Connector {
            config: ClientConfig::from_settings(urls, settings).map_err(errors::invalid)?,
            state: Mutex::new(State {
                cell: ProcessLocal::new(Cell::default()),
                closed: false,
            }),
        })
    }

    /// The connection cell for this process (see [`State::cell`]).
    fn cell(&self, py: Python<'_>, name: &LockName) -> PyResult<Cell> {
        self.cell_for(py, name, fencelock::Operation::Acquire)
    }

    /// [`Connector::cell`]; `operation` is what a closed client refuses.
    fn cell_for(
        &self,
        py: Python<'_>,
        name: &LockName,
        operation: fencelock::Operation,
    ) -> PyResult<Cell> {
        logging::refresh(py);
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let cell = state.cell.renew(Cell::default).clone();
        if state.closed {
            let closed = fencelock::Error::closed(name, operation);
            return Err(errors::to_py(py, closed));
        }
        Ok(cell)
    }

    fn close(&self, py: Python<'_>) -> Cell {
        logging::refresh(py);
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        state.closed = true;
        state.cell.renew(Cell::default).clone()
    }

    /// A future that yields the connected driver client.
    fn client(
        &self,
        py: Python<'_>,
        name: &LockName,
    ) -> PyResult<
        impl std::future::Future<Output = Result<fencelock::Client, fencelock::Error>> + Send + 'static,
    > {
        let cell = self.cell(py, name)?;
        let config = self.config.clone();
        Ok(async move {
            cell.get_or_try_init(|| fencelock::Client::connect_config(config))
                .await
                .cloned()
        })
    }

    /// Start an acquire. On a connected client it takes its place in the
    /// local line now, during the Python call, so waiters are served in
    /// call order; on first use it does so once connected.
    fn acquire(
        &self,
        py: Python<'_>,
        name: LockName,
        options: LockOptions,
        once: bool,
    ) -> PyResult<Acquiring> {
        fn start(
            client: &fencelock::Client,
            name: LockName,
            options: &LockOptions,
            once: bool,
        ) -> Acquiring {
            if once {
                Box::pin(client.try_acquire_named(name, options).granted())
            } else {
                let acquire = client.acquire_named(name, options).granted();
                Box::pin(async move { acquire.await.map(Some) })
            }
        }
        if let Some(client) = self.cell(py, &name)?.get() {
            return Ok(start(client, name, &options, once));
        }
        let client = self.client(py, &name)?;
        Ok(Box::pin(async move {
            start(&client.await?, name, &options, once).await
        }))
    }

    /// `inspect(name)`: connects on first use, like an acquire.
    fn inspect(
        &self,
        py: Python<'_>,
        name: LockName,
    ) -> PyResult<
        impl std::future::Future<Output = Result<LockInfo, fencelock::Error>> + Send + 'static,
    > {
        let cell = self.cell_for(py, &name, fencelock::Operation::Inspect)?;
        let config = self.config.clone();
        Ok(async move {
            let client = cell
                .get_or_try_init(|| fencelock::Client::connect_config(config))
                .await?;
            client.inspect_named(name).await.map(LockInfo::new)
        })
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

/// Converted `acquire` arguments.
struct Request {
    name: Name,
    options: LockOptions,
    on_lost: Option<Py<PyAny>>,
}

fn request(
    name: &Bound<'_, PyAny>,
    ttl: &Bound<'_, PyAny>,
    wait: Option<&Bound<'_, PyAny>>,
    auto_renew: bool,
    on_lost: Option<&Bound<'_, PyAny>>,
) -> PyResult<Request> {
    let name = convert::name(name)?;
    let ttl = convert::ttl(ttl)?;
    let wait = convert::wait(wait)?;
    let on_lost = match on_lost {
        Some(callback) if !callback.is_none() => {
            if !callback.is_callable() {
                return Err(pyo3::exceptions::PyTypeError::new_err(
                    "on_lost must be callable",
                ));
            }
            Some(callback.clone().unbind())
        }
        _ => None,
    };
    Ok(Request {
        name,
        options: LockOptions::with_ttl(ttl)
            .wait_policy(wait)
            .auto_renew(auto_renew),
        on_lost,
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
    #[pyo3(signature = (url, *, prefix=None, connect_timeout=None, response_timeout=None,
        topology=None, service=None, replicas=None, fence_grace=None,
        tls_ca=None, tls_cert=None, tls_key=None, tls_server_name=None,
        tls_dangerously_skip_verification=false))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        url: &Bound<'_, PyAny>,
        prefix: Option<&Bound<'_, PyAny>>,
        connect_timeout: Option<&Bound<'_, PyAny>>,
        response_timeout: Option<&Bound<'_, PyAny>>,
        topology: Option<&Bound<'_, PyAny>>,
        service: Option<&Bound<'_, PyAny>>,
        replicas: Option<&Bound<'_, PyAny>>,
        fence_grace: Option<&Bound<'_, PyAny>>,
        tls_ca: Option<&Bound<'_, PyAny>>,
        tls_cert: Option<&Bound<'_, PyAny>>,
        tls_key: Option<&Bound<'_, PyAny>>,
        tls_server_name: Option<&Bound<'_, PyAny>>,
        tls_dangerously_skip_verification: bool,
    ) -> PyResult<Self> {
        Ok(Client {
            connector: Connector::new(
                url,
                prefix,
                connect_timeout,
                response_timeout,
                topology,
                service,
                replicas,
                fence_grace,
                tls_ca,
                tls_cert,
                tls_key,
                tls_server_name,
                tls_dangerously_skip_verification,
            )?,
        })
    }

    /// Acquire `name`, waiting as `wait` allows (`None`: until acquired).
    // <gen_stubs signature>
    #[pyo3(signature = (name, ttl, *, wait=None, auto_renew=false, on_lost=None))]
    // </gen_stubs>
    #[allow(clippy::too_many_arguments)]
    fn acquire<'py>(
        &self,
        py: Python<'py>,
        name: &Bound<'py, PyAny>,
        ttl: &Bound<'py, PyAny>,
        wait: Option<&Bound<'py, PyAny>>,
        auto_renew: bool,
        on_lost: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, Lease>> {
        let request = request(name, ttl, wait, auto_renew, on_lost)?;
        let acquiring =
            self.connector
                .acquire(py, request.name.lock.clone(), request.options, false)?;
        // Ctrl-C drops the future: the driver releases whatever it won.
        let result = runtime::block_on(py, acquiring)?;
        let granted = result
            .map_err(|e| errors::to_py(py, e))?
            .expect("a waiting acquire yields a lease or an error");
        lease::new_lease(
            py,
            LeaseCore::new(granted.claim(), request.name),
            request.on_lost.as_ref(),
        )
    }

    /// One attempt: the lease, or `None` if someone else holds the lock.
    // <gen_stubs signature try>
    #[pyo3(signature = (name, ttl, *, auto_renew=false, on_lost=None))]
    // </gen_stubs>
    fn try_acquire<'py>(
        &self,
        py: Python<'py>,
        name: &Bound<'py, PyAny>,
        ttl: &Bound<'py, PyAny>,
        auto_renew: bool,
        on_lost: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Option<Bound<'py, Lease>>> {
        let request = request(name, ttl, None, auto_renew, on_lost)?;
        let acquiring =
            self.connector
                .acquire(py, request.name.lock.clone(), request.options, true)?;
        let result = runtime::block_on(py, acquiring)?;
        match result.map_err(|e| errors::to_py(py, e))? {
            None => Ok(None),
            Some(granted) => lease::new_lease(
                py,
                LeaseCore::new(granted.claim(), request.name),
                request.on_lost.as_ref(),
            )
            .map(Some),
        }
    }

    /// What Redis says about `name` now: a `LockInfo` (read-only).
    fn inspect(&self, py: Python<'_>, name: &Bound<'_, PyAny>) -> PyResult<LockInfo> {
        let name = convert::name(name)?;
        let inspecting = self.connector.inspect(py, name.lock)?;
        runtime::block_on(py, inspecting)?.map_err(|e| errors::to_py(py, e))
    }

    /// Close the connections. Leases still held expire by their TTL.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let cell = self.connector.close(py);
        if let Some(client) = cell.get().cloned() {
            let _ = runtime::block_on(py, async move {
                client.close().await;
                Ok::<(), fencelock::Error>(())
            })?;
        }
        logging::flush(py);
        Ok(())
    }

    fn __repr__(&self) -> String {
        self.connector.repr("Client")
    }
}

impl AsyncClient {
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
            name,
            options,
            on_lost,
        } = request;
        let acquiring = self
            .connector
            .acquire(py, name.lock.clone(), options, once)?;
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
    #[pyo3(signature = (url, *, prefix=None, connect_timeout=None, response_timeout=None,
        topology=None, service=None, replicas=None, fence_grace=None,
        tls_ca=None, tls_cert=None, tls_key=None, tls_server_name=None,
        tls_dangerously_skip_verification=false))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        url: &Bound<'_, PyAny>,
        prefix: Option<&Bound<'_, PyAny>>,
        connect_timeout: Option<&Bound<'_, PyAny>>,
        response_timeout: Option<&Bound<'_, PyAny>>,
        topology: Option<&Bound<'_, PyAny>>,
        service: Option<&Bound<'_, PyAny>>,
        replicas: Option<&Bound<'_, PyAny>>,
        fence_grace: Option<&Bound<'_, PyAny>>,
        tls_ca: Option<&Bound<'_, PyAny>>,
        tls_cert: Option<&Bound<'_, PyAny>>,
        tls_key: Option<&Bound<'_, PyAny>>,
        tls_server_name: Option<&Bound<'_, PyAny>>,
        tls_dangerously_skip_verification: bool,
    ) -> PyResult<Self> {
        Ok(AsyncClient {
            connector: Connector::new(
                url,
                prefix,
                connect_timeout,
                response_timeout,
                topology,
                service,
                replicas,
                fence_grace,
                tls_ca,
                tls_cert,
                tls_key,
                tls_server_name,
                tls_dangerously_skip_verification,
            )?,
        })
    }

    /// An awaitable of a `Grant`, which the Python wrapper claims (`_claim()`
    /// gives the `AsyncLease`) once its `await` returned: a lease that never
    /// reaches the caller is released by the driver (see [`Grant`]).
    // <gen_stubs signature>
    #[pyo3(signature = (name, ttl, *, wait=None, auto_renew=false, on_lost=None))]
    // </gen_stubs>
    fn _acquire<'py>(
        &self,
        py: Python<'py>,
        name: &Bound<'py, PyAny>,
        ttl: &Bound<'py, PyAny>,
        wait: Option<&Bound<'py, PyAny>>,
        auto_renew: bool,
        on_lost: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let request = request(name, ttl, wait, auto_renew, on_lost)?;
        self.start(py, request, false)
    }

    // <gen_stubs signature try>
    #[pyo3(signature = (name, ttl, *, auto_renew=false, on_lost=None))]
    // </gen_stubs>
    fn _try_acquire<'py>(
        &self,
        py: Python<'py>,
        name: &Bound<'py, PyAny>,
        ttl: &Bound<'py, PyAny>,
        auto_renew: bool,
        on_lost: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let request = request(name, ttl, None, auto_renew, on_lost)?;
        self.start(py, request, true)
    }

    /// An awaitable of a `LockInfo` (read-only).
    fn inspect<'py>(
        &self,
        py: Python<'py>,
        name: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let name = convert::name(name)?;
        let inspecting = self.connector.inspect(py, name.lock)?;
        runtime::future_into_py(py, async move { Ok(Reply::new(inspecting.await)) })
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
