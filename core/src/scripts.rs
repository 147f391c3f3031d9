//! The Lua scripts, their SHA1s (for EVALSHA), and how to read their replies.
//! The `.lua` files are the source of truth; a unit test pins the SHA1s.

/// One of fencelock's server-side scripts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Script {
    /// `KEYS[lock, fence]`, `ARGV[token, ttl_ms, fence_ttl_ms]` →
    /// `{1, "fence"}` (a decimal u64) or `{0, pttl}`.
    Acquire,
    /// `KEYS[lock, channel?]`, `ARGV[token, "SPUBLISH"?]` → 1 released, 2 released but the
    /// PUBLISH was refused, 0 not ours; publishes only when the channel is given.
    Release,
    /// `KEYS[lock, fence]`, `ARGV[token, ttl_ms, fence_ttl_ms]` → 1 extended,
    /// 0 not ours.
    Extend,
    /// `KEYS[fence]`, `ARGV[fence, fence_ttl_ms]` → the counter (a decimal
    /// string) after set-if-greater.
    RaiseFence,
    /// `KEYS[lock, fence]`, `ARGV[token, ttl_ms, fence, fence_ttl_ms]` → 1 if
    /// the node holds our token now (put back with SET NX), 0 if someone
    /// else's. Sent only while a majority holds our token.
    Reclaim,
    /// `KEYS[lock, fence]`, `ARGV[token...]` (the caller's own, maybe none)
    /// → `{pttl (-2 free), fence or nil, 1 if the lock holds one of ARGV}`.
    /// Read-only; never returns the holder's token.
    Inspect,
    /// `KEYS[lock, fence, channel]`, `ARGV[grace_ms, "SPUBLISH"?]` → `{1 if a
    /// holder was removed else 0, the advanced fence}`: an operator's
    /// force-release, whoever holds the lock.
    ForceRelease,
    /// `KEYS[hash]`, `ARGV[fence_field, fence, field, value]` → `{1, fence}`
    /// applied (field and fence written) or `{0, last accepted fence}`
    /// refused: a fenced write to the user's own key (`fenced.rs`).
    FencedSet,
    /// A semaphore permit, or a read-write lock's write side:
    /// `KEYS[holders, line, line expiries, fence, must-be-empty?]`,
    /// `ARGV[token, ttl_ms, fence_ttl_ms, permits, patience_ms]` →
    /// `{1, "fence"}` or `{0, retry_ms}` (the acquire's reply shape).
    FairAcquire,
    /// A read-write lock's read side: `KEYS[readers, line, line expiries,
    /// fence, writer]`, `ARGV[token, ttl_ms, fence_ttl_ms]` → as `Acquire`.
    ReadAcquire,
    /// `KEYS[holders, fence]`, `ARGV[token, ttl_ms, fence_ttl_ms]` → 1
    /// extended, 0 not ours (the extend's shape), for a holders set.
    HoldersExtend,
    /// `KEYS[holders, line, line expiries, channel?]`, `ARGV[token,
    /// "SPUBLISH"?]` → 1 released, 2 released but not published, 0 not
    /// ours (the release's shape); also leaves the line.
    HoldersRelease,
    /// `KEYS[holders, fence, must-be-empty?]`, `ARGV[token, ttl_ms, fence,
    /// fence_ttl_ms, limit]` → 1 held now, 0 not (the reclaim's shape).
    HoldersReclaim,
    /// `KEYS[holders, fence]`, `ARGV[token...]` → `Inspect`'s `{pttl,
    /// fence or nil, ours}` for a holders set. Read-only.
    HoldersInspect,
    /// The fair mutex's acquire: `KEYS[lock, line, line expiries, fence]`,
    /// `ARGV[token, ttl_ms, fence_ttl_ms, patience_ms]` → `{1, "fence"}` or
    /// `{0, retry_ms}` (the acquire's reply shape; the mutex's lock key).
    FairMutexAcquire,
    /// The fair mutex's release: `KEYS[lock, line, line expiries,
    /// channel?]`, `ARGV[token, "SPUBLISH"?]` → the release's 1, 2 or 0;
    /// also leaves the line, and publishes the first live waiter's
    /// [`WakeId`](crate::WakeId) (`1` when the line is empty).
    FairMutexRelease,
    /// `KEYS[lock, fence, channel]`, `ARGV[token, waiter's token, its ttl_ms,
    /// its fence_ttl_ms, "SPUBLISH"?]` → `{1, "fence"}` handed over to the
    /// waiter, `{2, 1}` released (waiters woken), `{2, 0}` released but the
    /// PUBLISH was refused, `{0, pttl}` not ours: a mutex's release that
    /// hands the lock to the next local waiter while no other client listens.
    Handoff,
    /// Several mutexes at once, all in one slot: `KEYS[lock_1, fence_1,
    /// ..., lock_n, fence_n]`, `ARGV[ttl_ms, fence_ttl_ms, token_1, ...,
    /// token_n]` → `{1, "fence_1", ..., "fence_n"}` all set, or `{0, pttl,
    /// i}` nothing written, the i-th (1-based) held by someone else with the
    /// longest PTTL (see `many.rs`).
    AcquireMany,
}

