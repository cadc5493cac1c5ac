//! Feeds arbitrary bytes to the tester's analyzer as a received frame: whatever a device under
//! test sends back must be counted (foreign, stale, corrupted or a stream's frame), never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    tester::analyzer::fuzz_frame(data);
});
