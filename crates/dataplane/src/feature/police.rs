//! Policers: single-rate (RFC 2697) and two-rate (RFC 2698) three-colour markers.
//!
//! A [`Policer`] meters the packets of one policy (an interface, a class) and returns the action
//! configured for the colour each packet gets. It is shared by every worker that carries the
//! policy's traffic, behind an `Arc`; usually one worker owns an interface's queues, so the lock
//! is almost never contended, and a whole vector is policed under one acquisition through
//! [`Policer::lock`].
//!
//! Arithmetic is integer-only and exact: token buckets hold credit in units of 10⁻⁹ bit, so
//! `rate (bit/s) × elapsed (ns)` is added without a division and without losing the sub-byte
//! remainder between packets. A bucket of `u32::MAX` bytes is about 3.4·10¹⁹ units, more than a
//! `u64`, so credit is a `u128`; on x86-64 its adds and compares are two instructions and
//! `u64 × u64 → u128` is one `mul`.
//!
//! Time comes from the caller: nanoseconds of one monotonic clock shared by the workers. Two
//! workers may read it in one order and take the lock in the other, so a time earlier than the
//! last one seen counts as no time passed: tokens are never minted by a clock going backwards.
//!
//! Measured cost (release, one thread, uncontended; 2.8 GHz Xeon VM shared with other builds; see
//! `bench_police_ns_per_packet`): 2.8 ns a packet policing vectors of 256 under one lock, 21 ns
//! a packet when each call takes the lock (paying the compare-and-swap and the copy of the state
//! in and out for every packet), so the data plane should police a vector through [`Policer::lock`].

use std::hint;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Credit units per byte: 8 bits × 10⁹, so that credit earned is `rate_bps × ns` exactly.
const UNITS_PER_BYTE: u128 = 8_000_000_000;

/// The colour of a packet, as the RFCs name them (conform, exceed, violate).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Color {
    Green,
    Yellow,
    Red,
}

/// The meter and its parameters. Rates are bits per second of whatever byte count the caller
/// passes (L3 bytes in the data plane); bursts are bytes.
///
/// RFC 2697 asks that at least one of CBS and EBS be nonzero and RFC 2698 that PIR ≥ CIR; and a
/// burst smaller than a packet never lets that packet through. None of these is enforced here:
/// the configuration layer validates, and the meter does what the numbers say.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Meter {
    /// Single rate: committed bucket `cbs` and excess bucket `ebs`, both filled at `cir_bps`
    /// (the excess bucket only by what overflows the committed one).
    SrTcm { cir_bps: u64, cbs: u32, ebs: u32 },
    /// Two rates: committed bucket `cbs` filled at `cir_bps`, peak bucket `pbs` at `pir_bps`.
    TrTcm {
        cir_bps: u64,
        pir_bps: u64,
        cbs: u32,
        pbs: u32,
    },
}

/// What to do with a packet of one colour.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Transmit,
    /// Transmit with this DSCP (see [`super::mark`]).
    SetDscpTransmit(u8),
    /// Transmit with this 802.1p priority on the outer tag (see [`super::mark`]).
    SetPcpTransmit(u8),
    Drop,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PolicerConfig {
    pub meter: Meter,
    /// Whether the colour the packet arrives with (from a previous meter or a classifier) is
    /// taken into account; colour-blind is colour-aware with every packet pre-coloured green.
    pub color_aware: bool,
    /// The action for green packets.
    pub conform: Verdict,
    /// The action for yellow packets.
    pub exceed: Verdict,
    /// The action for red packets.
    pub violate: Verdict,
}

/// Packets and bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub packets: u64,
    pub bytes: u64,
}

/// What a policer has counted since it was made: by colour, and what its verdicts dropped (a
/// subset of the colours', whichever colours have [`Verdict::Drop`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PolicerStats {
    pub conformed: Counts,
    pub exceeded: Counts,
    pub violated: Counts,
    pub dropped: Counts,
}

/// The meter's parameters in credit units, worked out once.
#[derive(Clone, Copy, Debug)]
struct Params {
    two_rate: bool,
    aware: bool,
    /// CIR: fills the committed bucket (and, in srTCM, the excess one through it).
    c_rate: u64,
    /// PIR (trTCM only).
    p_rate: u64,
    c_max: u128,
    /// EBS (srTCM) or PBS (trTCM).
    e_max: u128,
}

