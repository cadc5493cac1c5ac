//! The fast LPM against the reference on random tables and random update sequences, for IPv4 and
//! IPv6, with the production direct strides and with small ones (so that short prefixes, slot
//! defaults and deep chains are all exercised), and with readers running while updates publish.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use fib::{EpochDomain, Key, LpmConfig, LpmWriter, ReferenceLpm, NO_ROUTE};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op<K> {
    Add(K, u8, u32),
    Del(K, u8),
    Publish,
}

/// Prefixes drawn from a few clusters so that they nest and overlap, with every length possible.
fn prefix<K: Key + Arbitrary>() -> impl Strategy<Value = (K, u8)> {
    let bits = K::BITS;
    (
        0u32..4,
        any::<K>(),
        prop_oneof![0..=bits, (bits / 2)..=bits, Just(bits), Just(0)],
    )
        .prop_map(move |(cluster, k, len)| {
            // Clusters share their top 12 bits so routes pile up in the same slots.
            let k = k.with_bits(0, 12, 0x5a0 + cluster);
            (k.masked(len as u8), len as u8)
        })
}

fn ops<K: Key + Arbitrary>() -> impl Strategy<Value = Vec<Op<K>>> {
    let op = prop_oneof![
        6 => (prefix::<K>(), 1u32..50).prop_map(|((k, l), nh)| Op::Add(k, l, nh)),
        2 => prefix::<K>().prop_map(|(k, l)| Op::Del(k, l)),
        1 => Just(Op::Publish),
    ];
    proptest::collection::vec(op, 1..300)
}

/// Probe addresses: random ones, and for every prefix touched its first, last and a middle address
/// and the addresses just outside it.
fn probes<K: Key>(ops: &[Op<K>], random: &[K]) -> Vec<K> {
    let mut v = random.to_vec();
    for op in ops {
        let (k, l) = match *op {
            Op::Add(k, l, _) | Op::Del(k, l) => (k, l),
            Op::Publish => continue,
        };
        v.push(k);
        if (l as u32) < K::BITS {
            let host = K::BITS - l as u32;
            let n = host.min(24);
            v.push(k.with_bits(K::BITS - n, n, (1u32 << n) - 1));
            v.push(k.with_bits(K::BITS - n, n, 1 << (n - 1)));
        }
        if l > 0 {
            // Flip the last prefix bit: the address next door.
            let b = k.bits(l as u32 - 1, 1);
            v.push(k.with_bits(l as u32 - 1, 1, b ^ 1));
        }
    }
    v
}

fn run<K: Key>(direct_bits: u32, ops: &[Op<K>], random: &[K]) -> Result<(), TestCaseError> {
    let epoch = EpochDomain::new();
    let cfg = LpmConfig {
        direct_bits,
        max_routes: 10_000,
    };
    let mut fast = LpmWriter::<K>::new(cfg, epoch);
    let reader = fast.reader();
    let mut reference = ReferenceLpm::<K>::default();
    let probes = probes(ops, random);
    let check = |fast: &LpmWriter<K>, reference: &ReferenceLpm<K>| -> Result<(), TestCaseError> {
        // The batch (AVX-512 vectors for IPv4 where the CPU has them) and the portable batch.
        let mut batch = vec![0u32; probes.len()];
        fast.table().lookup_batch(&probes, &mut batch);
        let mut scalar = vec![0u32; probes.len()];
        fast.table().lookup_batch_scalar(&probes, &mut scalar);
        for (i, &a) in probes.iter().enumerate() {
            let want = reference.lookup(a);
            prop_assert_eq!(fast.table().lookup(a), want, "lookup {:?}", a);
            prop_assert_eq!(batch[i], want, "batched lookup {:?}", a);
            prop_assert_eq!(scalar[i], want, "portable batched lookup {:?}", a);
        }
        Ok(())
    };
    for op in ops {
        match *op {
            Op::Add(k, l, nh) => {
                let old = fast.insert(k, l, nh).unwrap();
                let r_old = reference.remove(k, l);
                reference.insert(k, l, nh);
                prop_assert_eq!(old, r_old);
            }
            Op::Del(k, l) => {
                prop_assert_eq!(fast.remove(k, l), reference.remove(k, l));
            }
            Op::Publish => {
                fast.publish().unwrap();
                reader.quiescent();
                check(&fast, &reference)?;
            }
        }
        prop_assert_eq!(fast.len(), reference.len());
    }
    fast.publish().unwrap();
    check(&fast, &reference)?;
    // Everything removed leaves an empty table that still answers "no route" everywhere.
    let all: Vec<_> = fast.routes().collect();
    for r in all {
        fast.remove(r.prefix, r.len).unwrap();
    }
    fast.publish().unwrap();
    reader.quiescent();
    fast.reclaim();
    for &a in &probes {
        prop_assert_eq!(fast.table().lookup(a), NO_ROUTE);
    }
    prop_assert_eq!(fast.stats().node_bytes_live, 0);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn ipv4_matches_reference(ops in ops::<u32>(), random in proptest::collection::vec(any::<u32>(), 64)) {
        run(18, &ops, &random)?;
    }

    #[test]
    fn ipv4_16_bit_direct_matches_reference(ops in ops::<u32>(), random in proptest::collection::vec(any::<u32>(), 64)) {
        run(16, &ops, &random)?;
    }

    #[test]
    fn ipv4_small_direct_matches_reference(ops in ops::<u32>(), random in proptest::collection::vec(any::<u32>(), 64)) {
        run(8, &ops, &random)?;
    }

    #[test]
    fn ipv6_matches_reference(ops in ops::<u128>(), random in proptest::collection::vec(any::<u128>(), 64)) {
        run(16, &ops, &random)?;
    }
}

