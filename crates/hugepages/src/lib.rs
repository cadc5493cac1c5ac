//! Large tables on transparent huge pages: the FIB's arrays and a flow cache of millions of
//! flows are reached at random, and on 4 KiB pages nearly every access would miss the TLB as
//! well as the cache (a page walk before the miss even starts, and a software prefetch waits for
//! it). Asked for before the first touch, so that the pages fault in huge where the kernel
//! allows it (`/sys/kernel/mm/transparent_hugepage/enabled` at `madvise` or `always`). Only a
//! hint: where it is refused a table works the same on small pages.

/// Tables smaller than this stay on small pages: a huge page would mostly hold nothing.
pub const MIN_BYTES: usize = 4 << 20;

/// `n` copies of `value`, in memory advised for huge pages before it is written.
pub fn filled<T: Clone>(n: usize, value: T) -> Vec<T> {
    let mut v = Vec::with_capacity(n);
    advise_range(
        v.spare_capacity_mut().as_ptr() as usize,
        n * std::mem::size_of::<T>(),
    );
    v.resize(n, value);
    v
}

/// Asks the kernel to back `s` with huge pages from now on: for memory not yet touched (a
/// zeroed allocation the allocator mapped lazily), or to have it collapsed later.
pub fn advise<T>(s: &[T]) {
    advise_range(s.as_ptr() as usize, std::mem::size_of_val(s));
}

/// Advises the page-aligned part of `len` bytes at `start`, which must lie inside one live
/// allocation of the caller's (both callers above pass a slice or a vector's capacity).
fn advise_range(start: usize, len: usize) {
    if len < MIN_BYTES {
        return;
    }
    let aligned = (start + 4095) & !4095;
    let end = (start + len) & !4095;
    if end > aligned {
        // SAFETY: the range lies inside a live allocation the caller owns (a slice, or a
        // vector's capacity); MADV_HUGEPAGE changes how the kernel backs it, never its contents
        // or validity. A refusal is returned, not raised: ignored.
        unsafe {
            libc::madvise(
                aligned as *mut libc::c_void,
                end - aligned,
                libc::MADV_HUGEPAGE,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filled_holds_n_copies_large_or_small() {
        for n in [0, 1, 1000, (MIN_BYTES / 8) * 3 + 5] {
            let v = filled(n, 7u64);
            assert_eq!(v.len(), n);
            assert!(v.iter().all(|&x| x == 7));
        }
    }

    /// Where this kernel allows huge pages on advice, a large table gets them (with defrag
    /// at `madvise`, the kernel compacts memory to find them for an advised range).
    #[test]
    fn a_large_table_is_backed_by_huge_pages_where_the_kernel_allows() {
        let mode = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled");
        if !mode.is_ok_and(|m| m.contains("[madvise]") || m.contains("[always]")) {
            eprintln!("transparent huge pages are off on this kernel: nothing to check");
            return;
        }
        let v = filled(64 << 20, 1u8);
        // The middle of the table: its unaligned first page is a mapping of its own.
        let huge_kb = anon_huge_kb(v.as_ptr() as usize + v.len() / 2);
        assert!(
            huge_kb.is_some_and(|kb| kb >= 2048),
            "AnonHugePages {huge_kb:?} kB"
        );
        assert!(v.iter().all(|&x| x == 1));
    }

    /// The AnonHugePages figure of the mapping holding `addr`, from /proc/self/smaps.
    fn anon_huge_kb(addr: usize) -> Option<u64> {
        let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
        let mut inside = false;
        for line in smaps.lines() {
            if let Some((range, _)) = line.split_once(' ') {
                if let Some((a, b)) = range.split_once('-') {
                    if let (Ok(a), Ok(b)) =
                        (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16))
                    {
                        inside = (a..b).contains(&addr);
                        continue;
                    }
                }
            }
            if inside {
                if let Some(kb) = line.strip_prefix("AnonHugePages:") {
                    return kb.trim().trim_end_matches(" kB").trim().parse().ok();
                }
            }
        }
        None
    }
}