/// The mutable state: the two buckets, the last time seen and the counters. The lock holder
/// works on a copy of it (see [`PolicerGuard`]).
#[derive(Clone, Copy, Debug, Default)]
struct State {
    /// Tc.
    c: u128,
    /// Te (srTCM) or Tp (trTCM).
    e: u128,
    last_ns: u64,
    packets: [u64; 3],
    bytes: [u64; 3],
    drop_packets: u64,
    drop_bytes: u64,
}

// Word indices of `State` in `Shared::words`.
const C_LO: usize = 0;
const C_HI: usize = 1;
const E_LO: usize = 2;
const E_HI: usize = 3;
const LAST: usize = 4;
const PACKETS: usize = 5;
const BYTES: usize = 8;
const DROP_PACKETS: usize = 11;
const DROP_BYTES: usize = 12;
const WORDS: usize = 13;

/// The lock and the state it guards, on their own cache lines so that a policer's traffic never
/// shares a line with a neighbour's.
///
/// The state is kept in atomics only so that it can live behind `&self` without `unsafe`: the
/// lock's acquire/release orders every access, so the words themselves are read and written
/// relaxed (plain moves on x86-64). The counters are also read without the lock by `stats`, which
/// is why they are single words.
#[derive(Debug)]
#[repr(C, align(64))]
struct Shared {
    locked: AtomicBool,
    words: [AtomicU64; WORDS],
}

/// A single- or two-rate three-colour marker, shared by all workers (it is `Send + Sync`).
#[derive(Debug)]
pub struct Policer {
    shared: Shared,
    params: Params,
    cfg: PolicerConfig,
}

const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<Policer>();
};

impl Policer {
    /// A policer with both buckets full, as both RFCs start them.
    pub fn new(cfg: PolicerConfig) -> Policer {
        let (two_rate, c_rate, p_rate, cbs, ebs) = match cfg.meter {
            Meter::SrTcm { cir_bps, cbs, ebs } => (false, cir_bps, 0, cbs, ebs),
            Meter::TrTcm {
                cir_bps,
                pir_bps,
                cbs,
                pbs,
            } => (true, cir_bps, pir_bps, cbs, pbs),
        };
        let params = Params {
            two_rate,
            aware: cfg.color_aware,
            c_rate,
            p_rate,
            c_max: u128::from(cbs) * UNITS_PER_BYTE,
            e_max: u128::from(ebs) * UNITS_PER_BYTE,
        };
        let p = Policer {
            shared: Shared {
                locked: AtomicBool::new(false),
                words: Default::default(),
            },
            params,
            cfg,
        };
        let full = State {
            c: params.c_max,
            e: params.e_max,
            ..State::default()
        };
        p.store(&full);
        p
    }

    pub fn config(&self) -> &PolicerConfig {
        &self.cfg
    }

