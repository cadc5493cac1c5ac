//! Every header view, the IPv6 extension-header walk and the ICMP error builders over arbitrary
//! bytes; see `packet::fuzzing::wire` for what is asserted.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    packet::fuzzing::wire(data);
});
