//! Listing locks: which `SCAN` to send and what its pages mean. Sans-IO like
//! the rest: [`Listing`] builds the command for a cursor and reads each
//! reply into the next cursor and the lock names on that page. The driver
//! runs it on every node (every primary of a cluster), takes the union, and
//! asks [`crate::Inspect`] about each name; `KEYS` is never sent.

use crate::{Error, KeySpace, LockName, NamePattern, Reply};

/// How many keys each `SCAN` asks a node to look at: large enough that a
/// keyspace of a million keys takes ~1,000 round trips, small enough that
/// no single call keeps Redis busy for long.
pub const SCAN_COUNT: u32 = 1000;

/// The names matching one pattern, read from `SCAN` pages.
#[derive(Debug, Clone)]
pub struct Listing {
    keyspace: KeySpace,
    pattern: NamePattern,
    match_arg: Vec<u8>,
}

/// One `SCAN` reply, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    /// The cursor to continue with; `None` once the node has been walked.
    pub next: Option<Vec<u8>>,
    /// The lock names on this page that match the pattern (a node may
    /// return a key on more than one page).
    pub names: Vec<LockName>,
}

impl Listing {
    pub fn new(keyspace: &KeySpace, pattern: NamePattern) -> Listing {
        Listing {
            match_arg: keyspace.scan_match(&pattern),
            keyspace: keyspace.clone(),
            pattern,
        }
    }

    pub fn pattern(&self) -> &NamePattern {
        &self.pattern
    }

    /// The cursor every walk starts (and ends) with.
    pub fn first_cursor() -> Vec<u8> {
        b"0".to_vec()
    }

    /// `SCAN cursor MATCH <scan_match> COUNT SCAN_COUNT`, as the command's
    /// words.
    pub fn command(&self, cursor: &[u8]) -> Vec<Vec<u8>> {
        vec![
            b"SCAN".to_vec(),
            cursor.to_vec(),
            b"MATCH".to_vec(),
            self.match_arg.clone(),
            b"COUNT".to_vec(),
            SCAN_COUNT.to_string().into_bytes(),
        ]
    }

    /// The names of every node's walk to the end (one result per node, in
    /// any order), once a majority of the `nodes` walked theirs: a lock
    /// held by a majority is then on at least one node that answered. Their
    /// union, sorted and without repeats. Fewer answers: a `Redis` error
    /// naming the pattern and what failed.
    pub fn combine(
        &self,
        nodes: usize,
        walks: Vec<Result<Vec<LockName>, Error>>,
    ) -> Result<Vec<LockName>, Error> {
        let walked = crate::majority::answers(self.pattern.as_name(), nodes.max(1), walks)?;
        let mut names: Vec<LockName> = walked.into_iter().flatten().collect();
        names.sort_unstable();
        names.dedup();
        Ok(names)
    }

    /// Read one reply (`[cursor, [key, ...]]`).
    pub fn read(&self, reply: Reply) -> Result<Page, Error> {
        let name = self.pattern.as_name();
        let bad = || Error::redis(Some(name), "unexpected reply to SCAN");
        let Reply::Array(items) = reply else {
            return Err(match reply {
                Reply::Error(message) | Reply::Unknown(message) => {
                    Error::redis(Some(name), message)
                }
                _ => bad(),
            });
        };
        let [Reply::Bulk(cursor), Reply::Array(keys)] = items.as_slice() else {
            return Err(bad());
        };
        let mut names = Vec::new();
        for key in keys {
            let Reply::Bulk(key) = key else {
                return Err(bad());
            };
            if let Some(lock) = self.keyspace.name_of(key) {
                if self.pattern.matches(lock.as_bytes()) {
                    names.push(lock);
                }
            }
        }
        Ok(Page {
            next: (cursor.as_slice() != b"0").then(|| cursor.clone()),
            names,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(cursor: &str, keys: &[&[u8]]) -> Reply {
        Reply::Array(vec![
            Reply::Bulk(cursor.into()),
            Reply::Array(keys.iter().map(|k| Reply::Bulk(k.to_vec())).collect()),
        ])
    }

    #[test]
    fn scan_command_and_pages() {
        let listing = Listing::new(&KeySpace::default(), NamePattern::new("job:*").unwrap());
        assert_eq!(
            listing.command(b"0"),
            [
                &b"SCAN"[..],
                b"0",
                b"MATCH",
                b"fencelock:*{job:*}",
                b"COUNT",
                b"1000"
            ]
            .map(<[u8]>::to_vec)
        );
        let read = listing
            .read(page(
                "17",
                &[
                    b"fencelock:{job:1}",
                    b"fencelock:{job:1}:fence",
                    b"fencelock:#{job:%7B}",
                    b"fencelock:{jobs}",
                    b"fencelock:x{job:2}",
                ],
            ))
            .unwrap();
        assert_eq!(read.next.as_deref(), Some(&b"17"[..]));
        let names: Vec<&[u8]> = read.names.iter().map(LockName::as_bytes).collect();
        assert_eq!(names, [&b"job:1"[..], b"job:{"]);
        assert_eq!(listing.read(page("0", &[])).unwrap().next, None);
    }

    #[test]
    fn walks_combine_into_a_sorted_union_once_a_majority_answered() {
        let listing = Listing::new(&KeySpace::default(), NamePattern::all());
        let names = |list: &[&str]| -> Vec<LockName> {
            list.iter().map(|n| LockName::new(n).unwrap()).collect()
        };
        let down = || Err(Error::redis(None, "node 3: connection refused"));
        let union = listing
            .combine(
                3,
                vec![Ok(names(&["b", "a"])), down(), Ok(names(&["c", "a"]))],
            )
            .unwrap();
        assert_eq!(union, names(&["a", "b", "c"]));
        let err = listing
            .combine(3, vec![Ok(names(&["a"])), down(), down()])
            .unwrap_err();
        assert!(err.to_string().contains("only 1 of 3"), "{err}");
        assert!(listing.combine(1, vec![down()]).is_err());
    }

    #[test]
    fn bad_replies_are_redis_errors_naming_the_pattern() {
        let listing = Listing::new(&KeySpace::default(), NamePattern::all());
        for reply in [
            Reply::Int(1),
            Reply::Array(vec![Reply::Bulk(b"0".to_vec())]),
            // A key list holding a number.
            Reply::Array(vec![
                Reply::Bulk(b"0".to_vec()),
                Reply::Array(vec![Reply::Int(3)]),
            ]),
            Reply::Error("NOPERM this user has no permissions to run the 'scan' command".into()),
        ] {
            let err = listing.read(reply).unwrap_err();
            assert!(
                matches!(&err, Error::Redis { name: Some(n), .. } if n.as_bytes() == b"*"),
                "{err:?}"
            );
        }
    }
}
