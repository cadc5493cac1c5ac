//! The classifier's packet decoder: any bytes as a received frame. Decoding must not panic, and a
//! compiled rule list must give the same answer as the linear reference for whatever it decoded.
#![no_main]

use classify::{linear, rule::Dim, Classifier, Rule, NO_MATCH};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let k = classify::extract(data);
    let rules = [
        Rule::any().ipv4().proto(17).dst_ports(5000, 7500),
        Rule::any().ipv6().tcp_flags(0x02, 0x12),
        Rule::any().with(Dim::Frag, 2, 2),
        Rule::any().exact(Dim::Vlan, 100),
    ];
    let c = Classifier::compile(&rules);
    assert_eq!(c.classify(&k), linear(&rules, &k).unwrap_or(NO_MATCH));
});
