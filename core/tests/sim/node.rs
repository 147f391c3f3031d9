//! A fake Redis server executing the four scripts' semantics.

use std::collections::BTreeMap;

use fencelock_core::{Command, Reply, Script};

use super::{Micros, MS};

// ---------------------------------------------------------------------------
// Fake Redis.

/// One Redis server: string keys with an optional expiry (global time).
#[derive(Clone, Debug)]
pub struct Node {
    data: BTreeMap<Vec<u8>, (Vec<u8>, Option<Micros>)>,
    pub up: bool,
    /// Down (crashed or unreachable) until at least this instant.
    pub down_until: Micros,
    /// The server's clock rate (ppm of real time): PX/PEXPIRE/PTTL count in
    /// its time, so a fast server clock expires keys early.
    pub rate_ppm: u64,
    /// Scripts run (while up), for round-trip accounting.
    pub executed: Vec<Script>,
}

impl Default for Node {
    fn default() -> Self {
        Node {
            data: BTreeMap::new(),
            up: true,
            down_until: 0,
            rate_ppm: 1_000_000,
            executed: Vec::new(),
        }
    }
}

fn int(bytes: &[u8]) -> Option<i64> {
    std::str::from_utf8(bytes).ok()?.parse().ok()
}

impl Node {
    /// Real time a server-time duration of `ms` takes.
    fn real_us(&self, ms: u64) -> Micros {
        (ms as u128 * MS as u128 * 1_000_000 / self.rate_ppm as u128).min(u64::MAX as u128 / 4)
            as u64
    }

    /// A real duration as the server measures it, in whole ms.
    fn server_ms(&self, real: Micros) -> u64 {
        (real as u128 * self.rate_ppm as u128 / 1_000_000 / MS as u128) as u64
    }

    fn live(&mut self, key: &[u8], now: Micros) -> Option<&mut (Vec<u8>, Option<Micros>)> {
        if matches!(self.data.get(key), Some((_, Some(exp))) if *exp <= now) {
            self.data.remove(key);
        }
        self.data.get_mut(key)
    }

    /// The value of `key` at `now` and its remaining TTL, if it has one.
    pub fn get(&mut self, key: &[u8], now: Micros) -> Option<(Vec<u8>, Option<Micros>)> {
        self.live(key, now)
            .map(|(v, exp)| (v.clone(), exp.map(|e| e - now)))
    }

    pub fn set(&mut self, key: &[u8], value: &[u8], expires_at: Option<Micros>) {
        self.data.insert(key.to_vec(), (value.to_vec(), expires_at));
    }

    /// The fencing counter stored under `key` (0 if absent).
    pub fn counter(&mut self, key: &[u8], now: Micros) -> i64 {
        self.get(key, now).and_then(|(v, _)| int(&v)).unwrap_or(0)
    }

    /// Lose everything (a crash without persistence).
    pub fn wipe(&mut self) {
        self.data.clear();
    }

    /// Runs one script. Returns the reply and, for a successful release, the
    /// channel a notification was published on.
    pub fn exec(&mut self, now: Micros, cmd: &Command) -> (Reply, Option<Vec<u8>>) {
        self.executed.push(cmd.script);
        let err = |m: &str| (Reply::Error(m.to_string()), None);
        let key = |i: usize| cmd.keys.get(i).cloned();
        let arg = |i: usize| cmd.args.get(i).cloned();
        match cmd.script {
            // SET lock token NX PX ttl (or our own token: PEXPIRE); INCR fence
            // -> {1, fence} | {0, pttl}
            Script::Acquire => {
                let (Some(lock), Some(fence), Some(token), Some(ttl)) =
                    (key(0), key(1), arg(0), arg(1))
                else {
                    return err("ERR wrong number of arguments");
                };
                let Some(ttl) = int(&ttl).filter(|t| *t > 0) else {
                    return err("ERR invalid expire time in 'set' command");
                };
                // Free, or our own leftover token (a lost compensating
                // release): granted. Anyone else's: {0, pttl}.
                if let Some((holder, exp)) = self.live(&lock, now).map(|e| e.clone()) {
                    if holder != token {
                        let pttl = match exp {
                            Some(e) => self.server_ms(e - now) as i64,
                            None => -1,
                        };
                        return (Reply::Array(vec![Reply::Int(0), Reply::Int(pttl)]), None);
                    }
                }
                let counter = match self.live(&fence, now) {
                    None => 0,
                    Some((v, _)) => match int(v) {
                        Some(n) => n,
                        None => {
                            self.data.remove(&lock);
                            return err("ERR value is not an integer or out of range");
                        }
                    },
                };
                let Some(next) = counter.checked_add(1) else {
                    self.data.remove(&lock);
                    return err("ERR increment or decrement would overflow");
                };
                self.set(&fence, next.to_string().as_bytes(), None);
                let expires = now + self.real_us(ttl as u64);
                self.set(&lock, &token, Some(expires));
                (Reply::Array(vec![Reply::Int(1), Reply::Int(next)]), None)
            }
            // if GET lock == token: DEL lock; PUBLISH channel (if given) -> 1 | 0
            Script::Release => {
                let (Some(lock), Some(token)) = (key(0), arg(0)) else {
                    return err("ERR wrong number of arguments");
                };
                if self.live(&lock, now).is_some_and(|(v, _)| *v == token) {
                    self.data.remove(&lock);
                    (Reply::Int(1), key(1))
                } else {
                    (Reply::Int(0), None)
                }
            }
            // if GET lock == token: PEXPIRE lock ttl -> 1 | 0
            Script::Extend => {
                let (Some(lock), Some(token), Some(ttl)) = (key(0), arg(0), arg(1)) else {
                    return err("ERR wrong number of arguments");
                };
                let Some(ttl) = int(&ttl) else {
                    return err("ERR value is not an integer or out of range");
                };
                let real = self.real_us(ttl.max(0) as u64);
                match self.live(&lock, now) {
                    Some((v, exp)) if *v == token => {
                        if ttl <= 0 {
                            self.data.remove(&lock);
                        } else {
                            *exp = Some(now + real);
                        }
                        (Reply::Int(1), None)
                    }
                    _ => (Reply::Int(0), None),
                }
            }
            // counter = max(counter, fence) -> counter
            Script::RaiseFence => {
                let (Some(fence), Some(wanted)) = (key(0), arg(0)) else {
                    return err("ERR wrong number of arguments");
                };
                let Some(wanted) = int(&wanted) else {
                    return err("ERR attempt to compare number with nil");
                };
                let current = match self.live(&fence, now) {
                    None => 0,
                    Some((v, _)) => match int(v) {
                        Some(n) => n,
                        None => return err("ERR attempt to compare nil with number"),
                    },
                };
                if current < wanted {
                    self.set(&fence, wanted.to_string().as_bytes(), None);
                    (Reply::Int(wanted), None)
                } else {
                    (Reply::Int(current), None)
                }
            }
        }
    }
}
