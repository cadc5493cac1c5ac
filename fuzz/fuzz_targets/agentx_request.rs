//! What an SNMP master agent may send the IF-MIB subagent as a request; see
//! `control::fuzzing::agentx_request`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    control::fuzzing::agentx_request(data);
});
