//! What a broken or hostile server leaves in a shared-memory port's file (ring indices, slot
//! lengths, frames), read and written by a client; see `dataplane::fuzzing::shm_region`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    dataplane::fuzzing::shm_region(data);
});
