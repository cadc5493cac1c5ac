//! Feeds arbitrary bytes to the tester's SGSN emulator as what a GGSN sent it: a Create or
//! Delete response, an Echo Request, or anything else, which is ignored; never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    tester::fuzzing::sgsn(data);
});
