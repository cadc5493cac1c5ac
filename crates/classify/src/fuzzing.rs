//! Entry point for the cargo-fuzz target `classify_key` in `fuzz/`, kept in the crate so that
//! the unit test below runs exactly the same code, with every kept input, on stable Rust. Not
//! part of the API.

use crate::rule::Dim;
use crate::{linear, Classifier, Rule, NO_MATCH};

/// Any bytes as a received frame through the classifier's packet decoder: decoding must not
/// panic, and a compiled rule list must give the linear reference's answer for whatever it
/// decoded. The frame is read as received, and with an inner packet at the offset its first
/// byte names (as a decapsulated tunnel's).
pub fn classify_key(data: &[u8]) {
    let at = data.first().map_or(0, |&b| b as usize);
    for k in [crate::extract(data), crate::extract_at(data, at)] {
        check(&k);
    }
    // Written in place over whatever a batch's slot held before: the same key.
    let mut slot = crate::Key([u32::MAX; crate::rule::DIMS]);
    crate::extract_at_into(&mut slot, data, at);
    assert_eq!(slot, crate::extract_at(data, at));
}

fn check(k: &crate::Key) {
    let rules = [
        Rule::any().ipv4().proto(17).dst_ports(5000, 7500),
        Rule::any().ipv6().tcp_flags(0x02, 0x12),
        Rule::any().with(Dim::Frag, 2, 2),
        Rule::any().exact(Dim::Vlan, 100),
    ];
    let c = Classifier::compile(&rules);
    assert_eq!(c.classify(k), linear(&rules, k).unwrap_or(NO_MATCH));
}

#[cfg(test)]
mod tests {
    #[test]
    fn classify_key_inputs() {
        for (name, data) in packet::fuzz_inputs::saved("classify_key") {
            eprintln!("{name}");
            super::classify_key(&data);
        }
    }
}
