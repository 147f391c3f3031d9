//! `_native.Cursor`: the one native handle behind `Client.list` /
//! `Client.watch` and their asyncio forms. It opens the driver's
//! [`LockList`] or [`LockWatch`] on first use (connecting the client, as an
//! acquire does) and hands out one item per `next()`: blocking with the GIL
//! released (Ctrl-C works), or as an awaitable (`next_async()`, cancel-safe).
//! The Python wrappers turn it into an iterator or an async iterator.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use fencelock::{Error, ListedLock, LockList, LockWatch};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use tokio::sync::Mutex;

use crate::convert;
use crate::errors::{self, Reply};
use crate::info::LockInfo;
use crate::process_local::ProcessLocal;
use crate::runtime;

type Opening<S> = Pin<Box<dyn Future<Output = Result<S, Error>> + Send>>;

/// The driver object, once opened (or why it could not be).
enum State<S> {
    Opening(Opening<S>),
    Open(S),
    Failed(Error),
}

/// What a cursor walks.
enum Walk {
    List {
        list: Mutex<State<LockList>>,
        /// Names come back as `str` (when UTF-8) unless the pattern was bytes.
        as_str: bool,
    },
    Watch(Mutex<State<LockWatch>>),
}

/// One item: a listed lock `(name, LockInfo)`, or a watched change.
enum Item {
    Listed(ListedLock, bool),
    Changed(fencelock::LockInfo),
}

impl<'py> IntoPyObject<'py> for Item {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Self::Output> {
        match self {
            Item::Listed(lock, as_str) => {
                let name = convert::found_name(py, &lock.name, as_str);
                let info = Bound::new(py, LockInfo::new(lock.info))?.into_any();
                Ok(PyTuple::new(py, [name, info])?.into_any())
            }
            Item::Changed(info) => Ok(Bound::new(py, LockInfo::new(info))?.into_any()),
        }
    }
}

async fn open<S>(state: &Mutex<State<S>>) -> Result<tokio::sync::MappedMutexGuard<'_, S>, Error> {
    let mut guard = state.lock().await;
    if let State::Opening(opening) = &mut *guard {
        *guard = match opening.await {
            Ok(opened) => State::Open(opened),
            Err(e) => State::Failed(e),
        };
    }
    if let State::Failed(e) = &*guard {
        return Err(e.clone());
    }
    Ok(tokio::sync::MutexGuard::map(guard, |state| match state {
        State::Open(opened) => opened,
        _ => unreachable!("opened above"),
    }))
}

impl Walk {
    /// The next item; `None` once a list is read to its end.
    async fn step(&self) -> Result<Option<Item>, Error> {
        match self {
            Walk::List { list, as_str } => {
                let listed = open(list).await?.next().await?;
                Ok(listed.map(|lock| Item::Listed(lock, *as_str)))
            }
            Walk::Watch(watch) => Ok(Some(Item::Changed(open(watch).await?.next().await?))),
        }
    }
}

/// See the module docs.
#[pyclass(module = "fencelock._native", name = "Cursor", frozen)]
pub struct Cursor {
    /// Its connections belong to the process that made it (a forked child
    /// would wait on a runtime that is not there).
    walk: ProcessLocal<Arc<Walk>>,
}

impl std::fmt::Debug for Cursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Cursor")
    }
}

impl Cursor {
    pub fn list(
        opening: impl Future<Output = Result<LockList, Error>> + Send + 'static,
        as_str: bool,
    ) -> Cursor {
        let list = Mutex::new(State::Opening(Box::pin(opening)));
        Cursor {
            walk: ProcessLocal::new(Arc::new(Walk::List { list, as_str })),
        }
    }

    pub fn watch(
        opening: impl Future<Output = Result<LockWatch, Error>> + Send + 'static,
    ) -> Cursor {
        let watch = Mutex::new(State::Opening(Box::pin(opening)));
        Cursor {
            walk: ProcessLocal::new(Arc::new(Walk::Watch(watch))),
        }
    }

    fn walk(&self) -> PyResult<Arc<Walk>> {
        self.walk.get().cloned().ok_or_else(|| {
            PyRuntimeError::new_err(
                "this list or watch was started by another process (before os.fork()); \
                 a forked child must start its own",
            )
        })
    }
}

#[pymethods]
impl Cursor {
    /// The next item, waiting with the GIL released; `None` at the end of
    /// a list.
    fn next(&self, py: Python<'_>) -> PyResult<Option<Item>> {
        let walk = self.walk()?;
        runtime::block_on(py, async move { walk.step().await })?.map_err(|e| errors::to_py(py, e))
    }

    /// An awaitable of the next item (`None` at the end of a list).
    fn next_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let walk = self.walk()?;
        runtime::future_into_py(py, async move { Ok(Reply::new(walk.step().await)) })
    }
}
