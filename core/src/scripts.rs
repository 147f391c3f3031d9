//! The Lua scripts, their SHA1s (for EVALSHA), and how to read their replies.
//! The `.lua` files are the source of truth; a unit test pins the SHA1s.

/// A script's text: the helper fragments it uses (`scripts/prelude/*.lua`:
/// fence decimals, the fence counter, sorted sets scored by expiry), in
/// order, then its body (`scripts/NAME.lua`). Concatenated at compile time,
/// so the text stays `'static` and every script stands alone for EVALSHA;
/// the bindings, the wasm build and bench/bench.py get this same text.
macro_rules! script {
    ([$($prelude:literal),*], $body:literal) => {
        concat!(
            $(include_str!(concat!("scripts/prelude/", $prelude, ".lua")),)*
            include_str!(concat!("scripts/", $body, ".lua"))
        )
    };
}

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
            Script::Acquire => script!(["decimal", "fence"], "acquire"),
            Script::Release => script!([], "release"),
            Script::Extend => script!([], "extend"),
            Script::RaiseFence => script!(["decimal"], "raise_fence"),
            Script::Reclaim => script!(["decimal", "fence"], "reclaim"),
            Script::Inspect => script!([], "inspect"),
            Script::ForceRelease => script!(["decimal", "fence"], "force_release"),
            Script::FencedSet => script!(["decimal"], "fenced_set"),
            Script::FairAcquire => script!(["decimal", "fence", "line"], "fair_acquire"),
            Script::ReadAcquire => script!(["decimal", "fence", "line"], "read_acquire"),
            Script::HoldersExtend => script!(["line"], "holders_extend"),
            Script::HoldersRelease => script!([], "holders_release"),
            Script::HoldersReclaim => script!(["decimal", "fence", "line"], "holders_reclaim"),
            Script::HoldersInspect => script!([], "holders_inspect"),
            Script::FairMutexAcquire => script!(["decimal", "fence", "line"], "fair_mutex_acquire"),
            Script::FairMutexRelease => script!(["line"], "fair_mutex_release"),
            Script::Handoff => script!(["decimal", "fence"], "handoff"),
            Script::AcquireMany => script!(["decimal", "fence"], "acquire_many"),
        }
    }

    /// Lowercase hex SHA1 of [`Script::source`], as `EVALSHA` wants it.
    pub const fn sha1(self) -> &'static str {
        match self {
            Script::Acquire => "f83c12f8a346dd444ab476c20158cdf8c1a6ad82",
            Script::Release => "c74c81f94ecc5a418410838b8a6cef2847604980",
            Script::Extend => "a17cd7d2bbb874e4b1fc1f6d082af8c7d278ac60",
            Script::RaiseFence => "48f373cae92f6f175dff67717d83981ac9e41749",
            Script::Reclaim => "bb5b2c6fd00e187feb56420d1fb90f3c14ed6e8f",
            Script::Inspect => "c7aa2d948502b67b4e0c596f9a48e5f8a0b632c1",
            Script::ForceRelease => "ed97f86cc6bd8d7c0ed8c38c60fc06c04c4300ca",
            Script::FencedSet => "f8308e81f6093a6af37606f001f43d33a102e094",
            Script::FairAcquire => "70c26fac96853a3afa4a8a46fd45c01c669b0e4c",
            Script::ReadAcquire => "0719114eed66708fcb6a77fb0b7b053f134b983f",
            Script::HoldersExtend => "003651b78b6a754279292fa78105c4dccd9a1bc7",
            Script::HoldersRelease => "f8ab794a46bec92ec8ef6bfb815e891ddaee4848",
            Script::HoldersReclaim => "28684283485812cb129d41e551d474c3c410827c",
            Script::HoldersInspect => "46696e7c32e67137d3ac5cd45358d911d5a0c074",
            Script::FairMutexAcquire => "a2c6b4c523f1da978c58a4700303fab4c3e8f4b0",
            Script::FairMutexRelease => "796d40c422ffa68e022dba47485f432c352d94b0",
            Script::Handoff => "c55c47ef77199ed30bfe17b97f6e2bc32f7606fe",
            Script::AcquireMany => "7562e4c7495f8919dabc975bde6b3f1ee140c27d",
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