    /// Takes the lock, for policing several packets (a vector) under one acquisition. Hold it
    /// only for the loop: other workers policing through this policer spin, then yield, until it
    /// is dropped.
    #[inline]
    pub fn lock(&self) -> PolicerGuard<'_> {
        self.acquire();
        PolicerGuard {
            p: self,
            s: self.load(),
        }
    }

    /// Colours one packet of `bytes` arriving at `now_ns` and takes its tokens, without counting
    /// it. `pre` is the colour it arrives with, ignored when the policer is colour-blind.
    #[inline]
    pub fn color(&self, now_ns: u64, bytes: u32, pre: Color) -> Color {
        self.lock().color(now_ns, bytes, pre)
    }

    /// Colours and counts one packet and returns its colour and the configured action for it.
    #[inline]
    pub fn police(&self, now_ns: u64, bytes: u32, pre: Color) -> (Color, Verdict) {
        self.lock().police(now_ns, bytes, pre)
    }

    /// The counters, read without the lock so that the management plane never holds up a worker:
    /// each value is exact, but two values may be from instants one packet apart.
    pub fn stats(&self) -> PolicerStats {
        let w = |i: usize| self.shared.words[i].load(Ordering::Relaxed);
        let counts = |c: usize| Counts {
            packets: w(PACKETS + c),
            bytes: w(BYTES + c),
        };
        PolicerStats {
            conformed: counts(Color::Green as usize),
            exceeded: counts(Color::Yellow as usize),
            violated: counts(Color::Red as usize),
            dropped: Counts {
                packets: w(DROP_PACKETS),
                bytes: w(DROP_BYTES),
            },
        }
    }

    #[inline]
    fn acquire(&self) {
        let l = &self.shared.locked;
        while l
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            // Wait with plain loads, so the line stays shared until the holder releases it. With
            // more workers than cores the holder may have been preempted: spinning then only
            // delays it, so give the core away after a short while.
            let mut spins = 0u32;
            while l.load(Ordering::Relaxed) {
                if spins < 100 {
                    spins += 1;
                    hint::spin_loop();
                } else {
                    std::thread::yield_now();
                }
            }
        }
    }

    #[inline]
    fn load(&self) -> State {
        let w = |i: usize| self.shared.words[i].load(Ordering::Relaxed);
        let wide = |lo: usize, hi: usize| u128::from(w(lo)) | u128::from(w(hi)) << 64;
        State {
            c: wide(C_LO, C_HI),
            e: wide(E_LO, E_HI),
            last_ns: w(LAST),
            packets: [w(PACKETS), w(PACKETS + 1), w(PACKETS + 2)],
            bytes: [w(BYTES), w(BYTES + 1), w(BYTES + 2)],
            drop_packets: w(DROP_PACKETS),
            drop_bytes: w(DROP_BYTES),
        }
    }

    #[inline]
    fn store(&self, s: &State) {
        let w = |i: usize, v: u64| self.shared.words[i].store(v, Ordering::Relaxed);
        w(C_LO, s.c as u64);
        w(C_HI, (s.c >> 64) as u64);
        w(E_LO, s.e as u64);
        w(E_HI, (s.e >> 64) as u64);
        w(LAST, s.last_ns);
        for c in 0..3 {
            w(PACKETS + c, s.packets[c]);
            w(BYTES + c, s.bytes[c]);
        }
        w(DROP_PACKETS, s.drop_packets);
        w(DROP_BYTES, s.drop_bytes);
    }
}

/// The policer's lock, held: police a vector through it, then drop it. The state is worked on in
/// a local copy and written back when the guard goes, so the per-packet work touches no shared
/// memory.
#[derive(Debug)]
pub struct PolicerGuard<'a> {
    p: &'a Policer,
    s: State,
}

impl PolicerGuard<'_> {
    /// As [`Policer::color`].
    #[inline]
    pub fn color(&mut self, now_ns: u64, bytes: u32, pre: Color) -> Color {
        meter(&self.p.params, &mut self.s, now_ns, bytes, pre)
    }

    /// As [`Policer::police`].
    #[inline]
    pub fn police(&mut self, now_ns: u64, bytes: u32, pre: Color) -> (Color, Verdict) {
        let color = meter(&self.p.params, &mut self.s, now_ns, bytes, pre);
        let cfg = &self.p.cfg;
        let verdict = match color {
            Color::Green => cfg.conform,
            Color::Yellow => cfg.exceed,
            Color::Red => cfg.violate,
        };
        let s = &mut self.s;
        s.packets[color as usize] += 1;
        s.bytes[color as usize] += u64::from(bytes);
        if verdict == Verdict::Drop {
            s.drop_packets += 1;
            s.drop_bytes += u64::from(bytes);
        }
        (color, verdict)
    }
}

impl Drop for PolicerGuard<'_> {
    #[inline]
    fn drop(&mut self) {
        self.p.store(&self.s);
        self.p.shared.locked.store(false, Ordering::Release);
    }
}

