//! [`Bytes`]: a command's key or argument, cheap to clone and to make.
//!
//! A lease sends the same keys and token in every command it makes, and the
//! rest are short decimal numbers (ttls, fences, counts). So a key or a
//! token is made once per lease and shared (`Arc`; a lease's keys share one
//! allocation), and a number is kept inline: building a command copies
//! neither and allocates for neither.

use std::borrow::Borrow;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;
use std::sync::Arc;

/// Up to this many bytes live inline: every `u64` in decimal (20 digits).
const INLINE: usize = 22;

/// Immutable bytes: shared, or inline when short. Reads as `[u8]`.
#[derive(Clone)]
pub struct Bytes(Repr);

#[derive(Clone)]
enum Repr {
    Shared(Arc<[u8]>),
    /// `whole[start..start + len]`: one of several made together.
    Part {
        whole: Arc<[u8]>,
        start: u16,
        len: u16,
    },
    Inline {
        len: u8,
        buf: [u8; INLINE],
    },
}

impl Bytes {
    /// `n` in decimal, as Redis reads numeric arguments.
    pub fn decimal(n: u64) -> Bytes {
        let mut buf = [0; INLINE];
        let mut at = INLINE;
        let mut rest = n;
        loop {
            at -= 1;
            buf[at] = b'0' + (rest % 10) as u8;
            rest /= 10;
            if rest == 0 {
                break;
            }
        }
        let len = INLINE - at;
        buf.copy_within(at.., 0);
        Bytes(Repr::Inline {
            len: len as u8,
            buf,
        })
    }

    /// `parts` joined, in one allocation (the parts of a key).
    pub fn concat(parts: &[&[u8]]) -> Bytes {
        let len = parts.iter().map(|p| p.len()).sum();
        // Made at its final size and filled in place: `Arc<[u8]>::from` a
        // `Vec` would copy into a second allocation.
        let mut shared: Arc<[u8]> = (0..len).map(|_| 0).collect();
        let out = Arc::get_mut(&mut shared).expect("not shared yet");
        let mut at = 0;
        for part in parts {
            out[at..at + part.len()].copy_from_slice(part);
            at += part.len();
        }
        Bytes(Repr::Shared(shared))
    }

    /// `self[range]`, sharing this allocation when it can (a lease's keys
    /// are parts of one).
    pub fn slice(&self, range: std::ops::Range<usize>) -> Bytes {
        let (whole, base) = match &self.0 {
            Repr::Shared(whole) => (whole, 0),
            Repr::Part { whole, start, .. } => (whole, usize::from(*start)),
            Repr::Inline { .. } => return Bytes::from(&self[range]),
        };
        let (start, len) = (base + range.start, self[range].len());
        match (u16::try_from(start), u16::try_from(len)) {
            (Ok(start), Ok(len)) => Bytes(Repr::Part {
                whole: Arc::clone(whole),
                start,
                len,
            }),
            _ => Bytes::from(&whole[start..start + len]),
        }
    }
}

impl Deref for Bytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match &self.0 {
            Repr::Shared(bytes) => bytes,
            Repr::Part { whole, start, len } => &whole[usize::from(*start)..][..usize::from(*len)],
            Repr::Inline { len, buf } => &buf[..usize::from(*len)],
        }
    }
}

impl AsRef<[u8]> for Bytes {
    fn as_ref(&self) -> &[u8] {
        self
    }
}

impl Borrow<[u8]> for Bytes {
    fn borrow(&self) -> &[u8] {
        self
    }
}

impl From<&[u8]> for Bytes {
    fn from(bytes: &[u8]) -> Bytes {
        match bytes.len() <= INLINE {
            true => {
                let mut buf = [0; INLINE];
                buf[..bytes.len()].copy_from_slice(bytes);
                Bytes(Repr::Inline {
                    len: bytes.len() as u8,
                    buf,
                })
            }
            false => Bytes(Repr::Shared(bytes.into())),
        }
    }
}

impl From<Vec<u8>> for Bytes {
    fn from(bytes: Vec<u8>) -> Bytes {
        Bytes::from(bytes.as_slice())
    }
}

