//! Session bytes, hellos, time and circuit changes into an LDP speaker with an operational
//! session; see `control::fuzzing::ldp_session` for the framing and what is asserted.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    control::fuzzing::ldp_session(data);
});
