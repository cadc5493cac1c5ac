//! The capture filter: the input up to the first 0 byte is an expression (lossy UTF-8), the rest
//! a frame; see `packet::fuzzing::filter`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    packet::fuzzing::filter(data);
});
