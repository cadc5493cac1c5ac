//! GTPv1 (GTP-C and GTP-U UDP payloads): header and extension-header walk, IE walk, the IE
//! decoders and the message builder; see `packet::fuzzing::gtp` for what is asserted.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    packet::fuzzing::gtp(data);
});
