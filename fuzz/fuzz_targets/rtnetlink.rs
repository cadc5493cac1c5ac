//! One rtnetlink datagram from the kernel: the link monitor's decoder (RTM_NEWLINK/DELLINK and
//! their attributes), the reader of the XDP attach's RTM_SETLINK answer and of the TAP twins'
//! RTM_NEWADDR answer; see `dataplane::fuzzing::rtnetlink` and `control::fuzzing::addr_ack`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    dataplane::fuzzing::rtnetlink(data);
    control::fuzzing::addr_ack(data);
});
