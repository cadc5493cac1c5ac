//! IGMP and MLD: classification and parsing over arbitrary IP packets, and reports rebuilt
//! and read back; see `packet::fuzzing::mcast` for what is asserted.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    packet::fuzzing::mcast(data);
});
