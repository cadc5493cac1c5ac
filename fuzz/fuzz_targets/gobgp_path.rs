//! GoBGP API messages (WatchEvent) into the L3VPN service's path reader; see
//! `control::fuzzing::gobgp_path` for what is asserted.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    control::fuzzing::gobgp_path(data);
});
