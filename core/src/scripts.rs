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
    /// `KEYS[lock, fence, channel]`, `ARGV[token, waiter's token, its ttl_ms,
    /// its fence_ttl_ms, "SPUBLISH"?]` → `{1, "fence"}` handed over to the
    /// waiter, `{2, 1}` released (waiters woken), `{2, 0}` released but the
    /// PUBLISH was refused, `{0, pttl}` not ours: a release that hands the
    /// lock to the next local waiter while no other client listens.
    Handoff,
}

impl Script {
    pub const ALL: [Script; 8] = [
        Script::Acquire,
        Script::Release,
        Script::Extend,
        Script::RaiseFence,
        Script::Reclaim,
        Script::Inspect,
        Script::ForceRelease,
        Script::Handoff,
    ];

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
            Script::Handoff => "handoff",
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
            Script::Handoff => include_str!("scripts/handoff.lua"),
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
            Script::Handoff => "0234b10e32879a78630be3d83dd8c413c5dfd284",
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
