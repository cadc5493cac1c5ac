//! The router config, as `linerate check` reads it: YAML parser, checker, then the router built
//! from what passed; see `control::fuzzing::config`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    control::fuzzing::config(data);
});
