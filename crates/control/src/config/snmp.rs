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

#[cfg(test)]
mod tests {
    use std::path::Path;

    const BASE: &str = "ports: [ { name: p0, driver: mem } ]\ninterfaces: [ { name: p0, port: p0, mac: \"02:00:00:00:00:01\" } ]\n";

    fn parse(extra: &str) -> Result<super::super::Config, super::super::ConfigErrors> {
        super::super::parse(&format!("{BASE}{extra}"), Path::new("r.yaml"))
    }

    #[test]
    fn the_section_reads_and_its_mistakes_are_named() {
        let c = parse("snmp: { agentx: /var/agentx/master, context: lr1 }\n").unwrap();
        let s = c.snmp.unwrap();
        assert_eq!(
            (s.agentx.as_str(), s.context.as_deref()),
            ("/var/agentx/master", Some("lr1"))
        );
        assert!(parse("").unwrap().snmp.is_none());
        let e = parse("snmp: { context: lr1 }\n").unwrap_err().0;
        assert_eq!(
            (e[0].line, e[0].field.as_str()),
            (3, "snmp.agentx"),
            "{e:?}"
        );
        let long = "x".repeat(33);
        let e = parse(&format!("snmp: {{ agentx: /a, context: {long} }}\n"))
            .unwrap_err()
            .0;
        assert_eq!(e[0].field, "snmp.context", "{e:?}");
        let e = parse("snmp: { agentx: /a, community: public }\n")
            .unwrap_err()
            .0;
        assert!(e[0].field.contains("community"), "{e:?}");
    }
}
