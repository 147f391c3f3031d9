//! Key layout. Pinned by test vectors: a lock taken from one language must be
//! the same lock in the others.
//!
//! ```text
//! name without braces:  <prefix>{<name>}            lock key (token, PX ttl)
//!                       <prefix>{<name>}:fence      last fence issued (PX ttl + grace)
//!                       <prefix>{<name>}:released   release notifications
//! name with { or }:     <prefix>#{<escaped>}...     same suffixes; `%`, `{`, `}`
//!                                                   written as %25, %7B, %7D
//! ```
//!
//! A semaphore and a read-write lock of the same name live beside the mutex,
//! in the same slot, each under its own suffix (see [`crate::Kind`]):
//!
//! ```text
//! semaphore:   <base>:semaphore                 holders (ZSET token -> expiry ms)
//!              <base>:semaphore:waiting         the fair line (ZSET token -> arrival µs)
//!              <base>:semaphore:waiting:until   each waiter's expiry (ZSET, ms)
//!              <base>:semaphore:fence, <base>:semaphore:released
//! read-write:  <base>:rw:readers, <base>:rw:writer   (ZSETs token -> expiry ms)
//!              <base>:rw:waiting, <base>:rw:waiting:until   (writers only)
//!              <base>:rw:fence, <base>:rw:released
//! ```
//!
//! The fair mutex keeps the mutex's three keys and adds its line beside
//! them:
//!
//! ```text
//! fair mutex:  <base>:waiting, <base>:waiting:until   (as the semaphore's line)
//! ```
//!
//! `<base>` is the mutex's lock key (`<prefix>{<name>}`); a mutex's keys
//! never end in these suffixes, so the primitives cannot collide.
//!
//! Redis Cluster hashes only the text between the first `{` and the next `}`.
//! The prefix has no braces, so that text is the (escaped) name for every key
//! of a lock: all of them land in one slot. The `#` keeps escaped names apart
//! from brace-free names that happen to look escaped.
//!
//! Listing goes the other way: [`KeySpace::scan_match`] turns a name pattern
//! into a `SCAN MATCH` argument that every matching lock key satisfies, and
//! [`KeySpace::name_of`] reads a scanned key back into its name (`None` for
//! fence keys and anything else that is not a lock key of this key space).

use std::borrow::Cow;

use crate::pattern::Token;
use crate::{Bytes, Error, Kind, LockName, NamePattern};

pub const DEFAULT_PREFIX: &str = "fencelock:";
pub const MAX_PREFIX_BYTES: usize = 256;

/// The namespace a client's locks live in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeySpace {
    prefix: Vec<u8>,
}

/// Every Redis name one lock uses, in one allocation (a held lease keeps
/// them). For a semaphore or a read-write lock, `lock` is the lease's own
/// holders set (the semaphore's, the readers' or the writer's).
#[derive(Clone, PartialEq, Eq)]
pub struct LockKeys {
    all: Bytes,
    /// Where each key ends in `all`, in [`KeyOf`] order; a key the kind
    /// does not use is empty.
    ends: [u16; 6],
}

/// The order of [`LockKeys`]' keys.
#[derive(Clone, Copy)]
enum KeyOf {
    Lock,
    Fence,
    Channel,
    Waiting,
    Until,
    Other,
}

impl LockKeys {
    /// Where `which` lies in `all`.
    fn range(&self, which: KeyOf) -> std::ops::Range<usize> {
        let i = which as usize;
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        usize::from(start)..usize::from(self.ends[i])
    }

    fn key(&self, which: KeyOf) -> Bytes {
        self.all.slice(self.range(which))
    }

    fn has(&self, which: KeyOf) -> bool {
        !self.range(which).is_empty()
    }

    pub fn lock(&self) -> Bytes {
        self.key(KeyOf::Lock)
    }

    pub fn fence(&self) -> Bytes {
        self.key(KeyOf::Fence)
    }

    pub fn channel(&self) -> Bytes {
        self.key(KeyOf::Channel)
    }

    /// The fair line of a semaphore, a read-write lock or the fair mutex;
    /// `None` for the mutex.
    pub fn line(&self) -> Option<LineKeys> {
        self.has(KeyOf::Waiting).then(|| LineKeys {
            waiting: self.key(KeyOf::Waiting),
            until: self.key(KeyOf::Until),
        })
    }

    /// A read-write lock's other side: a reader's is the writer set, a
    /// writer's the readers set. `None` otherwise.
    pub fn other(&self) -> Option<Bytes> {
        self.has(KeyOf::Other).then(|| self.key(KeyOf::Other))
    }
}

