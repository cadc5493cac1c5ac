//! LAN frames, SSP bytes, time and transport events into a DLSw engine; see
//! `control::fuzzing::dlsw` for the framing and what is asserted after every record.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    control::fuzzing::dlsw(data);
});
