//! A streams file for `linerate bench run`: parsed against three ports, and every stream that
//! passed builds frames its analyzer recognises; see `tester::fuzzing::streams`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    tester::fuzzing::streams(data);
});
