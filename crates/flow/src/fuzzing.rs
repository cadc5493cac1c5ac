//! Entry point for the cargo-fuzz target `ipfix` in `fuzz/` (built with the `fuzzing` feature),
//! kept in the crate so that the unit test below runs exactly the same code on stable Rust. Not
//! part of the API.
//!
//! The decoder is the collector side the tests check the exporter against: it must refuse a
//! malformed datagram with a message, never panic, or a broken encoder could hide behind it.

use crate::decode::Collector;
use crate::export::Clock;

/// `data` as datagrams to one collector, each a 2-byte big-endian length then its bytes (the
/// last takes whatever is left), so templates learned from one apply to the next.
pub fn ipfix(data: &[u8]) {
    let mut c = Collector::new(Clock {
        boot_unix_ns: 1_700_000_000_000_000_000,
    });
    let mut rest = data;
    while !rest.is_empty() {
        let (msg, next) = match rest {
            [a, b, tail @ ..] => {
                let n = usize::from(u16::from_be_bytes([*a, *b])).min(tail.len());
                tail.split_at(n)
            }
            _ => (rest, &[][..]),
        };
        if let Ok(p) = c.parse(msg) {
            let h = p.header.expect("a parsed datagram has a header");
            assert!(h.version == 9 || h.version == 10);
            let sets: usize = p.sets.iter().map(|&(_, len)| usize::from(len)).sum();
            assert!(sets <= msg.len());
        }
        rest = next;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipfix_inputs() {
        ipfix(&[]);
        ipfix(&[0, 20, 0, 9, 0, 0]);
        ipfix(&[0, 16, 0, 10, 0, 16, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        for (name, data) in packet::fuzz_inputs::saved("ipfix") {
            eprintln!("{name}");
            ipfix(&data);
        }
    }
}
