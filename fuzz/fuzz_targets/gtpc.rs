//! GTP-C and GTP-U signalling into the GGSN's engine; see `control::fuzzing::gtpc` for the
//! framing and what is asserted after every message.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    control::fuzzing::gtpc(data);
});
