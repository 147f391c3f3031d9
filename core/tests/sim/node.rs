//! A fake Redis server executing the scripts' semantics (core/src/scripts).

use std::collections::{BTreeMap, BTreeSet};

/// A sorted set: member -> score (the holders' expiries in server ms, the
/// line's arrivals in server µs). Members expire by score (the scripts
/// prune them), so the set itself never does here.
pub type ZSet = BTreeMap<Vec<u8>, i64>;

use fencelock_core::{Command, Reply, Script};

/// A command's keys and arguments as owned bytes: this node's data types.
struct Plain {
    script: Script,
    keys: Vec<Vec<u8>>,
    args: Vec<Vec<u8>>,
}

impl From<&Command> for Plain {
    fn from(cmd: &Command) -> Plain {
        let owned = |all: &[fencelock_core::Bytes]| all.iter().map(|b| b.to_vec()).collect();
        Plain {
            script: cmd.script,
            keys: owned(&cmd.keys),
            args: owned(&cmd.args),
        }
    }
}

use super::{Micros, MS};

// ---------------------------------------------------------------------------
// Fake Redis.

/// One Redis server: string keys with an optional expiry (global time).
#[derive(Clone, Debug)]
pub struct Node {
    data: BTreeMap<Vec<u8>, (Vec<u8>, Option<Micros>)>,
    /// Sorted sets (semaphore and read-write lock holders, the fair line).
    zsets: BTreeMap<Vec<u8>, ZSet>,
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
            zsets: BTreeMap::new(),
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
        self.zsets.clear();
    }

    /// The clock sorted-set scores count in, in µs: the server's, at its
    /// rate (as PX expiries are), plus its wall-clock offset.
    fn zclock_us(&self, now: Micros) -> i64 {
        (now as u128 * self.rate_ppm as u128 / 1_000_000) as i64 + self.time_offset
    }

    fn zclock_ms(&self, now: Micros) -> i64 {
        self.zclock_us(now).div_euclid(MS as i64)
    }

    /// A sorted set at `now`, its members with a score at or below `prune`
    /// (if given) removed first, as the scripts' ZREMRANGEBYSCORE does.
    pub fn zset(&mut self, key: &[u8], prune: Option<i64>) -> &mut ZSet {
        let set = self.zsets.entry(key.to_vec()).or_default();
        if let Some(limit) = prune {
            set.retain(|_, score| *score > limit);
        }
        set
    }

    /// Live members of a holders set at `now` (read-only).
    pub fn holders(&self, key: &[u8], now: Micros) -> Vec<Vec<u8>> {
        let limit = self.zclock_ms(now);
        self.zsets
            .get(key)
            .map(|set| {
                set.iter()
                    .filter(|(_, score)| **score > limit)
                    .map(|(member, _)| member.clone())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Members of the line in arrival order (no pruning).
    pub fn line(&self, key: &[u8]) -> Vec<Vec<u8>> {
        let mut members: Vec<(i64, Vec<u8>)> = self
            .zsets
            .get(key)
            .map(|set| set.iter().map(|(m, s)| (*s, m.clone())).collect())
            .unwrap_or_default();
        members.sort();
        members.into_iter().map(|(_, m)| m).collect()
    }

    /// Whether `key` is a string (a sorted-set script meets WRONGTYPE).
    fn is_string(&mut self, key: &[u8], now: Micros) -> bool {
        self.live(key, now).is_some()
    }

    /// The line pruned of expired waiters, in arrival order.
    fn prune_line(&mut self, waiting: &[u8], until: &[u8], now_ms: i64) -> Vec<Vec<u8>> {
        let gone: Vec<Vec<u8>> = self
            .zset(until, None)
            .iter()
            .filter(|(_, s)| **s <= now_ms)
            .map(|(m, _)| m.clone())
            .collect();
        for member in &gone {
            self.zset(waiting, None).remove(member);
        }
        self.zset(until, Some(now_ms));
        self.line(waiting)
    }

    /// The first (smallest) score's distance from `now_ms`, at least 1.
    fn first_expiry(&mut self, key: &[u8], now_ms: i64) -> i64 {
        self.zset(key, None)
            .values()
            .min()
            .map_or(1, |first| (first - now_ms).max(1))
    }

    /// The next fence over the counter in `fence_key` (acquire.lua's
    /// hybrid logical clock), stored with PX at least `fence_ttl`; `None`
    /// (nothing written) if the counter is unreadable.
    fn issue_fence(&mut self, fence_key: &[u8], fence_ttl: i64, now: Micros) -> Option<u128> {
        let (stored, expiry) = match self.live(fence_key, now) {
            None => (0, None),
            Some((v, exp)) => (fence(v).filter(|&n| n < u64::MAX as u128)?, *exp),
        };
        let next = self.next_fence(stored, now);
        let wanted = now + self.real_us(fence_ttl.max(1) as u64);
        let expires = expiry.map_or(wanted, |e| e.max(wanted));
        self.set(fence_key, next.to_string().as_bytes(), Some(expires));
        Some(next)
    }

    /// fair_acquire.lua / read_acquire.lua: the sorted-set acquires.
    fn acquire_in_set(&mut self, now: Micros, cmd: &Plain) -> (Reply, Option<Vec<u8>>) {
        let err = |m: &str| (Reply::Error(m.to_string()), None);
        let read = cmd.script == Script::ReadAcquire;
        let (Some(holders), Some(waiting), Some(until), Some(fence_key)) = (
            cmd.keys.first(),
            cmd.keys.get(1),
            cmd.keys.get(2),
            cmd.keys.get(3),
        ) else {
            return err("ERR wrong number of arguments");
        };
        let other = cmd.keys.get(4);
        let arg = |i: usize| cmd.args.get(i).and_then(|a| int(a));
        let Some(token) = cmd.args.first() else {
            return err("ERR wrong number of arguments");
        };
        let (Some(ttl), Some(fence_ttl)) = (arg(1), arg(2)) else {
            return err("ERR value is not an integer or out of range");
        };
        let (permits, patience) = if read {
            (i64::MAX, 0)
        } else {
            match (arg(3), arg(4)) {
                (Some(p), Some(w)) => (p, w),
                _ => return err("ERR value is not an integer or out of range"),
            }
        };
        if [Some(holders), other]
            .into_iter()
            .flatten()
            .any(|k| self.is_string(k, now))
        {
            return err("WRONGTYPE Operation against a key holding the wrong kind of value");
        }
        let now_ms = self.zclock_ms(now);
        let held = self.zset(holders, Some(now_ms)).len() as i64;
        let blockers = match other {
            Some(other) => self.zset(other, Some(now_ms)).len() as i64,
            None => 0,
        };
        let line = self.prune_line(waiting, until, now_ms);
        let ours = self.zset(holders, None).contains_key(token);
        let place = line.iter().position(|m| m == token);
        let granted = ours
            || if read {
                blockers == 0 && line.is_empty()
            } else {
                blockers == 0 && held + (place.unwrap_or(line.len()) as i64) < permits
            };
        if granted {
            let Some(next) = self.issue_fence(fence_key, fence_ttl, now) else {
                return err("ERR fence counter is not an integer below 2^64-1");
            };
            self.zset(holders, None).insert(token.clone(), now_ms + ttl);
            self.zset(waiting, None).remove(token);
            self.zset(until, None).remove(token);
            return (Reply::Array(vec![Reply::Int(1), bulk(next)]), None);
        }
        if !read && patience > 0 {
            if place.is_none() {
                let arrival = self.zclock_us(now);
                self.zset(waiting, None).insert(token.clone(), arrival);
            }
            self.zset(until, None)
                .insert(token.clone(), now_ms + patience);
        }
        let hint = if read && blockers > 0 {
            self.first_expiry(other.expect("read has a writer"), now_ms)
        } else if read {
            self.first_expiry(until, now_ms)
        } else if held >= permits {
            self.first_expiry(holders, now_ms)
        } else if blockers > 0 {
            self.first_expiry(other.expect("counted"), now_ms)
        } else {
            self.first_expiry(until, now_ms)
        };
        (Reply::Array(vec![Reply::Int(0), Reply::Int(hint)]), None)
    }

    /// fair_mutex_acquire.lua: the mutex's string key, the waiters in a
    /// fair line beside it.
    fn acquire_fair_mutex(&mut self, now: Micros, cmd: &Plain) -> (Reply, Option<Vec<u8>>) {
        let err = |m: &str| (Reply::Error(m.to_string()), None);
        let (Some(lock), Some(waiting), Some(until), Some(fence_key), Some(token)) = (
            cmd.keys.first(),
            cmd.keys.get(1),
            cmd.keys.get(2),
            cmd.keys.get(3),
            cmd.args.first(),
        ) else {
            return err("ERR wrong number of arguments");
        };
        let arg = |i: usize| cmd.args.get(i).and_then(|a| int(a));
        let (Some(ttl), Some(fence_ttl), Some(patience)) =
            (arg(1).filter(|t| *t > 0), arg(2).filter(|t| *t > 0), arg(3))
        else {
            return err("ERR invalid expire time in 'set' command");
        };
        let now_ms = self.zclock_ms(now);
        let holder = self.live(lock, now).map(|e| e.clone());
        let line = self.prune_line(waiting, until, now_ms);
        let hint = match holder {
            Some((ref h, exp)) if h != token => {
                Some(exp.map_or(-1, |e| self.server_ms(e - now) as i64))
            }
            Some(_) => None,
            None => match line.iter().position(|m| m == token).unwrap_or(line.len()) {
                0 => None,
                _ => Some(self.first_expiry(until, now_ms)),
            },
        };
        if let Some(hint) = hint {
            if patience > 0 {
                let arrival = self.zclock_us(now);
                self.zset(waiting, None)
                    .entry(token.clone())
                    .or_insert(arrival);
                self.zset(until, None)
                    .insert(token.clone(), now_ms + patience);
            }
            return (Reply::Array(vec![Reply::Int(0), Reply::Int(hint)]), None);
        }
        let Some(next) = self.issue_fence(fence_key, fence_ttl, now) else {
            return err("ERR fence counter is not an integer below 2^64-1");
        };
        let expires = now + self.real_us(ttl as u64);
        self.set(lock, token, Some(expires));
        self.zset(waiting, None).remove(token);
        self.zset(until, None).remove(token);
        (Reply::Array(vec![Reply::Int(1), bulk(next)]), None)
    }

    /// Runs one script. Returns the reply and, for a release that freed the
    /// lock, the message it published on the lock's channel (`1`, or a fair
    /// mutex's wake id of the first waiter in line).
    pub fn exec(&mut self, now: Micros, cmd: &Command) -> (Reply, Option<Vec<u8>>) {
        let cmd = &Plain::from(cmd);
        self.executed.push(cmd.script);
        let err = |m: &str| (Reply::Error(m.to_string()), None);
        let key = |i: usize| cmd.keys.get(i).cloned();
        let arg = |i: usize| cmd.args.get(i).cloned();
        match cmd.script {
            Script::FairAcquire | Script::ReadAcquire => self.acquire_in_set(now, cmd),
            Script::FairMutexAcquire => self.acquire_fair_mutex(now, cmd),
            // if GET lock == token: DEL lock; ZREM line, expiries; publish
            // if either freed something -> 1 | 2 (PUBLISH refused) | 0
            Script::FairMutexRelease => {
                let (Some(lock), Some(waiting), Some(until), Some(token)) =
                    (key(0), key(1), key(2), arg(0))
                else {
                    return err("ERR wrong number of arguments");
                };
                let held = self.live(&lock, now).is_some_and(|(v, _)| *v == token);
                if held {
                    self.data.remove(&lock);
                }
                let queued = self.zset(&waiting, None).remove(&token).is_some();
                self.zset(&until, None).remove(&token);
                let published = key(3).filter(|_| (held || queued) && !self.refuse_publish);
                // The message names the first live waiter (sha1hex of its
                // token), or nobody ("1") when the line is empty.
                let published = published.map(|_| {
                    let now_ms = self.zclock_ms(now);
                    match self.prune_line(&waiting, &until, now_ms).first() {
                        Some(first) => sha1_smol::Sha1::from(first)
                            .digest()
                            .to_string()
                            .into_bytes(),
                        None => b"1".to_vec(),
                    }
                });
                let reply = match (held, key(3)) {
                    (false, _) => 0,
                    (true, Some(_)) if self.refuse_publish => 2,
                    (true, _) => 1,
                };
                (Reply::Int(reply), published)
            }
            // {ms until the last live holder expires (-2 none), GET fence,
            // a live holder in ARGV}
            Script::HoldersInspect => {
                let (Some(holders), Some(fence_key)) = (key(0), key(1)) else {
                    return err("ERR wrong number of arguments");
                };
                let now_ms = self.zclock_ms(now);
                let set = self.zset(&holders, None).clone();
                let live: Vec<(&Vec<u8>, &i64)> =
                    set.iter().filter(|(_, s)| **s > now_ms).collect();
                let pttl = live.iter().map(|(_, s)| **s - now_ms).max().unwrap_or(-2);
                let ours = live.iter().any(|(m, _)| cmd.args.contains(m));
                let fence = match self.live(&fence_key, now) {
                    Some((v, _)) => Reply::Bulk(v.clone()),
                    None => Reply::Nil,
                };
                (
                    Reply::Array(vec![Reply::Int(pttl), fence, Reply::Int(i64::from(ours))]),
                    None,
                )
            }
            // our entry, if live: score = now + ttl; fence key kept as long
            // -> 1 | 0
            Script::HoldersExtend => {
                let (Some(holders), Some(fence_key), Some(token), Some(ttl), Some(fence_ttl)) =
                    (key(0), key(1), arg(0), arg(1), arg(2))
                else {
                    return err("ERR wrong number of arguments");
                };
                let (Some(ttl), Some(fence_ttl)) = (int(&ttl), int(&fence_ttl)) else {
                    return err("ERR value is not an integer or out of range");
                };
                if self.is_string(&holders, now) {
                    return err(
                        "WRONGTYPE Operation against a key holding the wrong kind of value",
                    );
                }
                let now_ms = self.zclock_ms(now);
                let set = self.zset(&holders, None);
                match set.get(&token).copied() {
                    Some(expiry) if expiry > now_ms => {
                        set.insert(token, now_ms + ttl);
                        let wanted = now + self.real_us(fence_ttl.max(0) as u64);
                        if let Some((_, exp)) = self.live(&fence_key, now) {
                            *exp = Some(exp.map_or(wanted, |e| e.max(wanted)));
                        }
                        (Reply::Int(1), None)
                    }
                    Some(_) => {
                        set.remove(&token);
                        (Reply::Int(0), None)
                    }
                    None => (Reply::Int(0), None),
                }
            }
            // ZREM holders, line, expiries; publish if a place was freed
            // and the channel given -> 1 | 2 (PUBLISH refused) | 0
            Script::HoldersRelease => {
                let (Some(holders), Some(waiting), Some(until), Some(token)) =
                    (key(0), key(1), key(2), arg(0))
                else {
                    return err("ERR wrong number of arguments");
                };
                if self.is_string(&holders, now) {
                    return err(
                        "WRONGTYPE Operation against a key holding the wrong kind of value",
                    );
                }
                let held = self.zset(&holders, None).remove(&token).is_some();
                let queued = self.zset(&waiting, None).remove(&token).is_some();
                self.zset(&until, None).remove(&token);
                let published = key(3)
                    .filter(|_| (held || queued) && !self.refuse_publish)
                    .map(|_| b"1".to_vec());
                let reply = match (held, key(3)) {
                    (false, _) => 0,
                    (true, Some(_)) if self.refuse_publish => 2,
                    (true, _) => 1,
                };
                (Reply::Int(reply), published)
            }
            // put our entry back unless that exceeds the limit or meets the
            // other side; counter = max(counter, fence) -> 1 | 0
            Script::HoldersReclaim => {
                let (
                    Some(holders),
                    Some(fence_key),
                    Some(token),
                    Some(ttl),
                    Some(wanted),
                    Some(fence_ttl),
                    Some(limit),
                ) = (key(0), key(1), arg(0), arg(1), arg(2), arg(3), arg(4))
                else {
                    return err("ERR wrong number of arguments");
                };
                let (Some(ttl), Some(wanted), Some(fence_ttl), Some(limit)) =
                    (int(&ttl), fence(&wanted), int(&fence_ttl), int(&limit))
                else {
                    return err("ERR value is not an integer or out of range");
                };
                if self.is_string(&holders, now) {
                    return err(
                        "WRONGTYPE Operation against a key holding the wrong kind of value",
                    );
                }
                let now_ms = self.zclock_ms(now);
                let set = self.zset(&holders, Some(now_ms));
                if !set.contains_key(&token) {
                    if limit > 0 && set.len() as i64 >= limit {
                        return (Reply::Int(0), None);
                    }
                    if let Some(other) = key(2) {
                        if !self.zset(&other, Some(now_ms)).is_empty() {
                            return (Reply::Int(0), None);
                        }
                    }
                }
                self.zset(&holders, None).insert(token, now_ms + ttl);
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
                        channel => (Reply::Int(1), channel.map(|_| b"1".to_vec())),
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
                let (Some(lock), Some(fence_key), Some(_channel), Some(grace)) =
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
                (
                    Reply::Array(vec![held, bulk(next)]),
                    pttl.map(|_| b"1".to_vec()),
                )
            }
            // A write to the user's own data, never a lock's command: the
            // driver tests run it against a real Redis.
            Script::FencedSet => err("ERR the simulator holds no user data"),
            // Several mutexes at once: `core/tests/many.rs` scripts its
            // replies, the driver tests run it against a real Redis.
            Script::AcquireMany => err("ERR acquire_many is not simulated"),
            Script::Handoff => self.handoff(now, cmd),
        }
    }

    /// handoff.lua: release ours and, while nobody listens on the channel,
    /// set the successor's token and the next fence; else DEL + PUBLISH.
    /// -> {1, "fence"} | {2, 1} | {2, 0} (PUBLISH refused) | {0, pttl}
    fn handoff(&mut self, now: Micros, cmd: &Plain) -> (Reply, Option<Vec<u8>>) {
        let err = |m: &str| (Reply::Error(m.to_string()), None);
        let key = |i: usize| cmd.keys.get(i).cloned();
        let arg = |i: usize| cmd.args.get(i).cloned();
        let (Some(lock), Some(fence_key), Some(_channel)) = (key(0), key(1), key(2)) else {
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
                Some(b"1".to_vec()),
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