impl std::fmt::Debug for LockKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockKeys")
            .field("lock", &self.lock())
            .field("fence", &self.fence())
            .field("channel", &self.channel())
            .field("line", &self.line())
            .field("other", &self.other())
            .finish()
    }
}

/// The fair line: waiters in arrival order, and when each one's place
/// expires (see [`crate::Kind`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LineKeys {
    pub waiting: Bytes,
    pub until: Bytes,
}

impl Default for KeySpace {
    fn default() -> Self {
        KeySpace {
            prefix: DEFAULT_PREFIX.as_bytes().to_vec(),
        }
    }
}

impl KeySpace {
    pub fn new(prefix: impl AsRef<[u8]>) -> Result<Self, Error> {
        let prefix = prefix.as_ref();
        if prefix.contains(&b'{') || prefix.contains(&b'}') {
            return Err(Error::invalid(
                "key prefix must not contain '{' or '}' (it would break Redis Cluster hash tags)",
            ));
        }
        if prefix.len() > MAX_PREFIX_BYTES {
            return Err(Error::invalid(format!(
                "key prefix is limited to {MAX_PREFIX_BYTES} bytes"
            )));
        }
        Ok(KeySpace {
            prefix: prefix.to_vec(),
        })
    }

    pub fn prefix(&self) -> &[u8] {
        &self.prefix
    }

    /// The mutex's keys.
    pub fn keys(&self, name: &LockName) -> LockKeys {
        self.keys_for(name, Kind::Mutex)
    }

    /// The keys a lease of `kind` uses (the mutex's for [`Kind::Mutex`]).
    pub fn keys_for(&self, name: &LockName, kind: Kind) -> LockKeys {
        let (open, body) = self.hash_tag(name);
        let part: &[u8] = match kind {
            Kind::Mutex | Kind::FairMutex => b"",
            Kind::Semaphore(_) => b":semaphore",
            Kind::Read | Kind::Write => b":rw",
        };
        // `<prefix>{<name>}<part><suffix>`, in `KeyOf` order: the mutex's
        // lock key is the base alone, every other key starts with it.
        let base: [&[u8]; 5] = [&self.prefix, open, &body, b"}", part];
        // The lease's own key, whether the kind has a fair line, the other
        // side of a read-write lock.
        let (own, line, other): (&[u8], bool, Option<&[u8]>) = match kind {
            Kind::Mutex => (b"", false, None),
            Kind::FairMutex | Kind::Semaphore(_) => (b"", true, None),
            Kind::Read => (b":readers", true, Some(b":writer")),
            Kind::Write => (b":writer", true, Some(b":readers")),
        };
        let suffixes: [Option<&[u8]>; 6] = [
            Some(own),
            Some(b":fence"),
            Some(b":released"),
            line.then_some(b":waiting"),
            line.then_some(b":waiting:until"),
            other,
        ];
        let mut parts: [&[u8]; 36] = [&[]; 36];
        let (mut n, mut len) = (0, 0);
        let mut ends = [0u16; 6];
        for (end, suffix) in ends.iter_mut().zip(suffixes) {
            for piece in suffix.iter().flat_map(|s| base.iter().copied().chain([*s])) {
                parts[n] = piece;
                n += 1;
                len += piece.len();
            }
            // Six keys of a 256-byte prefix and a 1,024-byte name escaped
            // (3 bytes a byte at most) stay far below 64 KiB.
            *end = u16::try_from(len).expect("keys within the prefix and name limits");
        }
        LockKeys {
            all: Bytes::concat(&parts[..n]),
            ends,
        }
    }

