//! Datagrams (2-byte length prefixed) to the strict NetFlow v9 / IPFIX collector the exporter's
//! tests decode with; see `flow::fuzzing::ipfix`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    flow::fuzzing::ipfix(data);
});
