//! Reads arbitrary bytes as a pcap file until the end or the first error.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    packet::fuzzing::pcap(data);
});
