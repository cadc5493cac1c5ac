//! Entry points for the cargo-fuzz targets in `fuzz/`, kept in the crate so that the unit tests
//! below run exactly the same code on stable Rust. Not part of the API.
//!
//! A streams file is the tester user's input: a wrong one must be refused with a message, and
//! whatever passed must build frames the analyzer recognises. A panic here is a bug.

use crate::analyzer::Analyzer;
use crate::stream::{finish, GenStream};
use crate::streams_file::{parse_for, PortInfo};

/// The frame sizes the fuzzed streams are built at: the smallest, an odd one, the largest.
const SIZES: [u16; 3] = [64, 333, 1518];

fn ports() -> Vec<PortInfo> {
    (0..3u8)
        .map(|i| PortInfo {
            name: format!("p{i}"),
            router_mac: [2, 0, 0, 0, i, 1],
            host_mac: [2, 0, 0, 0, i, 2],
            host_v4: (i != 2).then_some(0xc000_0202 + (u32::from(i) << 8)),
            host_v6: (i != 1).then_some(0x2001_0db8_0000_0000_0000_0000_0000_0002 + u128::from(i)),
        })
        .collect()
}

/// `data` as a streams file against three ports (`p0` to `p2`; `p1` has no IPv6 neighbour,
/// `p2` no IPv4 one). Every stream that passed and validates at the sizes builds its first
/// frames at each size, and the analyzer counts each as that stream's, received where expected.
pub fn streams(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let ports = ports();
    let f = match parse_for(text, "fuzz.yaml", &ports, "no such port") {
        Ok(f) => f,
        Err(e) => {
            assert!(e.starts_with("fuzz.yaml:"), "errors name the file: {e}");
            return;
        }
    };
    assert_eq!(f.speeds.len(), ports.len());
    for s in &f.streams {
        let _ = s.flows();
        if s.validate(&SIZES, ports.len()).is_err() {
            continue;
        }
        let mut g = GenStream::new(s, &SIZES, 1);
        let mut a = Analyzer::new(&[s.rx_port], ports.len());
        a.reset(1);
        let mut buf = vec![0u8; 2048];
        for (z, t) in g.templates.clone().iter().enumerate() {
            for _ in 0..3 {
                let frame = &mut buf[..t.len as usize];
                let sum = g.build(z, frame, 1, 0, false);
                finish(t, frame, 1000, sum);
                a.frame(s.rx_port, frame, 2000);
            }
        }
        let got = &a.streams[0];
        assert_eq!(
            (got.received, got.corrupted, got.misdelivered),
            (3 * SIZES.len() as u64, 0, 0),
            "stream {}: its own frames are recognised",
            s.name
        );
    }
}

/// `data` as what a GGSN sends the SGSN emulator: read as a Create or Delete response and as an
/// Echo Request. Nothing panics; an answer read is one of a response's outcomes, with the
/// sequence number the header carries; an Echo Response is built only for an Echo Request and
/// parses back with its sequence number.
pub fn sgsn(data: &[u8]) {
    use crate::sgsn::{answer, echo_response, Answer};
    use packet::gtp::{self, msg};
    let h = gtp::parse_header(data).ok();
    if let Some((seq, a)) = answer(data) {
        let h = h.expect("an answer has a valid header");
        assert!(matches!(
            h.msg_type,
            msg::CREATE_PDP_RESPONSE | msg::DELETE_PDP_RESPONSE
        ));
        assert_eq!(Some(seq), h.seq);
        if let Answer::Created { .. } = a {
            assert_eq!(h.msg_type, msg::CREATE_PDP_RESPONSE);
        }
    }
    if let Some(r) = echo_response(data, 7) {
        let h = h.expect("an Echo Request has a valid header");
        assert_eq!(h.msg_type, msg::ECHO_REQUEST);
        let back = gtp::parse_header(&r).expect("our Echo Response parses");
        assert_eq!(back.msg_type, msg::ECHO_RESPONSE);
        assert_eq!(back.seq, Some(h.seq.unwrap_or(0)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sgsn_inputs() {
        use packet::gtp::{cause, ie, msg, MsgBuilder};
        sgsn(b"");
        sgsn(&MsgBuilder::new(msg::ECHO_REQUEST, 0, 9).finish());
        let mut m = MsgBuilder::new(msg::CREATE_PDP_RESPONSE, 1, 3);
        m.tv(ie::CAUSE, &[cause::REQUEST_ACCEPTED]);
        sgsn(&m.finish());
        for (name, data) in packet::fuzz_inputs::saved("sgsn") {
            eprintln!("{name}");
            sgsn(&data);
        }
    }

    #[test]
    fn streams_inputs() {
        streams(b"");
        streams(b"\xff");
        streams(b"streams: []\n");
        streams(
            b"streams:\n  - { from: p0, to: p1, ipv4: { src: 192.0.2.2, dst: 10.0.0.1 }, \
              vary: [ { field: dst-ip, count: 1000 } ] }\n",
        );
        for (name, data) in packet::fuzz_inputs::saved("streams") {
            eprintln!("{name}");
            streams(&data);
        }
    }

    #[test]
    fn analyzer_inputs() {
        for (name, data) in packet::fuzz_inputs::saved("analyzer") {
            eprintln!("{name}");
            crate::analyzer::fuzz_frame(&data);
        }
    }
}
