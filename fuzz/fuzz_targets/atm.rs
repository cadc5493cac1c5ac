//! ATM cells into an AAL5 reassembler: see `dataplane::fuzzing::atm` for what is asserted.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    dataplane::fuzzing::atm(data);
});