    /// The hash tag's opening and body: `{` and the name, or `#{` and the
    /// name with `%`, `{` and `}` escaped (a name with braces).
    fn hash_tag<'a>(&self, name: &'a LockName) -> (&'static [u8], Cow<'a, [u8]>) {
        let name = name.as_bytes();
        if !name.iter().any(|b| matches!(b, b'{' | b'}')) {
            return (b"{", Cow::Borrowed(name));
        }
        let mut escaped = Vec::with_capacity(name.len() + 8);
        for &byte in name {
            match byte {
                b'%' => escaped.extend_from_slice(b"%25"),
                b'{' => escaped.extend_from_slice(b"%7B"),
                b'}' => escaped.extend_from_slice(b"%7D"),
                other => escaped.push(other),
            }
        }
        (b"#{", Cow::Owned(escaped))
    }

    /// The `SCAN MATCH` argument for the lock keys of names matching
    /// `pattern`: `<prefix>*{<body>}`, the prefix glob-escaped, `*` standing
    /// for the optional `#` of an escaped name. The body keeps the pattern's
    /// literals (glob-escaped; `%` as `%*` since an escaped name writes it
    /// `%25`, `{` and `}` as `%7B` and `%7D`, which only escaped names
    /// contain) and its runs, and widens `?` and `[...]` to `?*` (in an
    /// escaped name one byte may be three). So the argument matches every
    /// lock key of a matching name, and some other keys too: the caller
    /// keeps a key only if [`KeySpace::name_of`] reads a name from it that
    /// the pattern [`matches`](NamePattern::matches).
    pub fn scan_match(&self, pattern: &NamePattern) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.prefix.len() + pattern.as_bytes().len() + 8);
        for &byte in &self.prefix {
            glob_literal(&mut out, byte);
        }
        out.extend_from_slice(b"*{");
        // Whether `out` ends with a run (`*` unescaped): another one right
        // after it adds nothing but backtracking in Redis's matcher.
        let mut run = false;
        for token in pattern.tokens() {
            match token {
                Token::AnyRun if run => {}
                Token::AnyRun => out.push(b'*'),
                Token::AnyByte | Token::Class { .. } if run => out.push(b'?'),
                Token::AnyByte | Token::Class { .. } => out.extend_from_slice(b"?*"),
                Token::Literal(b'%') => out.extend_from_slice(b"%*"),
                Token::Literal(b'{') => out.extend_from_slice(b"%7B"),
                Token::Literal(b'}') => out.extend_from_slice(b"%7D"),
                Token::Literal(byte) => glob_literal(&mut out, *byte),
            }
            run = matches!(
                token,
                Token::AnyRun | Token::AnyByte | Token::Class { .. } | Token::Literal(b'%')
            );
        }
        out.push(b'}');
        out
    }

    /// The name whose lock key is `key`, if `key` is a lock key of this key
    /// space (not a fence key, not another application's key). Exactly the
    /// inverse of [`KeySpace::keys`]: a key is read back only if the name
    /// read from it gives that very key again.
    pub fn name_of(&self, key: &[u8]) -> Option<LockName> {
        let rest = key.strip_prefix(self.prefix.as_slice())?;
        let inner = rest.strip_suffix(b"}")?;
        let name = if let Some(plain) = inner.strip_prefix(b"{") {
            plain.to_vec()
        } else {
            unescape(inner.strip_prefix(b"#{")?)?
        };
        let name = LockName::new(name).ok()?;
        (self.keys(&name).lock() == key).then_some(name)
    }
}

/// `byte` as a glob literal: the glob's own specials escaped.
fn glob_literal(out: &mut Vec<u8>, byte: u8) {
    if matches!(byte, b'*' | b'?' | b'[' | b']' | b'\\') {
        out.push(b'\\');
    }
    out.push(byte);
}

/// The `%25` / `%7B` / `%7D` escapes of [`KeySpace::keys`] undone; `None`
/// for any other `%`.
fn unescape(escaped: &[u8]) -> Option<Vec<u8>> {
    let mut name = Vec::with_capacity(escaped.len());
    let mut i = 0;
    while i < escaped.len() {
        if escaped[i] == b'%' {
            name.push(match escaped.get(i + 1..i + 3)? {
                b"25" => b'%',
                b"7B" => b'{',
                b"7D" => b'}',
                _ => return None,
            });
            i += 3;
        } else {
            name.push(escaped[i]);
            i += 1;
        }
    }
    Some(name)
}

/// The Redis Cluster hash slot of a key (CRC16/XMODEM of its hash tag, mod
/// 16384). Used by tests and by cluster-aware drivers.
pub fn hash_slot(key: &[u8]) -> u16 {
    let tagged = key
        .iter()
        .position(|&b| b == b'{')
        .and_then(|open| {
            let rest = &key[open + 1..];
            rest.iter()
                .position(|&b| b == b'}')
                .filter(|&close| close > 0)
                .map(|close| &rest[..close])
        })
        .unwrap_or(key);
    crc16_xmodem(tagged) % 16384
}

