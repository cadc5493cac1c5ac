//! zebra's FPM stream: bytes through the frame reader (in chunks) or straight into the netlink
//! decoder, every decoded message re-encoded to itself, and everything applied to the RIB, whose
//! invariants and consumer-visible changes are checked; see `fpm::fuzzing::fpm`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    fpm::fuzzing::fpm(data);
});
