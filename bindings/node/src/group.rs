//! `client.acquireMany(names)`: several mutexes, all or nothing. Settles
//! with a [`NativeLockGroup`] (its leases are ordinary [`NativeLease`]s,
//! released together by the driver) or, given a `cancel` handle, a
//! [`NativeGroupGrant`] that `client.js` claims as it does a `NativeGrant`.

use std::sync::{Arc, Mutex};

use napi_derive::napi;
use tokio::sync::watch;

use crate::completions::Queue;
use fencelock::LockName;

use crate::{
    cancellable, claim_once, group_error, lock_options, name_arg, CancelHandle, NameArg,
    NativeClient, NativeLease, OptionsArg, Result,
};

/// The leases of one `acquireMany`, in the order the names were given.
#[napi]
#[derive(Debug)]
pub struct NativeLockGroup {
    leases: Vec<Arc<fencelock::Lease>>,
    is_buffer: Vec<bool>,
    calls: Arc<Queue>,
}

impl NativeLockGroup {
    fn new(group: fencelock::LockGroup, is_buffer: Vec<bool>, calls: Arc<Queue>) -> Self {
        NativeLockGroup {
            leases: group.into_leases().into_iter().map(Arc::new).collect(),
            is_buffer,
            calls,
        }
    }
}

#[napi]
impl NativeLockGroup {
    /// Each lease's handle (`client.js` wraps them in `Lease`s once).
    #[napi]
    pub fn leases(&self) -> Vec<NativeLease> {
        self.leases
            .iter()
            .zip(&self.is_buffer)
            .map(|(lease, &is_buffer)| NativeLease {
                inner: Arc::clone(lease),
                is_buffer,
                calls: Arc::clone(&self.calls),
            })
            .collect()
    }

    /// Release every lease: LOCK_LOST if one was lost (the others are
    /// released all the same).
    #[napi]
    pub fn start_release(&self, id: u32) {
        let leases = self.leases.clone();
        self.calls.spawn(id, async move {
            fencelock::LockGroup::release_leases(leases.iter().map(|l| &**l))
                .await
                .map_err(|e| group_error(e, leases.iter().map(|l| l.name())))
        });
    }
}

/// A group won for an `acquireMany` with a signal, not yet taken by its
/// caller; dropped unclaimed, the driver releases every lease of it.
#[napi]
#[derive(Debug)]
pub struct NativeGroupGrant {
    granted: Mutex<Option<fencelock::GrantedGroup>>,
    cancel: watch::Receiver<bool>,
    is_buffer: Vec<bool>,
    calls: Arc<Queue>,
}

#[napi]
impl NativeGroupGrant {
    /// The group, now the caller's; null if the signal aborted after the
    /// grant (then every lease is released instead). Once.
    #[napi]
    pub fn claim(&self) -> Option<NativeLockGroup> {
        let granted = claim_once(&self.granted, &self.cancel)?;
        let calls = Arc::clone(&self.calls);
        Some(NativeLockGroup::new(
            granted.claim(),
            self.is_buffer.clone(),
            calls,
        ))
    }
}

impl NativeClient {
    pub(crate) fn start_many(
        &self,
        id: u32,
        names: Vec<NameArg<'_>>,
        options: OptionsArg<'_>,
        cancel: Option<&CancelHandle>,
        once: bool,
    ) -> Result<()> {
        let names = names
            .into_iter()
            .map(name_arg)
            .collect::<Result<Vec<_>>>()?;
        let options = lock_options(options)?;
        let cancel = cancel.map(|c| c.tx.subscribe());
        let is_buffer: Vec<bool> = names.iter().map(|n| n.is_buffer).collect();
        let names: Vec<LockName> = names.into_iter().map(|n| n.name).collect();
        let acquiring = self.inner.acquire_many_named(names.clone(), &options, once);
        let calls = Arc::clone(&self.calls);
        let grant = async move {
            let to_error = |e| group_error(e, names.iter().map(LockName::as_bytes));
            let granted = cancellable(cancel.clone(), acquiring, to_error).await?;
            Ok(granted.map(|granted| (granted, cancel, is_buffer, calls)))
        };
        self.calls.spawn_then(id, grant, |grant| {
            grant.map(|(granted, cancel, is_buffer, calls)| match cancel {
                // Claimed here, on the JS thread, as the promise settles.
                None => napi::bindgen_prelude::Either::A(NativeLockGroup::new(
                    granted.claim(),
                    is_buffer,
                    calls,
                )),
                Some(cancel) => napi::bindgen_prelude::Either::B(NativeGroupGrant {
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
