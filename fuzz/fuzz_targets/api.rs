//! The runtime API's POST bodies (the first byte picks which), parsed as the server parses them
//! and checked as the core checks them; see `api_server::fuzzing::request`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    api_server::fuzzing::request(data);
});
