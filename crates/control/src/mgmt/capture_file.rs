//! Captured frames as a file, in either format.
//!
//! - pcapng (what `linerate capture` writes unless the file is named `.pcap`): one interface per
//!   capture point, named for it (`if_name`): a port's own name for its receive and transmit
//!   sides, `PORT/NODE` for a node's output on a port, `PORT/drop` for the frames dropped that
//!   arrived on a port. Each packet keeps its original length when the snap length cut it, its
//!   direction in `epb_flags` (inbound: received, the input node's output, dropped; outbound:
//!   transmitted, a forwarding node's output), and a dropped frame's reason as its comment.
//! - classic pcap: the frames with their time and original length, nothing else.

use std::collections::HashMap;

use dataplane::tap::{Captured, Node, Point};
use packet::pcap::{self, Error};
use packet::pcapng::{self, InterfaceDesc, PacketOut, FLAG_INBOUND, FLAG_OUTBOUND};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CaptureFormat {
    Pcap,
    PcapNg,
}

impl CaptureFormat {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "pcap" => Some(Self::Pcap),
            "pcapng" => Some(Self::PcapNg),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Pcap => "pcap",
            Self::PcapNg => "pcapng",
        }
    }

    /// The HTTP content type of a file in this format.
    pub fn content_type(self) -> &'static str {
        match self {
            Self::Pcap => "application/vnd.tcpdump.pcap",
            Self::PcapNg => "application/x-pcapng",
        }
    }
}

/// The interface a frame is shown on: one per capture point (and port).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Key {
    Port(Option<u16>),
    Node(Node, Option<u16>),
    Drop(Option<u16>),
}

fn key(c: &Captured) -> Key {
    match c.point {
        Point::Rx(_) | Point::Tx(_) => Key::Port(c.port),
        Point::Node(n) => Key::Node(n, c.port),
        Point::Drop => Key::Drop(c.port),
    }
}

fn direction(p: Point) -> u32 {
    match p {
        Point::Rx(_) | Point::Drop | Point::Node(Node::EthernetInput) => FLAG_INBOUND,
        Point::Tx(_) | Point::Node(_) => FLAG_OUTBOUND,
    }
}

/// `(if_name, if_description)` of an interface; `port` names a port by its index.
fn describe(k: Key, port: &dyn Fn(Option<u16>) -> String) -> (String, String) {
    match k {
        Key::Port(p) => (
            port(p),
            format!("linerate: frames received and sent on port {}", port(p)),
        ),
        Key::Node(n, p) => (
            format!("{}/{}", port(p), n.name()),
            format!("linerate: the output of {} on port {}", n.name(), port(p)),
        ),
        Key::Drop(p) => (
            format!("{}/drop", port(p)),
            format!("linerate: frames dropped that arrived on port {}", port(p)),
        ),
    }
}

/// The frames as a file of `format`, cut to `snaplen`; `port_name` names a port by its index.
pub fn encode(
    frames: &[Captured],
    format: CaptureFormat,
    snaplen: u32,
    port_name: impl Fn(u16) -> Option<String>,
) -> Result<Vec<u8>, Error> {
    if format == CaptureFormat::Pcap {
        let mut w = pcap::Writer::new(Vec::new(), pcap::LINKTYPE_ETHERNET, snaplen)?;
        for f in frames {
            w.write_cut(f.unix_ns, &f.data, f.orig_len)?;
        }
        return Ok(w.into_inner());
    }
    let port = |p: Option<u16>| match p {
        Some(i) => port_name(i).unwrap_or_else(|| format!("port{i}")),
        None => "any".into(),
    };
    let mut w = pcapng::Writer::new(Vec::new(), "linerate")?;
    let mut ids: HashMap<Key, u32> = HashMap::new();
    for f in frames {
        let k = key(f);
        let id = match ids.get(&k) {
            Some(id) => *id,
            None => {
                let (name, description) = describe(k, &port);
                let id = w.add_interface(&InterfaceDesc {
                    linktype: pcap::LINKTYPE_ETHERNET as u16,
                    snaplen,
                    name: Some(&name),
                    description: Some(&description),
                })?;
                ids.insert(k, id);
                id
            }
        };
        let comment = f
            .drop
            .map(|d| format!("dropped: {} ({})", d.text(), d.name()));
        w.write_packet(&PacketOut {
            interface: id,
            ts_nanos: f.unix_ns,
            data: &f.data,
            orig_len: f.orig_len,
            flags: Some(direction(f.point)),
            dropcount: None,
            comment: comment.as_deref(),
        })?;
    }
    Ok(w.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use dataplane::DropReason;
    use packet::pcapng::Reader;

    fn frame(port: Option<u16>, point: Point, len: usize) -> Captured {
        Captured {
            unix_ns: 1_700_000_000_000_000_000 + len as u64,
            worker: 0,
            port,
            point,
            drop: matches!(point, Point::Drop).then_some(DropReason::TtlExpired),
            orig_len: len,
            data: vec![0xab; len.min(64)],
        }
    }

    #[test]
    fn pcapng_has_an_interface_per_point_and_the_direction_of_each_frame() {
        let frames = [
            frame(Some(0), Point::Rx(Some(0)), 100),
            frame(Some(1), Point::Tx(Some(1)), 90),
            frame(Some(0), Point::Tx(Some(0)), 80),
            frame(Some(1), Point::Node(Node::Ip4Forward), 70),
            frame(Some(0), Point::Drop, 60),
        ];
        let names = |i: u16| ["p0", "p1"].get(i as usize).map(|s| s.to_string());
        let f = encode(&frames, CaptureFormat::PcapNg, 64, names).unwrap();
        let mut r = Reader::new(&f[..]).unwrap();
        let mut buf = Vec::new();
        let mut got = Vec::new();
        while let Some(p) = r.next_into(&mut buf).unwrap() {
            got.push((p.interface, p.flags, p.caplen, p.orig_len));
        }
        let (i, o) = (Some(FLAG_INBOUND), Some(FLAG_OUTBOUND));
        assert_eq!(
            got,
            [
                (0, i, 64, 100),
                (1, o, 64, 90),
                (0, o, 64, 80),
                (2, o, 64, 70),
                (3, i, 60, 60)
            ]
        );
        assert_eq!(r.interfaces().len(), 4);
        for needle in [
            &b"p1/ip4-forward"[..],
            b"p0/drop",
            b"dropped: TTL or hop limit expired (TtlExpired)",
        ] {
            assert!(f.windows(needle.len()).any(|w| w == needle));
        }
    }

    #[test]
    fn classic_pcap_keeps_the_original_length() {
        let frames = [frame(Some(0), Point::Rx(Some(0)), 100)];
        let f = encode(&frames, CaptureFormat::Pcap, 64, |_| None).unwrap();
        let mut r = pcap::Reader::new(&f[..]).unwrap();
        let rec = r.next_into(&mut Vec::new()).unwrap().unwrap();
        assert_eq!((rec.caplen, rec.orig_len), (64, 100));
    }
}
