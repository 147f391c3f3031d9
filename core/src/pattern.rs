//! Name patterns for listing locks: the glob syntax of Redis's `SCAN MATCH`
//! and `KEYS` (`*`, `?`, `[abc]`, `[^a]`, `[a-z]`, `\` escapes), matched
//! against lock *names* (not keys), byte by byte.
//!
//! A pattern is validated once, here: 1 to 1,024 bytes like a name, no
//! unterminated `[...]`, no trailing `\` (Redis guesses at both; an operator
//! typing `list 'a[b'` gets an error instead of a surprise). How a pattern
//! becomes a `SCAN MATCH` argument over the key layout is `keys.rs`'s job
//! ([`crate::KeySpace::scan_match`]).

use std::fmt;

use crate::{Error, LockName};

/// One element of a pattern.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Token {
    /// This byte (written plainly or escaped with `\`).
    Literal(u8),
    /// `?`: any one byte.
    AnyByte,
    /// `*`: any run of bytes, the empty one included.
    AnyRun,
    /// `[...]`: one byte in (or, `negated`, not in) these inclusive ranges.
    Class {
        negated: bool,
        ranges: Vec<(u8, u8)>,
    },
}

impl Token {
    fn matches(&self, byte: u8) -> bool {
        match self {
            Token::Literal(b) => *b == byte,
            Token::AnyByte => true,
            Token::AnyRun => unreachable!("runs are matched by the caller"),
            Token::Class { negated, ranges } => {
                ranges.iter().any(|&(lo, hi)| lo <= byte && byte <= hi) != *negated
            }
        }
    }
}

/// A validated name pattern (see the module docs). Not a secret.
#[derive(Clone, PartialEq, Eq)]
pub struct NamePattern {
    text: LockName,
    tokens: Vec<Token>,
}

impl NamePattern {
    /// Parse `pattern` (1 to 1,024 bytes, like a name).
    pub fn new(pattern: impl AsRef<[u8]>) -> Result<Self, Error> {
        let bytes = pattern.as_ref();
        let text = LockName::new(bytes).map_err(|e| match e {
            Error::InvalidArgument(message) => {
                Error::invalid(message.replace("lock name", "name pattern"))
            }
            other => other,
        })?;
        let tokens = parse(bytes)?;
        Ok(NamePattern { text, tokens })
    }

    /// `*`: every name.
    pub fn all() -> Self {
        NamePattern::new("*").expect("a valid pattern")
    }

    /// The pattern as given.
    pub fn as_bytes(&self) -> &[u8] {
        self.text.as_bytes()
    }

    /// The pattern shown where a lock name would be (error messages).
    pub fn as_name(&self) -> &LockName {
        &self.text
    }

    pub(crate) fn tokens(&self) -> &[Token] {
        &self.tokens
    }

    /// Whether `name` matches.
    pub fn matches(&self, name: &[u8]) -> bool {
        // Greedy with one backtrack point: the last `*` seen, and where in
        // the name it has matched up to. Linear in practice, O(n·m) worst.
        let tokens = &self.tokens;
        let (mut t, mut n) = (0, 0);
        let mut star: Option<(usize, usize)> = None;
        while n < name.len() {
            match tokens.get(t) {
                Some(Token::AnyRun) => {
                    star = Some((t, n));
                    t += 1;
                }
                Some(token) if token.matches(name[n]) => {
                    t += 1;
                    n += 1;
                }
                _ => match star {
                    // Let the last `*` take one more byte and try again.
                    Some((st, sn)) => {
                        star = Some((st, sn + 1));
                        t = st + 1;
                        n = sn + 1;
                    }
                    None => return false,
                },
            }
        }
        tokens[t..].iter().all(|token| *token == Token::AnyRun)
    }
}

fn parse(bytes: &[u8]) -> Result<Vec<Token>, Error> {
    let mut tokens = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let token = match bytes[i] {
            b'*' => {
                // `**` is `*`.
                if tokens.last() != Some(&Token::AnyRun) {
                    tokens.push(Token::AnyRun);
                }
                i += 1;
                continue;
            }
            b'?' => Token::AnyByte,
            b'\\' => {
                i += 1;
                Token::Literal(*bytes.get(i).ok_or_else(|| {
                    Error::invalid("name pattern ends with a lone '\\' (escape it as '\\\\')")
                })?)
            }
            b'[' => {
                let (token, end) = class(bytes, i + 1)?;
                i = end;
                token
            }
            other => Token::Literal(other),
        };
        tokens.push(token);
        i += 1;
    }
    Ok(tokens)
}

