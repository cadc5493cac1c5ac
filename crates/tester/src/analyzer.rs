//! The analyzer: reads the signature of every received frame and keeps, per stream, what arrived,
//! what arrived twice, late or at the wrong port, and how long each frame took.
//!
//! Sequence tracking follows RFC 4737: a frame whose sequence number is below the next expected
//! one is reordered (it arrived after a later frame), unless the 128-frame window of recently seen
//! numbers says it already arrived, in which case it is a duplicate. Loss is what the generator
//! sent minus the distinct frames that arrived where they should.

use packet::checksum;

use crate::histogram::Histogram;
use crate::signature::{self, Parsed};
use crate::stream::pattern;

/// Per-stream receive state: one cache line, touched once per frame.
#[derive(Clone, Debug, Default)]
#[repr(align(64))]
pub struct RxStream {
    pub expect_port: u16,
    /// A second port the stream may arrive at ([`NO_PORT`]: none): a Flexlink pair's backup,
    /// which takes the stream over when the primary fails.
    pub also_port: u16,
    /// Next sequence number expected.
    next: u32,
    /// Bit k: sequence number `next - 1 - k` has arrived.
    window: u128,
    pub received: u64,
    pub duplicated: u64,
    pub reordered: u64,
    pub misdelivered: u64,
    pub corrupted: u64,
    pub lat_min: u32,
    pub lat_max: u32,
    pub lat_sum: u64,
    /// When the first and the last frame arrived (tester clock, low 32 bits), if any did, and
    /// when each had been sent (its timestamp): a change of forwarding state is read from the
    /// latter, which the receive side's polling cannot delay.
    pub first_ns: u32,
    pub last_ns: u32,
    pub first_tx_ns: u32,
    pub last_tx_ns: u32,
}

/// No second port for a stream.
pub const NO_PORT: u16 = u16::MAX;

/// Frames a port received that belong to no stream of this trial.
#[derive(Clone, Debug, Default)]
pub struct PortRx {
    pub frames: u64,
    /// Frames that came while the port's cable was cut ([`Analyzer::cut_mask`]): lost on the
    /// wire, not counted as received.
    pub cut: u64,
    pub foreign: u64,
    pub stale: u64,
    /// Corrupted frames whose stream id is itself out of range.
    pub corrupted_unknown: u64,
}

pub struct Analyzer {
    pub trial: u8,
    pub streams: Vec<RxStream>,
    pub hist: Vec<Histogram>,
    pub ports: Vec<PortRx>,
    /// Check every payload byte against the pattern (reads the whole frame: off by default).
    pub verify_payload: bool,
    /// Bit p: port p's cable is cut (a failover procedure pulled it): what the device sent
    /// there is lost on the wire.
    pub cut_mask: u64,
    /// Per stream with receivers besides its own port (multicast), indexed by port: the
    /// receiver's index in `receivers` (`u32::MAX`: not one).
    fanout: Vec<Option<Box<[u32]>>>,
    /// Those receivers' states, each (stream, port) on its own; `receiver_of` names them.
    pub receivers: Vec<RxStream>,
    pub receiver_of: Vec<(u32, u16)>,
}

impl Analyzer {
    pub fn new(expect_ports: &[usize], ports: usize) -> Self {
        Analyzer {
            trial: 0,
            streams: expect_ports
                .iter()
                .map(|&p| RxStream {
                    expect_port: p as u16,
                    also_port: NO_PORT,
                    lat_min: u32::MAX,
                    ..Default::default()
                })
                .collect(),
            hist: expect_ports.iter().map(|_| Histogram::new()).collect(),
            ports: vec![PortRx::default(); ports],
            verify_payload: false,
            cut_mask: 0,
            fanout: vec![None; expect_ports.len()],
            receivers: Vec::new(),
            receiver_of: Vec::new(),
        }
    }

    /// Stream `stream` must also arrive, whole, at each of `ports` (a multicast stream's
    /// receivers besides its own port): each is counted apart.
    pub fn set_receivers(&mut self, stream: usize, ports: &[usize]) {
        let mut f = vec![u32::MAX; self.ports.len()].into_boxed_slice();
        for &p in ports {
            f[p] = self.receivers.len() as u32;
            self.receivers.push(RxStream {
                expect_port: p as u16,
                also_port: NO_PORT,
                lat_min: u32::MAX,
                ..Default::default()
            });
            self.receiver_of.push((stream as u32, p as u16));
        }
        self.fanout[stream] = Some(f);
    }

