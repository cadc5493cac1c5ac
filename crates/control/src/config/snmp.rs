//! The `snmp` section: the router serves IF-MIB (its ports, their state and counters) through
//! net-snmp's snmpd as an AgentX subagent, in an SNMP context of its own if given (a logical
//! router's name: one snmpd serves every LR, each LR's interfaces in its context).
//!
//! ```yaml
//! snmp: { agentx: /var/agentx/master, context: lr1 }   # agentx: a Unix socket or tcp:HOST:PORT
//! ```

use super::fields::{Errs, Fields};
use super::Config;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnmpCfg {
    /// snmpd's AgentX socket: a path (`unix:` optional) or `tcp:HOST:PORT`.
    pub agentx: String,
    /// The SNMP context the subagent registers in (None: the default context).
    pub context: Option<String>,
}

pub(super) fn parse(top: &mut Fields<'_>, e: &mut Errs, cfg: &mut Config) {
    let Some(n) = top.get("snmp") else { return };
    let Some(mut f) = Fields::new("snmp".into(), n, e) else {
        return;
    };
    let agentx = f.required("agentx", e);
    let context = f.str("context", e);
    if let Some(c) = &context {
        // An SNMPv3 context name is an octet string of at most 32 (RFC 3411 snmpAdminString).
        if c.is_empty() || c.len() > 32 {
            e.at(n, "snmp.context", "a context name has 1 to 32 characters");
        }
    }
    f.finish(e);
    if let Some(agentx) = agentx {
        cfg.snmp = Some(SnmpCfg { agentx, context });
    }
}
