//! Frames through the whole packet graph of a two-port router: nothing panics and no buffer is
//! lost or freed twice; see `dataplane::fuzzing::graph`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    dataplane::fuzzing::graph(data);
});
