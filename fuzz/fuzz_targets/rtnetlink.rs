//! One rtnetlink datagram from the kernel: the link monitor's decoder (RTM_NEWLINK/DELLINK and
//! their attributes), the reader of the XDP attach's RTM_SETLINK answer and of the TAP twins'
//! RTM_NEWADDR answer, the multicast route mirror's MFC entries; see
//! `dataplane::fuzzing::rtnetlink`, `control::fuzzing::addr_ack` and `control::fuzzing::mfc`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    dataplane::fuzzing::rtnetlink(data);
    control::fuzzing::addr_ack(data);
    control::fuzzing::mfc(data);
});
