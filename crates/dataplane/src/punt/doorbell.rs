//! The punt thread's doorbell: a worker that hands the control plane a frame while its thread
//! sleeps wakes it, so a punted frame (an IGMP join, an ARP reply, a BGP segment) waits for the
//! thread's next pass, not for its poll timeout.
//!
//! An `eventfd` the thread polls beside its TAPs, and a flag the thread sets before it sleeps.
//! A worker writes the eventfd only when it finds the flag set, and clears the flag as it does,
//! so a burst of punts costs one write, and a busy thread (which never sets the flag) none: a
//! worker pays a fence and a load per punted frame, and punts are policed to a few thousand
//! per second.
//!
//! No wake-up is lost: the thread sets the flag, fences, then looks at the rings once more
//! before it sleeps ([`Doorbell::sleep_unless`]); a worker pushes, fences, then reads the flag.
//! Of any push and any sleep, either the thread sees the frame or the worker sees the flag.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{fence, AtomicBool, Ordering};

pub struct Doorbell {
    fd: OwnedFd,
    asleep: AtomicBool,
}

impl Doorbell {
    pub fn new() -> io::Result<Doorbell> {
        // SAFETY: eventfd takes no pointers; a nonnegative result is a new descriptor this
        // process owns, which OwnedFd takes over (and closes once).
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: as above: `fd` is open and owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Doorbell {
            fd,
            asleep: AtomicBool::new(false),
        })
    }

    /// Worker side, after a frame is on its ring: wakes the thread if it sleeps.
    #[inline]
    pub fn ring(&self) {
        fence(Ordering::SeqCst);
        if self.asleep.load(Ordering::Relaxed) && self.asleep.swap(false, Ordering::AcqRel) {
            let one = 1u64.to_ne_bytes();
            // SAFETY: writes 8 bytes from a live local array to a descriptor this struct owns.
            // A failure can only be EAGAIN (the counter is at its maximum: the thread is
            // already due to wake), so it is ignored.
            unsafe { libc::write(self.fd.as_raw_fd(), one.as_ptr().cast(), one.len()) };
        }
    }

    /// Thread side: announces that the thread is going to sleep, then asks `pending` whether
    /// work came meanwhile. True: sleep (poll [`Doorbell::fd`] with the rest); the caller calls
    /// [`Doorbell::woke`] after. False: work is pending, the flag is cleared, do not sleep.
    pub fn sleep_unless(&self, pending: impl FnOnce() -> bool) -> bool {
        self.asleep.store(true, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        if pending() {
            self.asleep.store(false, Ordering::Relaxed);
            return false;
        }
        true
    }

    /// Thread side, after the sleep: clears the flag and the eventfd's count.
    pub fn woke(&self) {
        self.asleep.store(false, Ordering::Relaxed);
        let mut v = [0u8; 8];
        // SAFETY: reads at most 8 bytes into a live local array from a descriptor this struct
        // owns; nonblocking, so an unrung bell returns EAGAIN at once (ignored).
        unsafe { libc::read(self.fd.as_raw_fd(), v.as_mut_ptr().cast(), v.len()) };
    }

    /// The descriptor to poll for reading.
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn readable(d: &Doorbell) -> bool {
        let mut p = libc::pollfd {
            fd: d.fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one live pollfd.
        unsafe { libc::poll(&mut p, 1, 0) == 1 }
    }

    #[test]
    fn rings_only_a_sleeping_thread_and_once_per_sleep() {
        let d = Doorbell::new().unwrap();
        d.ring();
        assert!(!readable(&d), "an awake thread is not rung");
        assert!(d.sleep_unless(|| false));
        d.ring();
        assert!(readable(&d), "a sleeping thread is rung");
        assert!(
            !d.asleep.load(Ordering::Relaxed),
            "the first ring clears the flag"
        );
        d.ring();
        d.woke();
        assert!(
            !readable(&d),
            "woke() empties the count (one write for both rings)"
        );
    }

    #[test]
    fn pending_work_cancels_the_sleep() {
        let d = Doorbell::new().unwrap();
        assert!(!d.sleep_unless(|| true));
        d.ring();
        assert!(!readable(&d));
    }

    #[test]
    fn a_push_racing_the_sleep_is_never_lost() {
        use std::sync::atomic::AtomicU64;
        use std::sync::Arc;
        // A worker pushes (a counter stands for the ring) and rings; the thread sleeps unless it
        // sees the push. A thread that did not see the push must be rung: a lost wake-up would
        // leave it in poll for the whole second.
        let d = Arc::new(Doorbell::new().unwrap());
        let pushed = Arc::new(AtomicU64::new(0));
        for round in 1..=2_000u64 {
            let (d2, p2) = (d.clone(), pushed.clone());
            let w = std::thread::spawn(move || {
                p2.store(round, Ordering::Relaxed);
                d2.ring();
            });
            if d.sleep_unless(|| pushed.load(Ordering::Relaxed) == round) {
                let mut p = libc::pollfd {
                    fd: d.fd(),
                    events: libc::POLLIN,
                    revents: 0,
                };
                // SAFETY: one live pollfd.
                let n = unsafe { libc::poll(&mut p, 1, 1_000) };
                assert_eq!(n, 1, "round {round}: slept through a push");
                d.woke();
            }
            w.join().unwrap();
            d.woke();
        }
    }
}