/// What a script does for a lease: the reply shape the core reads, the
/// same for the mutex's script and its counterparts for the other kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    Acquire,
    Extend,
    Release,
    /// A mutex's release that may hand the lock to a local waiter.
    Handoff,
    RaiseFence,
    Reclaim,
    /// Not a lease's command (inspect, force-release, a fenced write).
    OneShot,
}

impl Script {
    pub const ALL: [Script; 18] = [
        Script::Acquire,
        Script::Release,
        Script::Extend,
        Script::RaiseFence,
        Script::Reclaim,
        Script::Inspect,
        Script::ForceRelease,
        Script::FencedSet,
        Script::FairAcquire,
        Script::ReadAcquire,
        Script::HoldersExtend,
        Script::HoldersRelease,
        Script::HoldersReclaim,
        Script::HoldersInspect,
        Script::FairMutexAcquire,
        Script::FairMutexRelease,
        Script::Handoff,
        Script::AcquireMany,
    ];

    pub(crate) const fn role(self) -> Role {
        match self {
            Script::Acquire
            | Script::FairAcquire
            | Script::ReadAcquire
            | Script::FairMutexAcquire => Role::Acquire,
            Script::Extend | Script::HoldersExtend => Role::Extend,
            Script::Release | Script::HoldersRelease | Script::FairMutexRelease => Role::Release,
            Script::Handoff => Role::Handoff,
            Script::RaiseFence => Role::RaiseFence,
            Script::Reclaim | Script::HoldersReclaim => Role::Reclaim,
            // Read by `many.rs`, not by a lease.
            Script::AcquireMany => Role::OneShot,
            Script::Inspect | Script::ForceRelease | Script::FencedSet | Script::HoldersInspect => {
                Role::OneShot
            }
        }
    }

    /// An attempt to acquire (of any kind): a driver retries one that never
    /// reached its node until the acquire's wait ends.
    pub const fn is_acquire(self) -> bool {
        matches!(self.role(), Role::Acquire) || matches!(self, Script::AcquireMany)
    }

    /// Publishes a release notification when given the channel (on a Redis
    /// Cluster, the driver appends `SPUBLISH` to its arguments).
    pub const fn publishes(self) -> bool {
        matches!(
            self,
            Script::Release
                | Script::ForceRelease
                | Script::HoldersRelease
                | Script::FairMutexRelease
                | Script::Handoff
        )
    }

