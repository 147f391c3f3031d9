//! A fake Redis server executing the scripts' semantics (core/src/scripts).

use std::collections::{BTreeMap, BTreeSet};

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
    /// The server's wall clock (`TIME`, which fences come from) is real time
    /// plus this offset, in µs (negative: behind). Stepping it back models a
    /// clock that jumps backwards.
    pub time_offset: i64,
    /// The ACL refuses PUBLISH (a user without channel rights).
    pub refuse_publish: bool,
    /// Leases subscribed to the lock's channel here (`PUBSUB NUMSUB`).
    pub subscribers: BTreeSet<usize>,
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
            time_offset: 0,
            refuse_publish: false,
            subscribers: BTreeSet::new(),
            executed: Vec::new(),
        }
    }
}

fn int(bytes: &[u8]) -> Option<i64> {
    std::str::from_utf8(bytes).ok()?.parse().ok()
}

/// A fence counter as the scripts read it: decimal digits, at most 20.
fn fence(bytes: &[u8]) -> Option<u128> {
    if bytes.is_empty() || bytes.len() > 20 || !bytes.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(bytes).ok()?.parse().ok()
}

fn bulk(n: u128) -> Reply {
    Reply::Bulk(n.to_string().into_bytes())
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

    /// The fence counter under `key` as the scripts read it: 0 if absent,
    /// `None` if unreadable (not decimal, or no u64 above it).
    fn stored_fence(&mut self, key: &[u8], now: Micros) -> Option<u128> {
        match self.live(key, now) {
            None => Some(0),
            Some((v, _)) => fence(v).filter(|&n| n < u64::MAX as u128),
        }
    }

    /// The lock's PTTL as the scripts see it: -2 free, -1 no expiry.
    fn pttl(&mut self, key: &[u8], now: Micros) -> i64 {
        match self.live(key, now).map(|e| e.1) {
            None => -2,
            Some(None) => -1,
            Some(Some(exp)) => self.server_ms(exp - now) as i64,
        }
    }

    /// `TIME` in whole ms, as the server's wall clock reads at `now`.
    pub fn time_ms(&self, now: Micros) -> u64 {
        (now as i64 + self.time_offset).max(0) as u64 / MS
    }

    /// What acquire.lua would issue at `now` over a counter of `stored`.
    pub fn next_fence(&self, stored: u128, now: Micros) -> u128 {
        (stored + 1).max(self.time_ms(now) as u128 * 1024)
    }

    /// Lose everything (a crash without persistence).
    pub fn wipe(&mut self) {
        self.data.clear();
    }

    /// Runs one script. Returns the reply and, for a release that freed the
    /// lock, the channel a notification was published on.
    pub fn exec(&mut self, now: Micros, cmd: &Command) -> (Reply, Option<Vec<u8>>) {
        self.executed.push(cmd.script);
        let err = |m: &str| (Reply::Error(m.to_string()), None);
        let key = |i: usize| cmd.keys.get(i).cloned();
        let arg = |i: usize| cmd.args.get(i).cloned();
        match cmd.script {
            // SET lock token NX PX ttl (or our own token: PEXPIRE);
            // fence = max(stored + 1, TIME ms * 1024), SET PX fence_ttl
            // -> {1, "fence"} | {0, pttl}
            Script::Acquire => {
                let (Some(lock), Some(fence_key), Some(token), Some(ttl), Some(fence_ttl)) =
                    (key(0), key(1), arg(0), arg(1), arg(2))
                else {
                    return err("ERR wrong number of arguments");
                };
                let (Some(ttl), Some(fence_ttl)) = (
                    int(&ttl).filter(|t| *t > 0),
                    int(&fence_ttl).filter(|t| *t > 0),
                ) else {
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
                let stored = match self.live(&fence_key, now) {
                    None => 0,
                    Some((v, _)) => match fence(v).filter(|&n| n < u64::MAX as u128) {
                        Some(n) => n,
                        None => {
                            self.data.remove(&lock);
                            return err("ERR fence counter is not an integer below 2^64-1");
                        }
                    },
                };
                let next = self.next_fence(stored, now);
                let fence_expires = now + self.real_us(fence_ttl as u64);
                self.set(&fence_key, next.to_string().as_bytes(), Some(fence_expires));
                let expires = now + self.real_us(ttl as u64);
                self.set(&lock, &token, Some(expires));
                (Reply::Array(vec![Reply::Int(1), bulk(next)]), None)
            }
            // if GET lock == token: DEL lock; PUBLISH channel (if given)
            // -> 1 | 2 (PUBLISH refused) | 0
            Script::Release => {
                let (Some(lock), Some(token)) = (key(0), arg(0)) else {
                    return err("ERR wrong number of arguments");
                };
                if self.live(&lock, now).is_some_and(|(v, _)| *v == token) {
                    self.data.remove(&lock);
                    match key(1) {
                        Some(_) if self.refuse_publish => (Reply::Int(2), None),
                        channel => (Reply::Int(1), channel),
                    }
                } else {
                    (Reply::Int(0), None)
                }
            }
            // if GET lock == token: PEXPIRE fence fence_ttl; PEXPIRE lock ttl
            // -> 1 | 0
            Script::Extend => {
                let (Some(lock), Some(fence_key), Some(token), Some(ttl), Some(fence_ttl)) =
                    (key(0), key(1), arg(0), arg(1), arg(2))
                else {
                    return err("ERR wrong number of arguments");
                };
                let (Some(ttl), Some(fence_ttl)) = (int(&ttl), int(&fence_ttl)) else {
                    return err("ERR value is not an integer or out of range");
                };
                if self.live(&lock, now).is_none_or(|(v, _)| *v != token) {
                    return (Reply::Int(0), None);
                }
                self.pexpire(&fence_key, fence_ttl, now);
                self.pexpire(&lock, ttl, now);
                (Reply::Int(1), None)
            }
            // counter = max(counter, fence), SET PX fence_ttl when raised
            // -> "counter"
            Script::RaiseFence => {
                let (Some(fence_key), Some(wanted), Some(fence_ttl)) = (key(0), arg(0), arg(1))
                else {
                    return err("ERR wrong number of arguments");
                };
                let (Some(wanted), Some(fence_ttl)) = (fence(&wanted), int(&fence_ttl)) else {
                    return err("ERR fence must be a decimal u64");
                };
                let current = match self.live(&fence_key, now) {
                    None => 0,
                    Some((v, _)) => match fence(v) {
                        Some(n) => n,
                        None => return err("ERR fence counter is not an integer"),
                    },
                };
                if current < wanted {
                    let expires = now + self.real_us(fence_ttl.max(0) as u64);
                    self.set(&fence_key, wanted.to_string().as_bytes(), Some(expires));
                    (bulk(wanted), None)
                } else {
                    (bulk(current), None)
                }
            }
            // SET lock token NX PX ttl (or ours already: PEXPIRE), else 0;
            // counter = max(counter, fence) with PX fence_ttl -> 1
            Script::Reclaim => {
                let (
                    Some(lock),
                    Some(fence_key),
                    Some(token),
                    Some(ttl),
                    Some(wanted),
                    Some(fence_ttl),
                ) = (key(0), key(1), arg(0), arg(1), arg(2), arg(3))
                else {
                    return err("ERR wrong number of arguments");
                };
                let (Some(ttl), Some(wanted), Some(fence_ttl)) =
                    (int(&ttl), fence(&wanted), int(&fence_ttl))
                else {
                    return err("ERR value is not an integer or out of range");
                };
                match self.live(&lock, now).map(|(v, _)| v.clone()) {
                    Some(holder) if holder != token => return (Reply::Int(0), None),
                    _ => {}
                }
                let expires = now + self.real_us(ttl.max(0) as u64);
                self.set(&lock, &token, Some(expires));
                let fence_expires = now + self.real_us(fence_ttl.max(0) as u64);
                match self.live(&fence_key, now).map(|(v, _)| fence(v)) {
                    None => self.set(
                        &fence_key,
                        wanted.to_string().as_bytes(),
                        Some(fence_expires),
                    ),
                    Some(Some(current)) if current < wanted => self.set(
                        &fence_key,
                        wanted.to_string().as_bytes(),
                        Some(fence_expires),
                    ),
                    Some(_) => self.pexpire(&fence_key, fence_ttl, now),
                }
                (Reply::Int(1), None)
            }
            // {PTTL lock (-2 free), GET fence or nil, GET lock in ARGV}
            Script::Inspect => {
                let (Some(lock), Some(fence_key)) = (key(0), key(1)) else {
                    return err("ERR wrong number of arguments");
                };
                let (pttl, ours) = match self.live(&lock, now).map(|e| e.clone()) {
                    None => (-2, false),
                    Some((holder, exp)) => (
                        exp.map_or(-1, |e| self.server_ms(e - now) as i64),
                        cmd.args.contains(&holder),
                    ),
                };
                let fence = match self.live(&fence_key, now) {
                    Some((v, _)) => Reply::Bulk(v.clone()),
                    None => Reply::Nil,
                };
                (
                    Reply::Array(vec![Reply::Int(pttl), fence, Reply::Int(i64::from(ours))]),
                    None,
                )
            }
            // next = max(GET fence + 1, now * 1024); DEL lock + PUBLISH if
            // held; SET fence next PX max(pttl, 0) + grace -> {held, next}
            Script::ForceRelease => {
                let (Some(lock), Some(fence_key), Some(channel), Some(grace)) =
                    (key(0), key(1), key(2), arg(0).and_then(|g| int(&g)))
                else {
                    return err("ERR wrong number of arguments");
                };
                let stored = match self.live(&fence_key, now) {
                    None => 0,
                    Some((v, _)) => match fence(v).filter(|&n| n < u64::MAX as u128) {
                        Some(n) => n,
                        None => return err("ERR fence counter is not an integer below 2^64-1"),
                    },
                };
                let next = self.next_fence(stored, now);
                let expiry = self.live(&lock, now).map(|e| e.1);
                let pttl = expiry.map(|exp| exp.map_or(0, |e| self.server_ms(e - now) as i64));
                if pttl.is_some() {
                    self.data.remove(&lock);
                }
                let keep = (pttl.unwrap_or(0) + grace).max(1) as u64;
                let expires = now + self.real_us(keep);
                self.set(&fence_key, next.to_string().as_bytes(), Some(expires));
                let held = Reply::Int(i64::from(pttl.is_some()));
                (Reply::Array(vec![held, bulk(next)]), pttl.map(|_| channel))
            }
            Script::Handoff => self.handoff(now, cmd),
        }
    }

    /// handoff.lua: release ours and, while nobody listens on the channel,
    /// set the successor's token and the next fence; else DEL + PUBLISH.
    /// -> {1, "fence"} | {2, 1} | {2, 0} (PUBLISH refused) | {0, pttl}
    fn handoff(&mut self, now: Micros, cmd: &Command) -> (Reply, Option<Vec<u8>>) {
        let err = |m: &str| (Reply::Error(m.to_string()), None);
        let key = |i: usize| cmd.keys.get(i).cloned();
        let arg = |i: usize| cmd.args.get(i).cloned();
        let (Some(lock), Some(fence_key), Some(channel)) = (key(0), key(1), key(2)) else {
            return err("ERR wrong number of arguments");
        };
        let (Some(token), Some(successor), Some(ttl), Some(fence_ttl)) =
            (arg(0), arg(1), arg(2), arg(3))
        else {
            return err("ERR wrong number of arguments");
        };
        if self.live(&lock, now).is_none_or(|(v, _)| *v != token) {
            let pttl = self.pttl(&lock, now);
            return (Reply::Array(vec![Reply::Int(0), Reply::Int(pttl)]), None);
        }
        let (Some(ttl), Some(fence_ttl)) = (
            int(&ttl).filter(|t| *t > 0),
            int(&fence_ttl).filter(|t| *t > 0),
        ) else {
            return err("ERR invalid expire time in 'set' command");
        };
        let stored = self.stored_fence(&fence_key, now);
        if let (true, Some(stored)) = (self.subscribers.is_empty(), stored) {
            let next = self.next_fence(stored, now);
            let fence_expires = now + self.real_us(fence_ttl as u64);
            self.set(&fence_key, next.to_string().as_bytes(), Some(fence_expires));
            let expires = now + self.real_us(ttl as u64);
            self.set(&lock, &successor, Some(expires));
            return (Reply::Array(vec![Reply::Int(1), bulk(next)]), None);
        }
        self.data.remove(&lock);
        if self.refuse_publish {
            (Reply::Array(vec![Reply::Int(2), Reply::Int(0)]), None)
        } else {
            (
                Reply::Array(vec![Reply::Int(2), Reply::Int(1)]),
                Some(channel),
            )
        }
    }

    /// PEXPIRE: a non-positive ttl deletes the key; a missing key is left be.
    fn pexpire(&mut self, key: &[u8], ttl_ms: i64, now: Micros) {
        let real = self.real_us(ttl_ms.max(0) as u64);
        if let Some((_, exp)) = self.live(key, now) {
            if ttl_ms <= 0 {
                self.data.remove(key);
            } else {
                *exp = Some(now + real);
            }
        }
    }
}
