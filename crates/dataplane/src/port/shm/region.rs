//! The shared-memory file behind an shm port, mapped into each process that uses it, and the only
//! place in the shm driver that touches raw memory.
//!
//! Layout (native byte order: both ends are on one host):
//!
//! ```text
//! 0      header: magic, version, queues, slots, slot bytes (one page)
//! 4096   ring 0: head (own cache line), tail (own cache line), then `slots` slots
//!        ring 1 ...                            (ring 2q: server -> client, 2q+1: client -> server)
//! slot:  length (u32), 4 bytes unused, then `slot bytes` of frame, padded to 64
//! ```
//!
//! A ring's producer writes slots and then `head` (release); its consumer reads `head`
//! (acquire), copies the frames out and then writes `tail` (release). Slot contents are never
//! borrowed as Rust references: they are copied in and out through raw pointers, because the
//! other process is another program and may not keep its side of the contract. What a peer can do
//! wrong (garbage indices, lengths, bytes) is checked where it is read, by the caller.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

const MAGIC: u64 = u64::from_le_bytes(*b"LRSHM\0\0\x01");
const VERSION: u32 = 1;
const HEADER: usize = 4096;
const RING_HEAD: usize = 128;
const SLOT_HEADER: usize = 8;

/// The shape of a region: how many queues, ring slots and bytes per slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub queues: u32,
    /// A power of two.
    pub slots: u32,
    pub slot_bytes: u32,
}

impl Layout {
    fn stride(&self) -> usize {
        (SLOT_HEADER + self.slot_bytes as usize).next_multiple_of(64)
    }

    fn ring_bytes(&self) -> usize {
        RING_HEAD + self.slots as usize * self.stride()
    }

    /// The file's size.
    pub fn bytes(&self) -> usize {
        HEADER + 2 * self.queues as usize * self.ring_bytes()
    }

    fn check(&self) -> io::Result<()> {
        let ok = (1..=64).contains(&self.queues)
            && self.slots.is_power_of_two()
            && (2..=1 << 16).contains(&self.slots)
            && (64..=65_536).contains(&self.slot_bytes);
        if ok {
            Ok(())
        } else {
            Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("bad shm layout {self:?}"),
            ))
        }
    }
}

/// One mapping of a region's file.
pub struct Region {
    ptr: NonNull<u8>,
    len: usize,
    pub layout: Layout,
    pub path: PathBuf,
    /// The server made the file and removes it when it lets go (unless it handed the file to
    /// its successor: [`Region::disown`]).
    owner: AtomicBool,
}

// SAFETY: the mapping is shared memory owned by this handle; every access to it goes through
// atomics or raw copies (no reference to its bytes outlives a call), so threads may share it.
unsafe impl Send for Region {}
// SAFETY: as above: nothing hands out a plain reference into the mapping.
unsafe impl Sync for Region {}

impl Region {
    /// Makes the file at `path` (replacing one left behind), sized and headed for `layout`,
    /// every ring empty.
    pub fn create(path: &Path, layout: Layout) -> io::Result<Region> {
        layout.check()?;
        let _ = std::fs::remove_file(path);
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(path)?;
        f.set_len(layout.bytes() as u64)?;
        let r = Region::map(&f, path, layout, true)?;
        // The header last, the magic after the rest: an attacher that sees it sees the layout.
        r.u32_at(8).store(VERSION, Ordering::Relaxed);
        r.u32_at(12).store(layout.queues, Ordering::Relaxed);
        r.u32_at(16).store(layout.slots, Ordering::Relaxed);
        r.u32_at(20).store(layout.slot_bytes, Ordering::Relaxed);
        r.u64_at(0).store(MAGIC, Ordering::Release);
        Ok(r)
    }

    /// Maps the file a server made at `path`, its layout read from its header.
    pub fn attach(path: &Path) -> io::Result<Region> {
        Region::attach_as(path, false)
    }

    /// Maps the file another server process made at `path` as its new owner, rings and all (a
    /// hitless restart: the old process [`disown`](Region::disown)s it, the new one adopts it).
    pub fn adopt(path: &Path) -> io::Result<Region> {
        Region::attach_as(path, true)
    }

