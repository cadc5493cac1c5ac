//! LLC (802.2) frames and DLSw's SSP messages; see `packet::fuzzing::llc_dlsw` for what is
//! asserted.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    packet::fuzzing::llc_dlsw(data);
});