fn crc16_xmodem(data: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &byte in data {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(name: &[u8]) -> LockKeys {
        KeySpace::default().keys(&LockName::new(name).unwrap())
    }

    #[test]
    fn brace_free_names_appear_verbatim() {
        let k = keys(b"invoice:42");
        assert_eq!(k.lock(), b"fencelock:{invoice:42}");
        assert_eq!(k.fence(), b"fencelock:{invoice:42}:fence");
        assert_eq!(k.channel(), b"fencelock:{invoice:42}:released");
    }

    #[test]
    fn the_fair_mutex_keeps_the_mutex_keys_and_adds_its_line() {
        let name = LockName::new("invoice:42").unwrap();
        let space = KeySpace::default();
        let fair = space.keys_for(&name, Kind::FairMutex);
        let plain = space.keys(&name);
        assert_eq!(
            (&fair.lock(), &fair.fence(), &fair.channel()),
            (&plain.lock(), &plain.fence(), &plain.channel())
        );
        let line = fair.line().unwrap();
        assert_eq!(line.waiting, b"fencelock:{invoice:42}:waiting");
        assert_eq!(line.until, b"fencelock:{invoice:42}:waiting:until");
        assert_eq!(space.name_of(&line.waiting), None);
    }

    #[test]
    fn semaphore_and_read_write_keys_sit_beside_the_mutex() {
        let name = LockName::new("pool").unwrap();
        let space = KeySpace::default();
        let three = Kind::Semaphore(crate::Permits::new(3).unwrap());
        let s = space.keys_for(&name, three);
        assert_eq!(s.lock(), b"fencelock:{pool}:semaphore");
        assert_eq!(s.fence(), b"fencelock:{pool}:semaphore:fence");
        assert_eq!(s.channel(), b"fencelock:{pool}:semaphore:released");
        let line = s.line().unwrap();
        assert_eq!(line.waiting, b"fencelock:{pool}:semaphore:waiting");
        assert_eq!(line.until, b"fencelock:{pool}:semaphore:waiting:until");
        let (r, w) = (
            space.keys_for(&name, Kind::Read),
            space.keys_for(&name, Kind::Write),
        );
        assert_eq!(r.lock(), b"fencelock:{pool}:rw:readers");
        assert_eq!(
            r.other().as_deref(),
            Some(&b"fencelock:{pool}:rw:writer"[..])
        );
        assert_eq!(w.lock(), b"fencelock:{pool}:rw:writer");
        assert_eq!(
            w.other().as_deref(),
            Some(&b"fencelock:{pool}:rw:readers"[..])
        );
        assert_eq!((r.fence(), r.line()), (w.fence(), w.line()));
        assert_eq!(space.keys_for(&name, Kind::Mutex), space.keys(&name));
    }

    #[test]
    fn names_with_braces_are_escaped_and_distinct() {
        assert_eq!(keys(b"}a{%").lock(), b"fencelock:#{%7Da%7B%25}");
        assert_ne!(keys(b"{").lock(), keys(b"%7B").lock());
    }

    #[test]
    fn redis_cluster_reference_slots() {
        // Values from the Redis Cluster specification.
        assert_eq!(hash_slot(b"123456789"), 12739);
        assert_eq!(hash_slot(b"{user1000}.following"), hash_slot(b"user1000"));
        assert_eq!(hash_slot(b"foo{}{bar}"), hash_slot(b"foo{}{bar}"));
    }

    /// Redis's own glob matcher (`stringmatchlen`, util.c) for what
    /// `scan_match` emits: literals, `\\` escapes, `?` and `*`.
    fn redis_glob(pattern: &[u8], key: &[u8]) -> bool {
        match pattern.split_first() {
            None => key.is_empty(),
            Some((b'*', rest)) => (0..=key.len()).any(|skip| redis_glob(rest, &key[skip..])),
            Some((b'?', rest)) => !key.is_empty() && redis_glob(rest, &key[1..]),
            Some((b'\\', rest)) => {
                !key.is_empty()
                    && rest.first() == Some(&key[0])
                    && redis_glob(&rest[1..], &key[1..])
            }
            Some((&b, rest)) => key.first() == Some(&b) && redis_glob(rest, &key[1..]),
        }
    }

    #[test]
    fn scan_match_escapes_the_prefix_and_the_layout() {
        let space = KeySpace::new("app*[1]:").unwrap();
        let m = |p: &str| space.scan_match(&NamePattern::new(p).unwrap());
        assert_eq!(m("*"), br"app\*\[1\]:*{*}".to_vec());
        assert_eq!(m("invoice:*"), br"app\*\[1\]:*{invoice:*}".to_vec());
        assert_eq!(m("a%b"), br"app\*\[1\]:*{a%*b}".to_vec());
        assert_eq!(m("{x}?"), br"app\*\[1\]:*{%7Bx%7D?*}".to_vec());
        assert_eq!(m("[ab]*c"), br"app\*\[1\]:*{?*c}".to_vec());
        assert_eq!(m(r"\*"), br"app\*\[1\]:*{\*}".to_vec());
        assert_eq!(
            m(r"a\**"),
            br"app\*\[1\]:*{a\**}".to_vec(),
            "a literal star, then a run"
        );
        assert_eq!(m("*?*%"), br"app\*\[1\]:*{*?%*}".to_vec());
    }

    #[test]
    fn lock_keys_read_back_to_their_names() {
        let space = KeySpace::default();
        for name in [
            &b"invoice:42"[..],
            b"{",
            b"a{b}%",
            b"%7B",
            b"x}:fence",
            &[0xff, 0x7b],
        ] {
            let name = LockName::new(name).unwrap();
            let keys = space.keys(&name);
            assert_eq!(space.name_of(&keys.lock()), Some(name.clone()));
            assert_eq!(space.name_of(&keys.fence()), None, "{name}");
        }
        for not_a_lock_key in [
            &b"fencelock:{a}:fence"[..],
            b"fencelock:{}",
            b"fencelock:#{}",
            b"fencelock:#{abc}",  // escaped, but no brace in the name
            b"fencelock:#{a%41}", // an escape keys() never writes
            b"fencelock:#{a%7}",
            b"fencelock:{a{b}",
            b"fencelock:{a}b}",
            b"fencelock:x{a}",
            b"other:{a}",
            b"fencelock:",
        ] {
            assert_eq!(
                space.name_of(not_a_lock_key),
                None,
                "{}",
                String::from_utf8_lossy(not_a_lock_key)
            );
        }
        let other = KeySpace::new("jobs:").unwrap();
        assert_eq!(other.name_of(b"fencelock:{a}"), None);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(5_000))]
        #[test]
        fn scan_match_keeps_every_lock_key_of_a_matching_name(
            name in proptest::collection::vec(proptest::sample::select(b"ab%{}*?[]\\:".to_vec()), 1..10),
            pattern in proptest::collection::vec(proptest::sample::select(b"ab%{}*?:\\".to_vec()), 1..8),
            class in proptest::prelude::any::<bool>(),
        ) {
            let mut pattern = pattern;
            if class {
                pattern.extend_from_slice(b"[%{b]");
            }
            // A trailing lone backslash is refused; anything else is a pattern.
            let Ok(pattern) = NamePattern::new(&pattern) else {
                return Ok(());
            };
            let space = KeySpace::new("p*:").unwrap();
            let name = LockName::new(&name).unwrap();
            let key = space.keys(&name).lock();
            proptest::prop_assert_eq!(space.name_of(&key), Some(name.clone()));
            if pattern.matches(name.as_bytes()) {
                proptest::prop_assert!(redis_glob(&space.scan_match(&pattern), &key));
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(10_000))]
        #[test]
        fn every_key_of_a_lock_shares_one_slot(name in proptest::collection::vec(proptest::prelude::any::<u8>(), 1..=64)) {
            let k = keys(&name);
            let slot = hash_slot(&k.lock());
            proptest::prop_assert_eq!(hash_slot(&k.fence()), slot);
            proptest::prop_assert_eq!(hash_slot(&k.channel()), slot);
            let name = LockName::new(&name).unwrap();
            let three = Kind::Semaphore(crate::Permits::new(3).unwrap());
            for kind in [three, Kind::Read, Kind::Write] {
                let k = KeySpace::default().keys_for(&name, kind);
                let line = k.line().unwrap();
                for key in [&k.lock(), &k.fence(), &k.channel(), &line.waiting, &line.until] {
                    proptest::prop_assert_eq!(hash_slot(key), slot);
                }
                if let Some(key) = &k.other() {
                    proptest::prop_assert_eq!(hash_slot(key), slot);
                }
            }
        }

        #[test]
        fn distinct_names_get_distinct_keys(a in proptest::collection::vec(proptest::sample::select(b"{}%7BDa".to_vec()), 1..8),
                                           b in proptest::collection::vec(proptest::prelude::any::<u8>(), 1..8)) {
            proptest::prop_assume!(a != b);
            proptest::prop_assert_ne!(keys(&a).lock(), keys(&b).lock());
        }
    }
}
