//! The Lua scripts, their SHA1s (for EVALSHA), and how to read their replies.
//! The `.lua` files are the source of truth; a unit test pins the SHA1s.

/// One of fencelock's server-side scripts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Script {
    /// `KEYS[lock, fence]`, `ARGV[token, ttl_ms]` → `{1, fence}` or `{0, pttl}`.
    Acquire,
    /// `KEYS[lock, channel?]`, `ARGV[token]` → 1 released, 0 not ours; publishes
    /// on the channel only when it is given.
    Release,
    /// `KEYS[lock]`, `ARGV[token, ttl_ms]` → 1 extended, 0 not ours.
    Extend,
    /// `KEYS[fence]`, `ARGV[fence]` → the counter after set-if-greater.
    RaiseFence,
}

impl Script {
    pub const ALL: [Script; 4] = [
        Script::Acquire,
        Script::Release,
        Script::Extend,
        Script::RaiseFence,
    ];

    pub const fn source(self) -> &'static str {
        match self {
            Script::Acquire => include_str!("scripts/acquire.lua"),
            Script::Release => include_str!("scripts/release.lua"),
            Script::Extend => include_str!("scripts/extend.lua"),
            Script::RaiseFence => include_str!("scripts/raise_fence.lua"),
        }
    }

    /// Lowercase hex SHA1 of [`Script::source`], as `EVALSHA` wants it.
    pub const fn sha1(self) -> &'static str {
        match self {
            Script::Acquire => "3629876d869472151a9acacde6e28673cfd25232",
            Script::Release => "ccda7999077035b3bbe3da67fd06c081266d1388",
            Script::Extend => "c288a94a1bfc571935713d01afe89ae8ddab6711",
            Script::RaiseFence => "c07ea54537622eac13089b4b4fd70eafd19934b3",
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
