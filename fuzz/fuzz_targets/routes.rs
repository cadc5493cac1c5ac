//! A route file loaded into a small router (default VRF, or a second one by the first byte's low
//! bit); see `control::fuzzing::routes`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    control::fuzzing::routes(data);
});
