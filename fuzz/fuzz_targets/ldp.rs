//! LDP PDUs (RFC 5036, RFC 4447): header, messages, TLVs and FEC elements decoded, then written
//! again and read back; see `packet::fuzzing::ldp` for what is asserted.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    packet::fuzzing::ldp(data);
});