// The production IPv6 stride is 24 bits (a 64 MiB direct table); a few cases are enough there.
proptest! {
    #![proptest_config(ProptestConfig { cases: 8, ..ProptestConfig::default() })]
    #[test]
    fn ipv6_production_stride_matches_reference(ops in ops::<u128>(), random in proptest::collection::vec(any::<u128>(), 64)) {
        run(24, &ops, &random)?;
    }
}

/// Readers look up while the writer flips the table between two route sets, thousands of times, so
/// freed subtrees are reused under the readers' feet. Every answer must be one the address has in
/// set A or in set B: a torn subtree or memory reused too early would give anything else.
#[test]
fn lookups_during_publishing_see_old_or_new_never_torn() {
    let epoch = EpochDomain::new();
    let mut w = LpmWriter::<u32>::new(LpmConfig::v4(100_000), epoch.clone());
    let mut rnd = xorshift(0x9E37_79B9_7F4A_7C15);
    // Set A and set B: the same prefixes with different next hops, plus prefixes only in one set.
    let mut common = Vec::new();
    let mut seen = std::collections::HashSet::new();
    while common.len() < 3000 {
        let len = [16u8, 20, 24, 26, 28, 30, 32][(rnd() % 7) as usize];
        let p = ((rnd() as u32) & 0x00FF_FFFF | 0x0A00_0000).masked(len);
        if seen.insert((p, len)) {
            common.push((p, len));
        }
    }
    let mut ref_a = ReferenceLpm::default();
    let mut ref_b = ReferenceLpm::default();
    for (i, &(p, l)) in common.iter().enumerate() {
        ref_a.insert(p, l, 1 + (i as u32 % 100));
        if i % 3 != 0 {
            ref_b.insert(p, l, 1000 + (i as u32 % 100));
        }
    }
    let probes: Vec<u32> = (0..20_000)
        .map(|i| {
            if i % 2 == 0 {
                let (p, l) = common[(rnd() % common.len() as u64) as usize];
                p | (rnd() as u32).checked_shr(l as u32).unwrap_or(0)
            } else {
                0x0A00_0000 | (rnd() as u32 & 0x00FF_FFFF)
            }
        })
        .collect();
    let allowed: Vec<(u32, u32)> = probes
        .iter()
        .map(|&a| (ref_a.lookup(a), ref_b.lookup(a)))
        .collect();
    let load = |w: &mut LpmWriter<u32>, b: bool| {
        for (i, &(p, l)) in common.iter().enumerate() {
            if b && i % 3 == 0 {
                w.remove(p, l);
            } else {
                let nh = if b { 1000 } else { 1 } + (i as u32 % 100);
                w.insert(p, l, nh).unwrap();
            }
        }
        w.publish().unwrap();
    };
    load(&mut w, false);
    let stop = Arc::new(AtomicBool::new(false));
    let probes = Arc::new(probes);
    let allowed = Arc::new(allowed);
    let readers: Vec<_> = (0..2)
        .map(|t| {
            let r = w.reader();
            let (stop, probes, allowed) = (stop.clone(), probes.clone(), allowed.clone());
            std::thread::spawn(move || {
                let mut out = vec![0u32; 256];
                let mut checked = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    for (chunk_i, chunk) in probes.chunks(256).enumerate() {
                        r.quiescent();
                        if t == 0 && chunk_i % 2 == 0 {
                            r.table().lookup_batch(chunk, &mut out);
                        } else if t == 0 {
                            r.table().lookup_batch_scalar(chunk, &mut out);
                        } else {
                            for (o, &a) in out.iter_mut().zip(chunk) {
                                *o = r.lookup(a);
                            }
                        }
                        for (j, &got) in out[..chunk.len()].iter().enumerate() {
                            let (a, b) = allowed[chunk_i * 256 + j];
                            assert!(
                                got == a || got == b,
                                "torn read: got {got}, want {a} or {b}"
                            );
                        }
                        checked += chunk.len() as u64;
                    }
                }
                r.offline();
                checked
            })
        })
        .collect();
    for round in 0..200 {
        load(&mut w, round % 2 == 0);
        // Pace the writer to the readers: a reader starved of a core (two vCPUs, a loaded CI
        // machine) would otherwise hold every retired subtree in limbo and the arena would grow
        // for want of a quiescent point, not for want of reuse. Readers keep looking up
        // throughout; the next round then reuses what this one retired while they read.
        let retired_at = epoch.current();
        while epoch.safe_epoch() < retired_at {
            std::thread::yield_now();
        }
    }
    stop.store(true, Ordering::Relaxed);
    let checked: u64 = readers.into_iter().map(|h| h.join().unwrap()).sum();
    assert!(checked > 0);
    // Freed subtrees were reused under the readers (the point of the test): 200 rounds without
    // reuse would have left the arena about 100 times the live size; with reuse it holds the two
    // alternating versions plus one round in limbo.
    let st = w.stats();
    assert!(
        st.node_bytes_peak < 8 * st.node_bytes_live,
        "arena kept growing: {st:?}"
    );
}

