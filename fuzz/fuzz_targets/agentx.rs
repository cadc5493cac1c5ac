//! What an SNMP master agent answers, fed to the event manager's AgentX exchange; see
//! `control::fuzzing::agentx`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    control::fuzzing::agentx(data);
});