    /// The script's name in test vectors and logs.
    pub const fn name(self) -> &'static str {
        match self {
            Script::Acquire => "acquire",
            Script::Release => "release",
            Script::Extend => "extend",
            Script::RaiseFence => "raise_fence",
            Script::Reclaim => "reclaim",
            Script::Inspect => "inspect",
            Script::ForceRelease => "force_release",
            Script::FencedSet => "fenced_set",
            Script::FairAcquire => "fair_acquire",
            Script::ReadAcquire => "read_acquire",
            Script::HoldersExtend => "holders_extend",
            Script::HoldersRelease => "holders_release",
            Script::HoldersReclaim => "holders_reclaim",
            Script::HoldersInspect => "holders_inspect",
            Script::FairMutexAcquire => "fair_mutex_acquire",
            Script::FairMutexRelease => "fair_mutex_release",
            Script::Handoff => "handoff",
            Script::AcquireMany => "acquire_many",
        }
    }

    pub const fn source(self) -> &'static str {
        match self {
            Script::Acquire => include_str!("scripts/acquire.lua"),
            Script::Release => include_str!("scripts/release.lua"),
            Script::Extend => include_str!("scripts/extend.lua"),
            Script::RaiseFence => include_str!("scripts/raise_fence.lua"),
            Script::Reclaim => include_str!("scripts/reclaim.lua"),
            Script::Inspect => include_str!("scripts/inspect.lua"),
            Script::ForceRelease => include_str!("scripts/force_release.lua"),
            Script::FencedSet => include_str!("scripts/fenced_set.lua"),
            Script::FairAcquire => include_str!("scripts/fair_acquire.lua"),
            Script::ReadAcquire => include_str!("scripts/read_acquire.lua"),
            Script::HoldersExtend => include_str!("scripts/holders_extend.lua"),
            Script::HoldersRelease => include_str!("scripts/holders_release.lua"),
            Script::HoldersReclaim => include_str!("scripts/holders_reclaim.lua"),
            Script::HoldersInspect => include_str!("scripts/holders_inspect.lua"),
            Script::FairMutexAcquire => include_str!("scripts/fair_mutex_acquire.lua"),
            Script::FairMutexRelease => include_str!("scripts/fair_mutex_release.lua"),
            Script::Handoff => include_str!("scripts/handoff.lua"),
            Script::AcquireMany => include_str!("scripts/acquire_many.lua"),
        }
    }

    /// Lowercase hex SHA1 of [`Script::source`], as `EVALSHA` wants it.
    pub const fn sha1(self) -> &'static str {
        match self {
            Script::Acquire => "146bbf52a7402f649661cdd371eaa0d4898e6ede",
            Script::Release => "c74c81f94ecc5a418410838b8a6cef2847604980",
            Script::Extend => "a17cd7d2bbb874e4b1fc1f6d082af8c7d278ac60",
            Script::RaiseFence => "e2c72c567fae89a791079441727c4613fbb19faa",
            Script::Reclaim => "fa98b1469ec3dc68944dedd86f3e372a9b55f80a",
            Script::Inspect => "c7aa2d948502b67b4e0c596f9a48e5f8a0b632c1",
            Script::ForceRelease => "0fe185decfd2345699a4c50cedb1f89c936137ec",
            Script::FencedSet => "7bc023d47d4a96c3b02875c81149a2c48da384d1",
            Script::FairAcquire => "be4e42e3d76f3e03761921b0c1ad367e77ad478a",
            Script::ReadAcquire => "af6686c2a913508e768f43d94561e3cbff03fcb1",
            Script::HoldersExtend => "bbc787cce5b22f9e7e4bc6f35179a2c9fee74809",
            Script::HoldersRelease => "f8ab794a46bec92ec8ef6bfb815e891ddaee4848",
            Script::HoldersReclaim => "4cbb6b918570acc897fc4c166b5dd31df5fcf417",
            Script::HoldersInspect => "46696e7c32e67137d3ac5cd45358d911d5a0c074",
            Script::FairMutexAcquire => "60086ee1675cfd0f3ba5e1d6dc67e4fa29de3e15",
            Script::FairMutexRelease => "68ecf64377ce9df0624c5c2af9ab32a45b3ac6dc",
            Script::Handoff => "0234b10e32879a78630be3d83dd8c413c5dfd284",
            Script::AcquireMany => "1635590f9010ff1b5c399b3300f8ae971c5a44e1",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pinned_sha1s_match_the_sources() {
        for script in Script::ALL {
            assert_eq!(
                sha1_smol::Sha1::from(script.source()).digest().to_string(),
                script.sha1(),
                "{script:?}"
            );
        }
    }
}
