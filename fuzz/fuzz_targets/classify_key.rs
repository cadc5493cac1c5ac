//! The classifier's packet decoder on any bytes as a received frame, checked against the linear
//! reference; see `classify::fuzzing::classify_key`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    classify::fuzzing::classify_key(data);
});