    /// Leaves the file in place when this mapping goes.
    pub fn disown(&self) {
        self.owner.store(false, Ordering::Relaxed);
    }

    fn attach_as(path: &Path, owner: bool) -> io::Result<Region> {
        let f = OpenOptions::new().read(true).write(true).open(path)?;
        let len = f.metadata()?.len() as usize;
        let bad = |why: &str| io::Error::new(io::ErrorKind::InvalidData, why.to_string());
        if len < HEADER {
            return Err(bad("not an shm port's file (too short)"));
        }
        let head = Region::map(
            &f,
            path,
            Layout {
                queues: 0,
                slots: 0,
                slot_bytes: 0,
            },
            false,
        )?;
        if head.u64_at(0).load(Ordering::Acquire) != MAGIC {
            return Err(bad(
                "not an shm port's file (no magic: its server is not up)",
            ));
        }
        if head.u32_at(8).load(Ordering::Relaxed) != VERSION {
            return Err(bad("an shm port's file of another version"));
        }
        let layout = Layout {
            queues: head.u32_at(12).load(Ordering::Relaxed),
            slots: head.u32_at(16).load(Ordering::Relaxed),
            slot_bytes: head.u32_at(20).load(Ordering::Relaxed),
        };
        layout.check()?;
        if layout.bytes() != len {
            return Err(bad(
                "an shm port's file whose size does not match its header",
            ));
        }
        drop(head);
        Region::map(&f, path, layout, owner)
    }

    fn map(f: &File, path: &Path, layout: Layout, owner: bool) -> io::Result<Region> {
        let len = if layout.queues == 0 {
            HEADER
        } else {
            layout.bytes()
        };
        // An adopter (a new process taking over from a running one) maps every page now, while
        // it prepares, rather than faulting them in one by one under traffic as its workers
        // first go round the rings.
        let populate = if owner && layout.queues > 0 {
            libc::MAP_POPULATE
        } else {
            0
        };
        // SAFETY: a fresh shared mapping at an address the kernel chooses, of a file at least
        // `len` long (created so, or its size checked); the result is checked before use.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | populate,
                f.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Region {
            ptr: NonNull::new(p.cast()).expect("mmap returned null"),
            len,
            layout,
            path: path.to_path_buf(),
            owner: AtomicBool::new(owner),
        })
    }

    fn u64_at(&self, off: usize) -> &AtomicU64 {
        assert!(off.is_multiple_of(8) && off + 8 <= self.len);
        // SAFETY: in bounds and 8-byte aligned (checked; the mapping is page-aligned), valid for
        // as long as &self; shared memory accessed only atomically at this offset.
        unsafe { AtomicU64::from_ptr(self.ptr.as_ptr().add(off).cast()) }
    }

    fn u32_at(&self, off: usize) -> &AtomicU32 {
        assert!(off.is_multiple_of(4) && off + 4 <= self.len);
        // SAFETY: as u64_at, for a 4-byte word.
        unsafe { AtomicU32::from_ptr(self.ptr.as_ptr().add(off).cast()) }
    }

    fn ring_off(&self, ring: usize) -> usize {
        assert!(ring < 2 * self.layout.queues as usize);
        HEADER + ring * self.layout.ring_bytes()
    }

    /// Ring `ring`'s producer index (frames ever written).
    pub fn head(&self, ring: usize) -> &AtomicU64 {
        self.u64_at(self.ring_off(ring))
    }

    /// Ring `ring`'s consumer index (frames ever read).
    pub fn tail(&self, ring: usize) -> &AtomicU64 {
        self.u64_at(self.ring_off(ring) + 64)
    }

    fn slot_off(&self, ring: usize, slot: u32) -> usize {
        let slot = (slot & (self.layout.slots - 1)) as usize;
        self.ring_off(ring) + RING_HEAD + slot * self.layout.stride()
    }

    /// Writes `frame` into slot `slot` of ring `ring` (the caller owns the slot: it is the
    /// ring's producer and the slot is free). False if the frame is longer than a slot.
    pub fn write_slot(&self, ring: usize, slot: u32, frame: &[u8]) -> bool {
        if frame.len() > self.layout.slot_bytes as usize {
            return false;
        }
        let off = self.slot_off(ring, slot);
        self.u32_at(off)
            .store(frame.len() as u32, Ordering::Relaxed);
        // SAFETY: `off + 8 + frame.len()` is within the slot (its length is at most
        // slot_bytes, checked) and so within the mapping; the source is a Rust slice, which
        // cannot overlap the mapping's frame bytes (no reference to them is ever made).
        unsafe {
            std::ptr::copy_nonoverlapping(
                frame.as_ptr(),
                self.ptr.as_ptr().add(off + SLOT_HEADER),
                frame.len(),
            )
        };
        true
    }

    /// The length slot `slot` of ring `ring` says it holds, as written (unchecked: the peer
    /// wrote it).
    pub fn slot_len(&self, ring: usize, slot: u32) -> u32 {
        self.u32_at(self.slot_off(ring, slot))
            .load(Ordering::Relaxed)
    }

    /// Copies the first `dst.len()` bytes of slot `slot` of ring `ring` into `dst`. Panics if
    /// `dst` is longer than a slot (the caller checks the length it read).
    pub fn read_slot(&self, ring: usize, slot: u32, dst: &mut [u8]) {
        assert!(dst.len() <= self.layout.slot_bytes as usize);
        let off = self.slot_off(ring, slot);
        // SAFETY: within the slot (length checked above) and so within the mapping; `dst` is a
        // unique Rust slice that cannot overlap the mapping. A peer writing the slot meanwhile
        // (it must not) garbles only these bytes, which the router parses as untrusted input.
        unsafe {
            std::ptr::copy_nonoverlapping(
                self.ptr.as_ptr().add(off + SLOT_HEADER),
                dst.as_mut_ptr(),
                dst.len(),
            )
        };
    }
}