/// The seed-shaped tables (Internet-like and XR-6's /19 /24 /29 mix at both IPv4 direct widths,
/// an Internet-like IPv6 table at two): the batch answers as the single lookup does for random
/// addresses and addresses inside the routes. Their nodes span up to several lines, which the small random tables above rarely
/// build. Where the CPU has AVX-512 the batch is the vector walk, and the test says so.
#[test]
fn seed_tables_batch_matches_single_lookups() {
    use fib::gen::{self, Profile, Spec};
    #[cfg(target_arch = "x86_64")]
    let vector_cpu =
        is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512vpopcntdq");
    #[cfg(not(target_arch = "x86_64"))]
    let vector_cpu = false;
    let mut rnd = xorshift(0x2545_F491_4F6C_DD1D);
    for (profile, scale) in [(Profile::Internet, 0.1), (Profile::Xr6, 0.2)] {
        let routes = gen::v4(&Spec {
            profile,
            seed: 3,
            scale,
        });
        for direct_bits in [16, 18] {
            let w = table_of(&routes, direct_bits);
            assert_eq!(w.table().vector_lookups(), vector_cpu);
            // Odd lengths leave a tail shorter than a vector group.
            let probes: Vec<u32> = (0..200_003)
                .map(|i| {
                    let r = rnd();
                    if i % 2 == 0 {
                        r as u32
                    } else {
                        let (p, l) = routes[(r >> 32) as usize % routes.len()];
                        p | (r as u32).checked_shr(l as u32).unwrap_or(0)
                    }
                })
                .collect();
            let mut batch = vec![0u32; probes.len()];
            w.table().lookup_batch(&probes, &mut batch);
            let mut hits = 0;
            for (&a, &got) in probes.iter().zip(&batch) {
                assert_eq!(
                    got,
                    w.table().lookup(a),
                    "{profile:?} /{direct_bits} {a:#x}"
                );
                hits += (got != NO_ROUTE) as usize;
            }
            assert!(hits > probes.len() / 2, "{profile:?}: {hits} hits");
        }
    }
    // IPv6: an Internet-shaped table at the production direct width (24) and at 16; both end on
    // a byte, which the vector walk needs.
    let routes = gen::v6(&Spec {
        profile: Profile::Internet,
        seed: 3,
        scale: 0.1,
    });
    for direct_bits in [16, 24] {
        let w = table_of(&routes, direct_bits);
        assert_eq!(w.table().vector_lookups(), vector_cpu);
        let probes: Vec<u128> = (0..100_003)
            .map(|i| {
                let r = (rnd() as u128) << 64 | rnd() as u128;
                if i % 2 == 0 {
                    r >> 3 | 1 << 125
                } else {
                    let (p, l) = routes[(r >> 64) as usize % routes.len()];
                    p | r.checked_shr(l as u32).unwrap_or(0)
                }
            })
            .collect();
        let mut batch = vec![0u32; probes.len()];
        w.table().lookup_batch(&probes, &mut batch);
        let mut hits = 0;
        for (&a, &got) in probes.iter().zip(&batch) {
            assert_eq!(got, w.table().lookup(a), "IPv6 /{direct_bits} {a:#x}");
            hits += (got != NO_ROUTE) as usize;
        }
        assert!(hits > probes.len() / 3, "IPv6: {hits} hits");
    }
    eprintln!("vector walk tested: {vector_cpu}");
}

/// A published table of `routes` (next hops spread over 40,000 ids) at a direct width.
fn table_of<K: Key>(routes: &[(K, u8)], direct_bits: u32) -> LpmWriter<K> {
    let cfg = LpmConfig {
        direct_bits,
        max_routes: routes.len(),
    };
    let mut w = LpmWriter::<K>::new(cfg, EpochDomain::new());
    for (i, &(p, l)) in routes.iter().enumerate() {
        w.insert(p, l, 1 + (i as u32 * 7919) % 40_000).unwrap();
    }
    w.publish().unwrap();
    w
}

/// A small deterministic generator (xorshift64) for the tests' addresses.
fn xorshift(mut seed: u64) -> impl FnMut() -> u64 {
    move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    }
}