/// Adds the credit earned since the last packet, then colours this one and takes its tokens:
/// RFC 2697 section 3 or RFC 2698 section 3, colour-blind being colour-aware with `pre` green.
#[inline(always)]
fn meter(p: &Params, s: &mut State, now_ns: u64, bytes: u32, pre: Color) -> Color {
    // A time before the last one seen (another worker's packet got the lock first) is no time.
    let dt = now_ns.saturating_sub(s.last_ns);
    if dt > 0 {
        s.last_ns = now_ns;
        // rate × dt < 2¹²⁸ for any u64 inputs; only the addition can overflow (after a gap of
        // centuries at 100 Gb/s), and the buckets are full long before that.
        let earned = u128::from(p.c_rate) * u128::from(dt);
        let c = s.c.saturating_add(earned);
        if p.two_rate {
            s.c = c.min(p.c_max);
            let earned = u128::from(p.p_rate) * u128::from(dt);
            s.e = s.e.saturating_add(earned).min(p.e_max);
        } else if c > p.c_max {
            // srTCM: what overflows Tc goes to Te (RFC 2697: "else if Te < EBS, Te += 1").
            s.e = s.e.saturating_add(c - p.c_max).min(p.e_max);
            s.c = p.c_max;
        } else {
            s.c = c;
        }
    }
    let pre = if p.aware { pre } else { Color::Green };
    let b = u128::from(bytes) * UNITS_PER_BYTE;
    if p.two_rate {
        if pre == Color::Red || s.e < b {
            Color::Red
        } else if pre == Color::Yellow || s.c < b {
            s.e -= b;
            Color::Yellow
        } else {
            s.e -= b;
            s.c -= b;
            Color::Green
        }
    } else if pre == Color::Green && s.c >= b {
        s.c -= b;
        Color::Green
    } else if pre != Color::Red && s.e >= b {
        s.e -= b;
        Color::Yellow
    } else {
        Color::Red
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::sync::Arc;
    use Color::{Green as G, Red as R, Yellow as Y};

    const MS: u64 = 1_000_000;
    const S: u64 = 1_000_000_000;

    fn cfg(meter: Meter, color_aware: bool) -> PolicerConfig {
        PolicerConfig {
            meter,
            color_aware,
            conform: Verdict::Transmit,
            exceed: Verdict::SetDscpTransmit(0),
            violate: Verdict::Drop,
        }
    }

    /// 8,000 bit/s: one byte per millisecond, so the examples can be followed by hand.
    fn sr(cbs: u32, ebs: u32, aware: bool) -> Policer {
        Policer::new(cfg(
            Meter::SrTcm {
                cir_bps: 8_000,
                cbs,
                ebs,
            },
            aware,
        ))
    }

    /// CIR one byte per millisecond, PIR two.
    fn tr(cbs: u32, pbs: u32, aware: bool) -> Policer {
        Policer::new(cfg(
            Meter::TrTcm {
                cir_bps: 8_000,
                pir_bps: 16_000,
                cbs,
                pbs,
            },
            aware,
        ))
    }

    /// Colours (time, bytes, pre-colour) arrivals in order.
    fn run(p: &Policer, arrivals: &[(u64, u32, Color)]) -> Vec<Color> {
        arrivals.iter().map(|&(t, b, c)| p.color(t, b, c)).collect()
    }

    #[test]
    fn srtcm_blind_by_hand() {
        let p = sr(1000, 500, false);
        // Tc 1000, Te 500.
        let at0 = [
            (0, 600, G),
            (0, 600, G),
            (0, 400, G),
            (0, 500, G),
            (0, 1, G),
        ];
        // 600: Tc 400. 600: neither bucket holds it. 400: Tc 0. 500: Te 0. 1: nothing left.
        assert_eq!(run(&p, &at0), [G, R, G, Y, R]);
        // 100 ms later Tc has 100 bytes; Te gets nothing while Tc is below CBS.
        assert_eq!(run(&p, &[(100 * MS, 101, G), (100 * MS, 100, G)]), [R, G]);
        // 1,500 ms more: 1,000 fill Tc, the 500 that overflow fill Te, and no more.
        let later = 1600 * MS;
        assert_eq!(
            run(&p, &[(later, 1000, G), (later, 500, G), (later, 1, G)]),
            [G, Y, R]
        );
    }

    #[test]
    fn srtcm_excess_fills_only_from_overflow() {
        let p = sr(100, 100, false);
        assert_eq!(run(&p, &[(0, 100, G), (0, 100, G)]), [G, Y]);
        // 150 ms: Tc back to 100, Te gets the 50 that overflow.
        let t = 150 * MS;
        assert_eq!(run(&p, &[(t, 100, G), (t, 51, G), (t, 50, G)]), [G, R, Y]);
    }

    #[test]
    fn srtcm_aware_by_hand() {
        let p = sr(1000, 500, true);
        // Yellow never takes committed tokens; red takes none.
        assert_eq!(run(&p, &[(0, 400, Y), (0, 200, Y)]), [Y, R]);
        // Te now 100. A green packet that Tc cannot hold falls back on Te, as when blind.
        assert_eq!(run(&p, &[(0, 1000, R), (0, 1000, G), (0, 1, G)]), [R, G, Y]);
        let t = 1600 * MS; // Tc 1000 and Te 99 + 600 of overflow, capped at 500.
        assert_eq!(run(&p, &[(t, 600, R), (t, 600, G), (t, 500, G)]), [R, G, Y]);
    }

    #[test]
    fn trtcm_blind_by_hand() {
        let p = tr(500, 1000, false);
        // Tc 500, Tp 1000.
        let at0 = [(0, 400, G), (0, 400, G), (0, 300, G), (0, 100, G)];
        // 400: both (Tc 100, Tp 600). 400: Tc short, yellow (Tp 200). 300: Tp short, red.
        // 100: both (Tc 0, Tp 100).
        assert_eq!(run(&p, &at0), [G, Y, R, G]);
        assert_eq!(run(&p, &[(0, 200, G), (0, 100, G), (0, 1, G)]), [R, Y, R]);
        // 100 ms: Tc 100, Tp 200.
        let t = 100 * MS;
        assert_eq!(run(&p, &[(t, 150, G), (t, 50, G), (t, 1, G)]), [Y, G, R]);
        // Long idle: each bucket refills to its own size, independently.
        let t = 10 * S;
        assert_eq!(run(&p, &[(t, 500, G), (t, 500, G), (t, 1, G)]), [G, Y, R]);
    }

    #[test]
    fn trtcm_aware_by_hand() {
        let p = tr(500, 1000, true);
        // Red stays red and takes nothing; yellow takes only peak tokens.
        assert_eq!(run(&p, &[(0, 100, R), (0, 600, Y), (0, 500, G)]), [R, Y, R]);
        assert_eq!(run(&p, &[(0, 400, G), (0, 1, Y)]), [G, R]);
        let p = tr(500, 1000, true);
        assert_eq!(run(&p, &[(0, 500, Y), (0, 500, G)]), [Y, G]);
        // 300 ms: Tc 300, Tp 600.
        let t = 300 * MS;
        let later = [(t, 300, G), (t, 100, G), (t, 201, G), (t, 200, Y)];
        assert_eq!(run(&p, &later), [G, Y, R, Y]);
    }

    #[test]
    fn police_returns_actions_and_counts() {
        let p = sr(1000, 500, false);
        assert_eq!(p.police(0, 1000, G), (G, Verdict::Transmit));
        assert_eq!(p.police(0, 500, G), (Y, Verdict::SetDscpTransmit(0)));
        assert_eq!(p.police(0, 64, G), (R, Verdict::Drop));
        assert_eq!(p.police(0, 64, G), (R, Verdict::Drop));
        // color() takes tokens but does not count.
        assert_eq!(p.color(0, 1, G), R);
        let c = |packets, bytes| Counts { packets, bytes };
        assert_eq!(
            p.stats(),
            PolicerStats {
                conformed: c(1, 1000),
                exceeded: c(1, 500),
                violated: c(2, 128),
                dropped: c(2, 128),
            }
        );
        assert_eq!(p.config().violate, Verdict::Drop);
    }

    #[test]
    fn sub_byte_credit_is_kept() {
        // 8 bit/s: one byte per second, earned a millisecond at a time.
        let p = Policer::new(cfg(
            Meter::SrTcm {
                cir_bps: 8,
                cbs: 1,
                ebs: 0,
            },
            false,
        ));
        assert_eq!(p.color(0, 1, G), G);
        for ms in 1..1000 {
            assert_eq!(p.color(ms * MS, 1, G), R, "at {ms} ms");
        }
        assert_eq!(p.color(S, 1, G), G);
        // At 1 ns steps, 100 Gb/s earns 12.5 bytes a nanosecond: alternating 12 and 13 byte
        // packets every nanosecond stay green forever once the bucket is empty.
        let p = Policer::new(cfg(
            Meter::SrTcm {
                cir_bps: 100_000_000_000,
                cbs: 13,
                ebs: 0,
            },
            false,
        ));
        assert_eq!(p.color(0, 13, G), G);
        for ns in 1..100_000u64 {
            let b = if ns % 2 == 1 { 12 } else { 13 };
            assert_eq!(p.color(ns, b, G), G, "at {ns} ns");
        }
        assert_eq!(p.color(99_999, 1, G), R);
    }

    #[test]
    fn tokens_saturate_at_bucket_size() {
        for gap in [S, 10 * S, 3_600 * S, u64::MAX] {
            for rate in [1_000, 100_000_000_000, u64::MAX] {
                let p = Policer::new(cfg(
                    Meter::SrTcm {
                        cir_bps: rate,
                        cbs: u32::MAX,
                        ebs: 1000,
                    },
                    false,
                ));
                // Drain both buckets, wait, and find each exactly full again.
                assert_eq!(run(&p, &[(0, u32::MAX, G), (0, 1000, G)]), [G, Y]);
                let earned = u128::from(rate) * u128::from(gap);
                if earned >= (u128::from(u32::MAX) + 1000) * UNITS_PER_BYTE {
                    let got = run(&p, &[(gap, u32::MAX, G), (gap, 1000, G), (gap, 1, G)]);
                    assert_eq!(got, [G, Y, R], "rate {rate} gap {gap}");
                } else {
                    // Not full yet: exactly what was earned, in Tc.
                    let n = (earned / UNITS_PER_BYTE) as u32;
                    let got = run(&p, &[(gap, n + 1, G), (gap, n, G), (gap, 1, G)]);
                    assert_eq!(got, [R, G, R], "rate {rate} gap {gap}");
                }
            }
            let p = Policer::new(cfg(
                Meter::TrTcm {
                    cir_bps: u64::MAX,
                    pir_bps: u64::MAX,
                    cbs: u32::MAX,
                    pbs: u32::MAX,
                },
                false,
            ));
            assert_eq!(run(&p, &[(0, u32::MAX, G), (0, 1, G)]), [G, R]);
            let got = run(&p, &[(gap, u32::MAX, G), (gap, 1, G)]);
            assert_eq!(got, [G, R], "gap {gap}");
        }
    }

    #[test]
    fn earlier_time_is_no_time() {
        let p = sr(1000, 0, false);
        assert_eq!(p.color(S, 1000, G), G);
        // Back by half a second, then forward to the same second: no credit either way.
        assert_eq!(p.color(S / 2, 1, G), R);
        assert_eq!(p.color(S, 1, G), R);
        // Credit starts again from the latest time seen, not from the earlier one.
        assert_eq!(p.color(S + 10 * MS, 10, G), G);
        assert_eq!(p.color(S + 10 * MS, 1, G), R);
        let p = tr(500, 1000, false);
        assert_eq!(p.color(S, 1000, G), Y);
        assert_eq!(p.color(0, 1, G), R);
        assert_eq!(p.color(S + MS, 2, G), G);
        assert_eq!(p.color(S + MS, 1, G), R);
    }

    /// Equally spaced 512-byte packets offered at 1.5 × CIR for a million packets; returns the
    /// bits per second each colour got, over the time the load was offered.
    fn offered_load(p: &Policer, cir: u64) -> [f64; 3] {
        const N: u128 = 1_000_000;
        let bits = 512 * 8;
        // Packet i arrives at i × bits / (1.5 × CIR) seconds.
        let at = |i: u128| (i * bits * 2 * u128::from(S) / (3 * u128::from(cir))) as u64;
        let mut g = p.lock();
        for i in 0..N {
            g.police(at(i), 512, G);
        }
        drop(g);
        let st = p.stats();
        let secs = at(N) as f64 / 1e9;
        let rate = |c: Counts| c.bytes as f64 * 8.0 / secs;
        [rate(st.conformed), rate(st.exceeded), rate(st.violated)]
    }

    fn within_1pct(got: f64, want: f64) -> bool {
        (got - want).abs() <= want * 0.01
    }

    #[test]
    fn trtcm_rates_within_1pct() {
        let (cir, pir) = (1_000_000_000u64, 1_250_000_000u64);
        let p = Policer::new(cfg(
            Meter::TrTcm {
                cir_bps: cir,
                pir_bps: pir,
                cbs: 16 * 1024,
                pbs: 32 * 1024,
            },
            false,
        ));
        let [g, y, r] = offered_load(&p, cir);
        let offered = 1.5 * cir as f64;
        assert!(within_1pct(g, cir as f64), "green {g}");
        assert!(within_1pct(y, (pir - cir) as f64), "yellow {y}");
        assert!(within_1pct(r, offered - pir as f64), "red {r}");
        assert!(within_1pct(g + y + r, offered), "total {}", g + y + r);
    }

    #[test]
    fn srtcm_rates_within_1pct() {
        let cir = 1_000_000_000u64;
        let p = Policer::new(cfg(
            Meter::SrTcm {
                cir_bps: cir,
                cbs: 16 * 1024,
                ebs: 32 * 1024,
            },
            false,
        ));
        // Under a steady overload Tc never overflows, so Te never refills: after its first
        // burst, everything above CIR is red.
        let [g, _, r] = offered_load(&p, cir);
        assert!(within_1pct(g, cir as f64), "green {g}");
        assert!(within_1pct(r, 0.5 * cir as f64), "red {r}");
        let st = p.stats();
        assert_eq!(st.exceeded.bytes, 32 * 1024);
        assert_eq!(st.dropped, st.violated);
    }

    /// Checks that over every window of arrivals, green bytes ≤ CBS + CIR·t and (srTCM) green and
    /// yellow ≤ CBS + EBS + CIR·t, (trTCM) green and yellow ≤ PBS + PIR·t, where t runs on the
    /// latest time seen (times may go back).
    fn check_bounds(meter: Meter, arrivals: &[(u64, u32, Color)], colors: &[Color]) {
        let (cir, cbs, e_rate, e_burst) = match meter {
            Meter::SrTcm { cir_bps, cbs, ebs } => {
                (cir_bps, cbs, cir_bps, u64::from(cbs) + u64::from(ebs))
            }
            Meter::TrTcm {
                cir_bps,
                pir_bps,
                cbs,
                pbs,
            } => (cir_bps, cbs, pir_bps, u64::from(pbs)),
        };
        let mut seen = 0u64;
        let times: Vec<u64> = arrivals
            .iter()
            .map(|a| {
                seen = seen.max(a.0);
                seen
            })
            .collect();
        for i in 0..arrivals.len() {
            let (mut green, mut passed) = (0u128, 0u128);
            for j in i..arrivals.len() {
                let b = u128::from(arrivals[j].1);
                if colors[j] == G {
                    green += b;
                }
                if colors[j] != R {
                    passed += b;
                }
                let t = u128::from(times[j] - times[i]);
                let limit = u128::from(cbs) * UNITS_PER_BYTE + u128::from(cir) * t;
                assert!(green * UNITS_PER_BYTE <= limit, "green {i}..={j}");
                let limit = u128::from(e_burst) * UNITS_PER_BYTE + u128::from(e_rate) * t;
                assert!(passed * UNITS_PER_BYTE <= limit, "passed {i}..={j}");
            }
        }
    }

    fn arb_color() -> impl Strategy<Value = Color> {
        prop_oneof![Just(G), Just(Y), Just(R)]
    }

    fn arb_meter() -> impl Strategy<Value = Meter> {
        let rate = prop_oneof![1_000u64..1_000_000, 1_000_000u64..100_000_000_000];
        prop_oneof![
            (rate.clone(), 0u32..20_000, 0u32..20_000)
                .prop_map(|(cir_bps, cbs, ebs)| Meter::SrTcm { cir_bps, cbs, ebs }),
            (rate.clone(), rate, 0u32..20_000, 0u32..20_000).prop_map(|(a, b, cbs, pbs)| {
                Meter::TrTcm {
                    cir_bps: a.min(b),
                    pir_bps: a.max(b),
                    cbs,
                    pbs,
                }
            }),
        ]
    }

    proptest! {
        #[test]
        fn colours_obey_token_bounds(
            meter in arb_meter(),
            aware in any::<bool>(),
            steps in prop::collection::vec(
                // Mostly forward in small steps, sometimes backwards, sometimes long gaps.
                (prop_oneof![8 => 0i64..100_000, 1 => -100_000i64..0, 1 => 0i64..100_000_000],
                 1u32..3000, arb_color()),
                1..120),
        ) {
            let p = Policer::new(cfg(meter, aware));
            let mut t = 10_000_000u64;
            let arrivals: Vec<_> = steps
                .iter()
                .map(|&(dt, b, c)| {
                    t = t.saturating_add_signed(dt);
                    (t, b, c)
                })
                .collect();
            let colors: Vec<_> = arrivals.iter().map(|&(t, b, pre)| p.police(t, b, pre).0).collect();
            check_bounds(meter, &arrivals, &colors);
            if aware {
                // Colour-aware marking never improves on the colour a packet came with.
                for (a, c) in arrivals.iter().zip(&colors) {
                    prop_assert!(*c as u8 >= a.2 as u8);
                }
            }
            let st = p.stats();
            let n = st.conformed.packets + st.exceeded.packets + st.violated.packets;
            prop_assert_eq!(n, arrivals.len() as u64);
        }

        #[test]
        fn blind_ignores_pre_colour(
            meter in arb_meter(),
            steps in prop::collection::vec((0u64..1_000_000, 1u32..3000, arb_color()), 1..60),
        ) {
            let (a, b) = (Policer::new(cfg(meter, false)), Policer::new(cfg(meter, false)));
            let mut t = 0;
            for (dt, bytes, pre) in steps {
                t += dt;
                prop_assert_eq!(a.color(t, bytes, pre), b.color(t, bytes, G));
            }
        }
    }

    #[test]
    fn two_threads_share_one_policer() {
        // 10 Mb/s against two threads policing as fast as they can: the bound binds.
        let (cir, cbs) = (10_000_000u64, 10_000u32);
        let p = Arc::new(Policer::new(cfg(
            Meter::SrTcm {
                cir_bps: cir,
                cbs,
                ebs: 0,
            },
            false,
        )));
        let start = std::time::Instant::now();
        let now = move || start.elapsed().as_nanos() as u64;
        const N: u64 = 200_000;
        let workers: Vec<_> = (0..2)
            .map(|w| {
                let p = Arc::clone(&p);
                std::thread::spawn(move || {
                    let mut latest = 0;
                    let mut i = 0;
                    while i < N {
                        // One thread polices vectors under one lock, the other packet by packet;
                        // each reads the clock before taking the lock, so times interleave.
                        let t = now();
                        latest = t;
                        if w == 0 {
                            let mut g = p.lock();
                            for _ in 0..32 {
                                g.police(t, 100, G);
                            }
                            i += 32;
                        } else {
                            p.police(t, 100, G);
                            i += 1;
                        }
                    }
                    latest
                })
            })
            .collect();
        let latest = workers
            .into_iter()
            .map(|w| w.join().unwrap())
            .max()
            .unwrap();
        let st = p.stats();
        // No update was lost: every packet is counted once.
        let total = st.conformed.packets + st.violated.packets;
        assert_eq!(total, 2 * N);
        assert_eq!(st.conformed.bytes + st.violated.bytes, 2 * N * 100);
        assert_eq!(st.exceeded.packets, 0);
        let limit = u128::from(cbs) * UNITS_PER_BYTE + u128::from(cir) * u128::from(latest);
        let green = u128::from(st.conformed.bytes) * UNITS_PER_BYTE;
        assert!(green <= limit, "green {green} limit {limit}");
        assert!(st.conformed.bytes >= u64::from(cbs));
    }

    /// Release timing: `cargo test --release -p dataplane --lib police::tests::bench -- --ignored
    /// --nocapture`.
    #[test]
    #[ignore]
    fn bench_police_ns_per_packet() {
        let p = Policer::new(cfg(
            Meter::TrTcm {
                cir_bps: 1_000_000_000,
                pir_bps: 2_000_000_000,
                cbs: 64_000,
                pbs: 128_000,
            },
            false,
        ));
        const N: u64 = 20_000_000;
        // One packet a nanosecond at 512 bytes: mostly red, the three branches all taken.
        let t0 = std::time::Instant::now();
        for i in 0..N {
            hint::black_box(p.police(hint::black_box(i), 512, G));
        }
        let single = t0.elapsed().as_nanos() as f64 / N as f64;
        // As the data plane does it: a vector of 256 under one lock, all at the vector's time.
        let t0 = std::time::Instant::now();
        for v in 0..N / 256 {
            let mut g = p.lock();
            let now = N + v * 25_000;
            for _ in 0..256 {
                hint::black_box(g.police(hint::black_box(now), 512, G));
            }
        }
        let vector = t0.elapsed().as_nanos() as f64 / N as f64;
        println!("police: {single:.2} ns/packet one lock each, {vector:.2} ns/packet 256 per lock");
        println!("{:?}", p.stats());
    }
}