#[cfg(test)]
impl Region {
    /// Writes a slot's length word as a broken peer might.
    pub fn u32_at_for_test(&self, ring: usize, slot: u32, len: u32) {
        self.u32_at(self.slot_off(ring, slot))
            .store(len, Ordering::Relaxed);
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping this handle made; nothing refers into it after
        // drop (no reference into it is ever handed out).
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
        if self.owner.load(Ordering::Relaxed) && self.layout.queues > 0 {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(name: &str) -> PathBuf {
        std::env::temp_dir().join(format!("lr-shm-{}-{name}", std::process::id()))
    }

    #[test]
    fn an_attacher_reads_the_layout_and_sees_what_the_creator_writes() {
        let p = path("layout");
        let layout = Layout {
            queues: 2,
            slots: 8,
            slot_bytes: 100,
        };
        let a = Region::create(&p, layout).unwrap();
        let b = Region::attach(&p).unwrap();
        assert_eq!(b.layout, layout);
        assert!(a.write_slot(3, 9, b"hello"));
        assert!(!a.write_slot(3, 9, &[0; 101]), "longer than a slot");
        a.head(3).store(10, Ordering::Release);
        assert_eq!(b.head(3).load(Ordering::Acquire), 10);
        assert_eq!(b.slot_len(3, 1), 5, "slot 9 of 8 is slot 1");
        let mut got = [0u8; 5];
        b.read_slot(3, 1, &mut got);
        assert_eq!(&got, b"hello");
        drop(b);
        drop(a);
        assert!(!p.exists(), "the creator removes its file");
    }

    #[test]
    fn files_that_are_not_a_ports_are_refused() {
        let p = path("junk");
        std::fs::write(&p, vec![7u8; 8192]).unwrap();
        let e = Region::attach(&p).err().unwrap();
        assert!(e.to_string().contains("no magic"), "{e}");
        std::fs::write(&p, b"short").unwrap();
        assert!(Region::attach(&p).is_err());
        std::fs::remove_file(&p).unwrap();
        assert!(Region::attach(&p).is_err(), "missing");
        let bad = Layout {
            queues: 1,
            slots: 6,
            slot_bytes: 100,
        };
        assert!(Region::create(&p, bad).is_err(), "slots not a power of two");
    }
}