    /// The receivers of `stream` besides its own port: (port, state).
    pub fn receivers_of(&self, stream: usize) -> impl Iterator<Item = (u16, &RxStream)> + '_ {
        self.receiver_of
            .iter()
            .zip(&self.receivers)
            .filter(move |((s, _), _)| *s as usize == stream)
            .map(|((_, p), r)| (*p, r))
    }

    /// Forgets everything and expects frames of `trial`.
    pub fn reset(&mut self, trial: u8) {
        self.trial = trial;
        for s in self.streams.iter_mut().chain(self.receivers.iter_mut()) {
            *s = RxStream {
                expect_port: s.expect_port,
                also_port: s.also_port,
                lat_min: u32::MAX,
                ..Default::default()
            };
        }
        for h in &mut self.hist {
            h.clear();
        }
        for p in &mut self.ports {
            *p = PortRx::default();
        }
    }

    /// Accounts one frame received on `port` at `rx_ns` (tester clock, low 32 bits). Returns
    /// false when the buffer does not hold a test frame's payload as sent (damaged, or a foreign
    /// frame: in external mode received frames are copies of whatever came off the wire), so it
    /// should not be reused as is.
    #[inline(always)]
    pub fn frame(&mut self, port: usize, frame: &[u8], rx_ns: u32) -> bool {
        let pr = &mut self.ports[port];
        if self.cut_mask >> (port & 63) & 1 == 1 {
            pr.cut += 1;
            return true;
        }
        pr.frames += 1;
        let Some((l3, end, v)) = signature::locate(frame) else {
            pr.foreign += 1;
            return false;
        };
        // An ICMP error quoting a test frame ends with that frame's signature, which its own
        // length fails to check (a corrupted frame) but for one in 65,536 (a misdelivered one):
        // it is the device's, not the stream's. Asked only on those rare outcomes, so a test
        // frame pays nothing for it.
        let device_own = || signature::is_icmp_error(frame, l3, v);
        let ip_len = (end - l3) as u16;
        let sig = &frame[end - signature::LEN..end];
        let sig = match signature::read(sig, self.trial, ip_len) {
            Parsed::Ok(s) => s,
            Parsed::Foreign => {
                pr.foreign += 1;
                return false;
            }
            Parsed::Stale => {
                pr.stale += 1;
                return true;
            }
            Parsed::Corrupted { .. } if device_own() => {
                pr.foreign += 1;
                return false;
            }
            Parsed::Corrupted { stream } => {
                match self.streams.get_mut(stream as usize) {
                    Some(s) => s.corrupted += 1,
                    None => pr.corrupted_unknown += 1,
                }
                return false;
            }
        };
        let sid = sig.stream as usize;
        let Some(s) = self.streams.get_mut(sid) else {
            pr.corrupted_unknown += 1;
            return false;
        };
        let ihl = (frame[l3] & 0x0f) as usize * 4;
        if v == 4 && (ihl < 20 || l3 + ihl > end || !checksum::ipv4_header_ok(&frame[l3..l3 + ihl]))
        {
            s.corrupted += 1;
            return false;
        }
        if self.verify_payload {
            let (hdr_len, proto) = match v {
                4 => (ihl, frame[l3 + 9]),
                _ => (40, frame[l3 + 6]),
            };
            let start = l3 + hdr_len + if proto == 17 { 8 } else { 0 };
            let stop = end - signature::LEN;
            if start > stop || frame[start..stop] != *pattern(stop - start) {
                if device_own() {
                    self.ports[port].foreign += 1;
                } else {
                    s.corrupted += 1;
                }
                return false;
            }
        }
        let s = if s.expect_port as usize == port || s.also_port as usize == port {
            s
        } else {
            match self.fanout[sid].as_ref().map(|f| f[port]) {
                Some(r) if r != u32::MAX => &mut self.receivers[r as usize],
                _ if device_own() => {
                    self.ports[port].foreign += 1;
                    return false;
                }
                _ => {
                    s.misdelivered += 1;
                    return true;
                }
            }
        };
        let d = sig.seq.wrapping_sub(s.next) as i32;
        if d >= 0 {
            let shift = d as u32 + 1;
            s.window = if shift >= 128 {
                1
            } else {
                s.window << shift | 1
            };
            s.next = sig.seq.wrapping_add(1);
        } else {
            let k = (-(d as i64) - 1) as u32;
            if k < 128 {
                if s.window >> k & 1 == 1 {
                    s.duplicated += 1;
                    return true;
                }
                s.window |= 1 << k;
            }
            s.reordered += 1;
        }
        if s.received == 0 {
            s.first_ns = rx_ns;
            s.first_tx_ns = sig.tx_ns;
        }
        s.last_ns = rx_ns;
        s.last_tx_ns = sig.tx_ns;
        s.received += 1;
        let lat = rx_ns.wrapping_sub(sig.tx_ns);
        s.lat_min = s.lat_min.min(lat);
        s.lat_max = s.lat_max.max(lat);
        s.lat_sum += lat as u64;
        self.hist[sid].add(lat);
        true
    }
}