impl<const N: usize> From<&[u8; N]> for Bytes {
    fn from(bytes: &[u8; N]) -> Bytes {
        Bytes::from(&bytes[..])
    }
}

impl From<&str> for Bytes {
    fn from(text: &str) -> Bytes {
        Bytes::from(text.as_bytes())
    }
}

/// A token (`Arc<str>`) shared, not copied.
impl From<Arc<str>> for Bytes {
    fn from(text: Arc<str>) -> Bytes {
        Bytes(Repr::Shared(text.into()))
    }
}

impl PartialEq for Bytes {
    fn eq(&self, other: &Bytes) -> bool {
        **self == **other
    }
}

impl Eq for Bytes {}

impl PartialEq<[u8]> for Bytes {
    fn eq(&self, other: &[u8]) -> bool {
        **self == *other
    }
}

impl PartialEq<&[u8]> for Bytes {
    fn eq(&self, other: &&[u8]) -> bool {
        **self == **other
    }
}

impl<const N: usize> PartialEq<[u8; N]> for Bytes {
    fn eq(&self, other: &[u8; N]) -> bool {
        **self == other[..]
    }
}

impl<const N: usize> PartialEq<&[u8; N]> for Bytes {
    fn eq(&self, other: &&[u8; N]) -> bool {
        **self == other[..]
    }
}

impl PartialEq<Vec<u8>> for Bytes {
    fn eq(&self, other: &Vec<u8>) -> bool {
        **self == **other
    }
}

impl Hash for Bytes {
    fn hash<H: Hasher>(&self, state: &mut H) {
        (**self).hash(state);
    }
}

impl PartialOrd for Bytes {
    fn partial_cmp(&self, other: &Bytes) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Bytes {
    fn cmp(&self, other: &Bytes) -> std::cmp::Ordering {
        (**self).cmp(&**other)
    }
}

/// Shown as text (lossy): keys are read in `redis-cli` too. A command's
/// arguments hold the token and are never shown ([`crate::Command`]).
impl fmt::Debug for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&String::from_utf8_lossy(self), f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_decimal_and_inline() {
        for n in [0, 7, 10, 1_000, 61_000, u64::MAX] {
            let bytes = Bytes::decimal(n);
            assert_eq!(&*bytes, n.to_string().as_bytes());
            assert!(matches!(bytes.0, Repr::Inline { .. }));
        }
    }

    #[test]
    fn long_bytes_are_shared_short_ones_inline() {
        let key = Bytes::concat(&[b"fencelock:", b"{invoice:42}", b":fence"]);
        assert_eq!(key, b"fencelock:{invoice:42}:fence");
        let copy = key.clone();
        match (&key.0, &copy.0) {
            (Repr::Shared(a), Repr::Shared(b)) => assert!(Arc::ptr_eq(a, b)),
            _ => panic!("a key this long is shared"),
        }
        assert!(matches!(Bytes::from(&b"w"[..]).0, Repr::Inline { .. }));
        assert_eq!(Bytes::from(&[7u8; 23][..]), [7u8; 23]);
    }

    #[test]
    fn a_slice_shares_the_allocation() {
        let key = Bytes::concat(&[b"fencelock:{invoice:42}", b":fence"]);
        let lock = key.slice(0..22);
        let fence = lock.slice(10..22);
        assert_eq!(
            (&*lock, &*fence),
            (&b"fencelock:{invoice:42}"[..], &b"{invoice:42}"[..])
        );
        match (&key.0, &fence.0) {
            (Repr::Shared(a), Repr::Part { whole: b, .. }) => assert!(Arc::ptr_eq(a, b)),
            _ => panic!("parts of one allocation"),
        }
        assert_eq!(std::mem::size_of::<Bytes>(), 24);
        // Past what a part's offsets can say, a slice is a copy.
        let long = Bytes::from(vec![b'x'; 70_000]);
        assert_eq!(long.slice(69_000..70_000).len(), 1_000);
        assert!(matches!(long.slice(69_000..70_000).0, Repr::Shared(_)));
        assert!(matches!(
            Bytes::decimal(12_345).slice(1..3).0,
            Repr::Inline { .. }
        ));
    }
}