/// A `[...]` class starting after its `[` at `start`: the token and the
/// index of its closing `]`. As in Redis, `]` right after `[` (or `[^`)
/// closes an empty class, and a reversed range `z-a` means `a-z`.
fn class(bytes: &[u8], start: usize) -> Result<(Token, usize), Error> {
    let unterminated =
        || Error::invalid("name pattern has a '[' without its ']' (escape it as '\\[')");
    let mut i = start;
    let negated = bytes.get(i) == Some(&b'^');
    if negated {
        i += 1;
    }
    let mut ranges = Vec::new();
    loop {
        let mut byte = *bytes.get(i).ok_or_else(unterminated)?;
        match byte {
            b']' => return Ok((Token::Class { negated, ranges }, i)),
            b'\\' => {
                i += 1;
                byte = *bytes.get(i).ok_or_else(unterminated)?;
            }
            _ => {}
        }
        match (bytes.get(i + 1), bytes.get(i + 2)) {
            (Some(b'-'), Some(&hi)) if hi != b']' => {
                let (mut hi, mut next) = (hi, i + 3);
                if hi == b'\\' {
                    hi = *bytes.get(i + 3).ok_or_else(unterminated)?;
                    next += 1;
                }
                ranges.push((byte.min(hi), byte.max(hi)));
                i = next;
            }
            _ => {
                ranges.push((byte, byte));
                i += 1;
            }
        }
    }
}

impl fmt::Display for NamePattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.text, f)
    }
}

impl fmt::Debug for NamePattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "NamePattern({})", self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matches(pattern: &str, name: &[u8]) -> bool {
        NamePattern::new(pattern).unwrap().matches(name)
    }

    #[test]
    fn globs_like_redis() {
        assert!(matches("*", b"anything"));
        assert!(matches("invoice:*", b"invoice:42"));
        assert!(matches("invoice:*", b"invoice:"));
        assert!(!matches("invoice:*", b"invoices:1"));
        assert!(matches("*:42", b"invoice:42"));
        assert!(matches("a*b*c", b"aXXbYYc"));
        assert!(!matches("a*b*c", b"aXXbYY"));
        assert!(matches("a?c", b"abc"));
        assert!(!matches("a?c", b"ac"));
        assert!(matches("h[ae]llo", b"hallo"));
        assert!(!matches("h[ae]llo", b"hillo"));
        assert!(matches("h[^e]llo", b"hallo"));
        assert!(!matches("h[^e]llo", b"hello"));
        assert!(matches("h[a-b]llo", b"hbllo"));
        assert!(
            matches("h[b-a]llo", b"hbllo"),
            "reversed ranges are swapped"
        );
        assert!(!matches("h[a-b]llo", b"hcllo"));
        assert!(matches(r"a\*b", b"a*b"));
        assert!(!matches(r"a\*b", b"aXb"));
        assert!(matches(r"[\]]", b"]"));
        assert!(!matches("[]", b"x"), "an empty class matches nothing");
        assert!(matches("[^]", b"x"), "an empty negated class is any byte");
        assert!(matches("x[a-]", b"x-"), "a '-' before ']' is literal");
        assert!(matches("{*}", b"{a}"));
        assert!(
            NamePattern::new([b'*', 0xff])
                .unwrap()
                .matches(&[b'a', 0xff]),
            "bytes, not text"
        );
    }

    #[test]
    fn many_stars_stay_fast() {
        let pattern = "*a".repeat(40) + "b";
        let name = "a".repeat(1024);
        assert!(!matches(&pattern, name.as_bytes()));
    }

    #[test]
    fn bad_patterns_are_refused() {
        for bad in ["", "a[b", "[", "[^", r"a\", r"[\"] {
            let err = NamePattern::new(bad).unwrap_err();
            assert!(matches!(err, Error::InvalidArgument(_)), "{bad:?}");
        }
        let too_long = "a".repeat(1025);
        assert!(NamePattern::new(&too_long)
            .unwrap_err()
            .to_string()
            .contains("name pattern"));
        assert!(NamePattern::new("a".repeat(1024)).is_ok());
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2_000))]
        #[test]
        fn an_escaped_name_matches_only_itself(name in proptest::collection::vec(proptest::prelude::any::<u8>(), 1..24),
                                               other in proptest::collection::vec(proptest::prelude::any::<u8>(), 1..24)) {
            let mut escaped = Vec::new();
            for &b in &name {
                if matches!(b, b'*' | b'?' | b'[' | b']' | b'\\') {
                    escaped.push(b'\\');
                }
                escaped.push(b);
            }
            proptest::prop_assume!(escaped.len() <= 1024);
            let pattern = NamePattern::new(&escaped).unwrap();
            proptest::prop_assert!(pattern.matches(&name));
            proptest::prop_assert_eq!(pattern.matches(&other), other == name);
        }
    }
}