/// One arbitrary frame through a fresh analyzer with a few streams, on a port chosen by the
/// first byte: the fuzz target's body (and the robustness test's).
pub fn fuzz_frame(data: &[u8]) {
    let mut a = Analyzer::new(&[0, 1, 2], 3);
    a.reset(data.first().copied().unwrap_or(0));
    let port = data.get(1).map_or(0, |&b| b as usize % 3);
    a.verify_payload = data.get(2).is_some_and(|&b| b & 1 == 1);
    a.frame(port, data, 12345);
    let total: u64 = a.ports.iter().map(|p| p.frames).sum();
    assert_eq!(total, 1, "every frame is counted once");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream::{finish, v4_stream, GenStream};

    fn frames(n: usize, size: u16) -> Vec<Vec<u8>> {
        let mut g = GenStream::new(&v4_stream(), &[size], 1);
        (0..n)
            .map(|i| {
                let mut f = vec![0u8; g.templates[0].len as usize];
                let s = g.build(0, &mut f, 1, 0, false);
                finish(&g.templates[0], &mut f, 1000 + i as u32, s);
                f
            })
            .collect()
    }

    #[test]
    fn counts_loss_duplicates_reordering_and_misdelivery() {
        let f = frames(10, 64);
        let mut a = Analyzer::new(&[1], 3);
        a.reset(1);
        // 0 1 3 2 2 5 (lost: 4, 6..9), then frame 7 on the wrong port.
        for i in [0, 1, 3, 2, 2, 5] {
            assert!(a.frame(1, &f[i], 5000));
        }
        a.frame(2, &f[7], 5000);
        let s = &a.streams[0];
        assert_eq!(
            (s.received, s.duplicated, s.reordered, s.misdelivered),
            (5, 1, 1, 1)
        );
        assert_eq!(s.lat_min, 5000 - 1005);
        assert_eq!(s.lat_max, 5000 - 1000);
        assert_eq!(a.hist[0].count(), 5);
    }

    /// An ICMP unreachable for a test frame, as a router sends it back: Ethernet, IPv4, ICMP
    /// type 3, then the frame's whole IP packet (signature included).
    fn unreachable_for(f: &[u8]) -> Vec<u8> {
        let quoted = &f[14..];
        let mut out = f[..14].to_vec();
        let tl = (20 + 8 + quoted.len()) as u16;
        let mut ip = vec![
            0x45, 0, 0, 0, 0, 0, 0, 0, 64, 1, 0, 0, 192, 0, 2, 1, 192, 0, 2, 2,
        ];
        ip[2..4].copy_from_slice(&tl.to_be_bytes());
        let c = packet::checksum::fold(packet::checksum::sum(&ip));
        ip[10..12].copy_from_slice(&c.to_be_bytes());
        out.extend(ip);
        out.extend([3, 1, 0, 0, 0, 0, 0, 0]);
        out.extend_from_slice(quoted);
        out
    }

    #[test]
    fn an_icmp_error_quoting_a_test_frame_is_foreign_not_the_streams() {
        let f = frames(2, 64);
        let mut a = Analyzer::new(&[1], 2);
        a.reset(1);
        let icmp = unreachable_for(&f[0]);
        assert!(signature::locate(&icmp).is_some());
        assert!(!a.frame(0, &icmp, 0));
        let s = &a.streams[0];
        assert_eq!((s.received, s.misdelivered, s.corrupted), (0, 0, 0));
        assert_eq!(a.ports[0].foreign, 1);
        // The one in 65,536 whose quoted signature checks for the ICMP packet's own length
        // (made so here): still the device's, not a misdelivered frame.
        let mut lucky = unreachable_for(&f[1]);
        let n = lucky.len();
        let sig = lucky[n - signature::LEN..].to_vec();
        let c = signature::check(
            sig[1],
            u32::from_le_bytes(sig[4..8].try_into().unwrap()),
            u32::from_le_bytes(sig[8..12].try_into().unwrap()),
            u32::from_le_bytes(sig[12..16].try_into().unwrap()),
            (n - 14) as u16,
        );
        lucky[n - signature::LEN + 2..n - signature::LEN + 4].copy_from_slice(&c.to_le_bytes());
        assert!(!a.frame(0, &lucky, 0));
        let s = &a.streams[0];
        assert_eq!((s.received, s.misdelivered, s.corrupted), (0, 0, 0));
        assert_eq!(a.ports[0].foreign, 2);
        // The frame itself still counts.
        assert!(a.frame(1, &f[1], 0));
        assert_eq!(a.streams[0].received, 1);
    }

    #[test]
    fn stale_foreign_and_corrupted_frames_are_told_apart() {
        let f = frames(3, 128);
        let mut a = Analyzer::new(&[1], 2);
        a.reset(2);
        a.frame(1, &f[0], 0);
        assert_eq!(a.ports[1].stale, 1);
        a.reset(1);
        let mut bad = f[1].clone();
        let n = bad.len();
        bad[n - 6] ^= 0x10; // in the timestamp
        assert!(!a.frame(1, &bad, 0));
        let mut hdr = f[2].clone();
        hdr[22] ^= 1; // the TTL: the IPv4 checksum no longer holds
        assert!(!a.frame(1, &hdr, 0));
        // Not reused as a test frame's buffer: its payload is whatever came.
        assert!(!a.frame(1, &[0u8; 60], 0));
        assert_eq!(a.streams[0].corrupted, 2);
        assert_eq!(a.ports[1].foreign, 1);
        // A payload byte is only seen when payloads are verified.
        let mut pay = f[0].clone();
        pay[50] ^= 0xff;
        assert!(a.frame(1, &pay, 0));
        a.reset(1);
        a.verify_payload = true;
        assert!(!a.frame(1, &pay, 0));
        assert!(a.frame(1, &f[1], 0));
        assert_eq!((a.streams[0].corrupted, a.streams[0].received), (1, 1));
    }

    proptest::proptest! {
        #[test]
        fn any_bytes_are_counted_never_a_panic(data in proptest::collection::vec(proptest::num::u8::ANY, 0..200)) {
            fuzz_frame(&data);
        }

        /// Valid frames with one byte changed anywhere: still counted, never a panic.
        #[test]
        fn damaged_frames_are_counted(at in 0usize..1514, bit in 0u8..8, size in 0usize..3) {
            let f = &frames(1, [64, 333, 1518][size])[0];
            let mut g = f.clone();
            let at = at % g.len();
            g[at] ^= 1 << bit;
            fuzz_frame(&g);
        }
    }

    #[test]
    fn a_multicast_streams_receivers_are_counted_each_on_its_own() {
        let f = frames(5, 64);
        // Stream 0 belongs at port 1 and, as a multicast stream, at ports 2 and 3.
        let mut a = Analyzer::new(&[1], 4);
        a.set_receivers(0, &[2, 3]);
        a.reset(1);
        for i in 0..5 {
            a.frame(1, &f[i], 100 + i as u32);
            a.frame(2, &f[i], 200 + i as u32);
        }
        // Port 3 gets two, one twice; port 0 is no receiver.
        a.frame(3, &f[1], 300);
        a.frame(3, &f[3], 301);
        a.frame(3, &f[3], 302);
        a.frame(0, &f[0], 400);
        assert_eq!(a.streams[0].received, 5);
        assert_eq!(a.streams[0].misdelivered, 1);
        let r: Vec<(u16, u64, u64)> = a
            .receivers_of(0)
            .map(|(p, x)| (p, x.received, x.duplicated))
            .collect();
        assert_eq!(r, vec![(2, 5, 0), (3, 2, 1)]);
        let p2 = a.receivers_of(0).next().unwrap().1;
        assert_eq!((p2.first_ns, p2.last_ns), (200, 204));
        // A new trial starts every receiver from nothing.
        a.reset(2);
        assert!(a.receivers_of(0).all(|(_, x)| x.received == 0));
    }

    #[test]
    fn a_long_gap_then_late_frames() {
        let f = frames(300, 64);
        let mut a = Analyzer::new(&[1], 2);
        a.reset(1);
        a.frame(1, &f[299], 0);
        for i in 0..299 {
            a.frame(1, &f[i], 0);
        }
        let s = &a.streams[0];
        assert_eq!((s.received, s.reordered, s.duplicated), (300, 299, 0));
    }
}
