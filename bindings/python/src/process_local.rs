//! [`ProcessLocal`]: a value that belongs to the process that made it.
//!
//! After `os.fork()` the child has a copy of the parent's memory but none of
//! its threads: a tokio runtime, the connections and leases driven by it are
//! dead there. Using such a value would hang; dropping it would try to join
//! or wake threads that do not exist. So the child forgets (leaks) the
//! parent's value and makes its own on first use. This type is that rule,
//! once: a value tagged with its pid, handed out only in that process and
//! dropped only there.
//!
//! It takes no lock of its own; where one is shared, the caller's lock
//! guards it (see runtime.rs on why those never cross a fork held). The log
//! queue (logging.rs) is per process too, but it must not lock at all and
//! never replaces a value (each process takes a fresh static slot), so it
//! keeps its own lock-free scheme.

#[derive(Debug)]
pub struct ProcessLocal<T> {
    pid: u32,
    /// `Some` until [`ProcessLocal::into_inner`] or drop takes it.
    value: Option<T>,
}

impl<T> ProcessLocal<T> {
    /// `value`, owned by this process.
    pub fn new(value: T) -> Self {
        ProcessLocal {
            pid: std::process::id(),
            value: Some(value),
        }
    }

    /// Whether this process made the value.
    pub fn is_ours(&self) -> bool {
        self.pid == std::process::id()
    }

    /// The value, in the process that made it; `None` in a forked child.
    pub fn get(&self) -> Option<&T> {
        self.value.as_ref().filter(|_| self.is_ours())
    }

    /// The value in whichever process: only for reads of plain memory
    /// (fields, atomics) that are as valid in the child's copy. Never to
    /// send, spawn, wait or drop through.
    pub fn inherited(&self) -> &T {
        self.value
            .as_ref()
            .expect("a ProcessLocal holds its value until consumed")
    }

    /// This process's value: in a forked child the parent's is forgotten and
    /// `make()` builds a new one.
    pub fn renew(&mut self, make: impl FnOnce() -> T) -> &mut T {
        if !self.is_ours() {
            // Assigning drops the old one, which forgets the parent's value.
            *self = ProcessLocal::new(make());
        }
        self.value
            .as_mut()
            .expect("a ProcessLocal holds its value until consumed")
    }

    /// The value, in the process that made it; in a forked child it is
    /// forgotten and `None` returned.
    pub fn into_inner(mut self) -> Option<T> {
        if self.is_ours() {
            self.value.take()
        } else {
            None // dropped below: forgotten
        }
    }
}

impl<T> Drop for ProcessLocal<T> {
    fn drop(&mut self) {
        if !self.is_ours() {
            // The parent's: never run its destructor here.
            std::mem::forget(self.value.take());
        }
    }
}
