//! The one-line grammar of ACL entries and QoS match lines, in the spirit of IOS but with a
//! keyword before every value, so an entry reads the same whatever it leaves out:
//!
//! ```text
//! [SEQ] permit|deny [PROTO] [src ADDR] [sport PORTS] [dst ADDR] [dport PORTS] [dscp N]
//!       [vlan N] [cos N] [exp N] [ethertype N] [src-mac MAC] [dst-mac MAC] [established]
//!       [tcp-flags FLAG[+FLAG...]|VALUE/MASK] [fragments] [log]
//! PROTO  ip | ipv6 | tcp | udp | icmp | icmpv6 | sctp | gre | esp | ah | 0..255
//! ADDR   any | host A | A/LEN | A (a host)
//! PORTS  P | P-Q | lt P | gt P
//! ```
//!
//! QoS match lines are the same without the sequence number and action. `fragments` matches
//! later fragments only (as IOS's keyword does); an entry with ports or TCP flags never matches a
//! later fragment, which carries no L4 header. `exp` (the top label's traffic class) matches
//! labelled frames (EtherType 0x8847 unless given) and takes no IP field.

use std::net::IpAddr;

use classify::rule::{Dim, Frag};
use classify::Rule;
use packet::ethernet::MacAddr;

/// Which packets a list is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    Ipv4,
    Ipv6,
    /// Both families and L2 entries.
    Any,
}

impl Family {
    pub fn parse(s: &str) -> Option<Family> {
        match s {
            "ipv4" => Some(Family::Ipv4),
            "ipv6" => Some(Family::Ipv6),
            "any" | "mac" => Some(Family::Any),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Family::Ipv4 => "ipv4",
            Family::Ipv6 => "ipv6",
            Family::Any => "any",
        }
    }
}

/// One parsed line.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    pub seq: Option<u32>,
    /// None for QoS match lines.
    pub permit: Option<bool>,
    pub log: bool,
    pub rule: Rule,
    /// For `show acl` and log records: the protocol as written (`udp`, `ip`, ...).
    pub proto: Option<u8>,
}

/// A problem at `col` (0-based byte offset in the line).
#[derive(Debug, PartialEq, Eq)]
pub struct EntryError {
    pub col: usize,
    pub message: String,
}

fn err(col: usize, m: impl Into<String>) -> EntryError {
    EntryError {
        col,
        message: m.into(),
    }
}

/// An entry's text as `show acl` prints it beside its sequence number: the line without it.
pub fn text_without_seq(line: &str) -> String {
    let t = line.trim();
    match t.split_once(char::is_whitespace) {
        Some((first, rest)) if first.bytes().all(|b| b.is_ascii_digit()) => rest.trim().to_string(),
        _ => t.to_string(),
    }
}

pub fn proto_number(s: &str) -> Option<u8> {
    Some(match s {
        "icmp" => 1,
        "igmp" => 2,
        "tcp" => 6,
        "udp" => 17,
        "gre" => 47,
        "esp" => 50,
        "ah" => 51,
        "icmpv6" => 58,
        "ospf" => 89,
        "pim" => 103,
        "sctp" => 132,
        _ => return s.parse().ok(),
    })
}

pub fn proto_name(p: u8) -> String {
    match p {
        1 => "icmp".into(),
        2 => "igmp".into(),
        6 => "tcp".into(),
        17 => "udp".into(),
        47 => "gre".into(),
        50 => "esp".into(),
        51 => "ah".into(),
        58 => "icmpv6".into(),
        89 => "ospf".into(),
        103 => "pim".into(),
        132 => "sctp".into(),
        n => n.to_string(),
    }
}

/// Parses one entry (`with_action`: an ACL line) of a list of `family`.
pub fn parse(line: &str, family: Family, with_action: bool) -> Result<Entry, EntryError> {
    let toks: Vec<(usize, &str)> = line
        .split_whitespace()
        .map(|t| (t.as_ptr() as usize - line.as_ptr() as usize, t))
        .collect();
    let mut i = 0;
    let mut e = Entry {
        seq: None,
        permit: None,
        log: false,
        rule: Rule::any(),
        proto: None,
    };
    let end = line.len();
    if with_action {
        if let Some(&(c, t)) = toks.first() {
            if t.bytes().all(|b| b.is_ascii_digit()) {
                e.seq = Some(
                    t.parse()
                        .map_err(|_| err(c, format!("`{t}`: sequence number too large")))?,
                );
                i += 1;
            }
        }
        match toks.get(i) {
            Some(&(_, "permit")) => e.permit = Some(true),
            Some(&(_, "deny")) => e.permit = Some(false),
            Some(&(c, t)) => return Err(err(c, format!("`{t}`: expected permit or deny"))),
            None => return Err(err(end, "expected permit or deny")),
        }
        i += 1;
    }
    let mut v4 = false;
    let mut v6 = false;
    let mut has_l4 = false;
    let mut fragments = false;
    // The protocol, if the next token is one.
    if let Some(&(_, t)) = toks.get(i) {
        match t {
            "ip" => {
                v4 = true;
                i += 1;
            }
            "ipv6" => {
                v6 = true;
                i += 1;
            }
            _ => {
                if let Some(p) = proto_number(t).filter(|_| !is_keyword(t)) {
                    e.rule = e.rule.proto(p);
                    e.proto = Some(p);
                    i += 1;
                }
            }
        }
    }
    let value = |i: usize, what: &str| -> Result<(usize, &str), EntryError> {
        toks.get(i + 1).copied().ok_or_else(|| {
            err(
                end,
                format!("`{}` needs {what}", toks.get(i).map_or("", |t| t.1)),
            )
        })
    };
    while i < toks.len() {
        let (c, kw) = toks[i];
        match kw {
            "src" | "dst" => {
                let (vc, v) = value(i, "an address (any, host A, A/LEN)")?;
                let mut a = v;
                let mut ac = vc;
                if v == "host" {
                    let (hc, h) = value(i + 1, "an address")?;
                    a = h;
                    ac = hc;
                    i += 1;
                }
                i += 2;
                if a == "any" {
                    continue;
                }
                let (addr, len) = match a.split_once('/') {
                    Some((x, l)) => (x, Some(l)),
                    None => (a, None),
                };
                let ip: IpAddr = addr
                    .parse()
                    .map_err(|_| err(ac, format!("`{a}` is not an address or prefix")))?;
                let max = if ip.is_ipv4() { 32 } else { 128 };
                let len: u8 = match len {
                    Some(l) => l
                        .parse()
                        .ok()
                        .filter(|&l: &u8| l <= max)
                        .ok_or_else(|| err(ac, format!("`{a}`: prefix length 0..={max}")))?,
                    None => max,
                };
                let src = kw == "src";
                e.rule = match ip {
                    IpAddr::V4(x) => {
                        v4 = true;
                        let x = u32::from(x);
                        if src {
                            e.rule.src_v4(x, len)
                        } else {
                            e.rule.dst_v4(x, len)
                        }
                    }
                    IpAddr::V6(x) => {
                        v6 = true;
                        let x = u128::from(x);
                        if src {
                            e.rule.src_v6(x, len)
                        } else {
                            e.rule.dst_v6(x, len)
                        }
                    }
                };
            }
            "sport" | "dport" => {
                let (vc, v) = value(i, "a port, P-Q, lt P or gt P")?;
                let port = |s: &str, c: usize| -> Result<u16, EntryError> {
                    s.parse()
                        .map_err(|_| err(c, format!("`{s}` is not a port (0..65535)")))
                };
                let (lo, hi) = match v {
                    "lt" | "gt" => {
                        let (pc, p) = value(i + 1, "a port")?;
                        i += 1;
                        let p = port(p, pc)?;
                        match (v, p) {
                            ("lt", 0) => return Err(err(pc, "nothing is less than port 0")),
                            ("lt", p) => (0, p - 1),
                            (_, 65535) => return Err(err(pc, "nothing is above port 65535")),
                            (_, p) => (p + 1, 65535),
                        }
                    }
                    _ => match v.split_once('-') {
                        Some((a, b)) => {
                            let (a, b) = (port(a, vc)?, port(b, vc)?);
                            if a > b {
                                return Err(err(vc, format!("`{v}`: empty range")));
                            }
                            (a, b)
                        }
                        None => {
                            let p = port(v, vc)?;
                            (p, p)
                        }
                    },
                };
                has_l4 = true;
                e.rule = if kw == "sport" {
                    e.rule.src_ports(lo, hi)
                } else {
                    e.rule.dst_ports(lo, hi)
                };
                i += 2;
            }
            "dscp" | "vlan" | "cos" | "exp" | "ethertype" => {
                let (vc, v) = value(i, "a number")?;
                let n = parse_num(v).ok_or_else(|| err(vc, format!("`{v}` is not a number")))?;
                let (d, max) = match kw {
                    "dscp" => (Dim::Dscp, 63),
                    "vlan" => (Dim::Vlan, 4095),
                    "cos" => (Dim::Pcp, 7),
                    "exp" => (Dim::Exp, 7),
                    _ => (Dim::EtherType, 0xffff),
                };
                if n > max {
                    return Err(err(vc, format!("`{v}`: {kw} is 0..={max}")));
                }
                e.rule = e.rule.exact(d, n);
                i += 2;
            }
            "src-mac" | "dst-mac" => {
                let (vc, v) = value(i, "a MAC address")?;
                let m: MacAddr = v
                    .parse()
                    .map_err(|_| err(vc, format!("`{v}` is not a MAC address")))?;
                e.rule = if kw == "src-mac" {
                    e.rule.eth_src(m.0)
                } else {
                    e.rule.eth_dst(m.0)
                };
                i += 2;
            }
            "established" => {
                // ACK set: every segment of a connection but the opening SYN carries it.
                e.rule = e.rule.tcp_flags(0x10, 0x10);
                has_l4 = true;
                i += 1;
            }
            "tcp-flags" => {
                let (vc, v) = value(i, "flags (syn+ack) or VALUE/MASK")?;
                let (val, mask) = tcp_flags(v).ok_or_else(|| {
                    err(
                        vc,
                        format!("`{v}`: flags are fin syn rst psh ack urg ece cwr joined by +, or VALUE/MASK"),
                    )
                })?;
                e.rule = e.rule.tcp_flags(val, mask);
                has_l4 = true;
                i += 2;
            }
            "fragments" => {
                fragments = true;
                e.rule = e.rule.exact(Dim::Frag, Frag::LATER);
                i += 1;
            }
            "log" if with_action => {
                e.log = true;
                i += 1;
            }
            _ => return Err(err(c, format!("unknown keyword `{kw}`"))),
        }
    }
    if fragments && has_l4 {
        return Err(err(
            0,
            "`fragments` matches later fragments, which have no ports or TCP flags",
        ));
    }
    if has_l4 {
        e.rule = e.rule.with(Dim::Frag, Frag::NONE, Frag::FIRST);
        if e.proto.is_none() {
            return Err(err(
                0,
                "ports and TCP flags need a protocol (tcp, udp, sctp)",
            ));
        }
    }
    if e.rule.tcp_flags.is_some() && e.proto != Some(6) {
        return Err(err(0, "TCP flags need protocol tcp"));
    }
    if v4 && v6 {
        return Err(err(0, "an entry is IPv4 or IPv6, not both"));
    }
    if !e.rule.is_wild(Dim::Exp) {
        // A labelled frame's key has its L2 header and its top label's EXP, no IP fields.
        if family != Family::Any {
            return Err(err(
                0,
                "`exp` matches labelled frames: a list of family any only",
            ));
        }
        if v4 || v6 || e.proto.is_some() || !e.rule.is_wild(Dim::Dscp) || fragments {
            return Err(err(
                0,
                "`exp` matches labelled frames, which have no IP fields to match",
            ));
        }
        if e.rule.is_wild(Dim::EtherType) {
            e.rule = e.rule.exact(Dim::EtherType, 0x8847);
        }
    }
    match family {
        Family::Ipv4 if v6 => return Err(err(0, "an IPv6 address in an IPv4 list")),
        Family::Ipv6 if v4 => return Err(err(0, "an IPv4 address in an IPv6 list")),
        Family::Ipv4 => e.rule = e.rule.ipv4(),
        Family::Ipv6 => e.rule = e.rule.ipv6(),
        Family::Any if v4 => e.rule = e.rule.ipv4(),
        Family::Any if v6 => e.rule = e.rule.ipv6(),
        Family::Any => {}
    }
    Ok(e)
}

fn is_keyword(t: &str) -> bool {
    matches!(
        t,
        "src"
            | "dst"
            | "sport"
            | "dport"
            | "dscp"
            | "vlan"
            | "cos"
            | "exp"
            | "ethertype"
            | "src-mac"
            | "dst-mac"
            | "established"
            | "tcp-flags"
            | "fragments"
            | "log"
    )
}

fn parse_num(s: &str) -> Option<u32> {
    match s.strip_prefix("0x") {
        Some(h) => u32::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

fn tcp_flags(s: &str) -> Option<(u8, u8)> {
    if let Some((v, m)) = s.split_once('/') {
        let v = parse_num(v)?;
        let m = parse_num(m)?;
        return (v <= 0xff && m <= 0xff).then_some((v as u8, m as u8));
    }
    let mut v = 0u8;
    for f in s.split('+') {
        v |= match f {
            "fin" => 0x01,
            "syn" => 0x02,
            "rst" => 0x04,
            "psh" => 0x08,
            "ack" => 0x10,
            "urg" => 0x20,
            "ece" => 0x40,
            "cwr" => 0x80,
            _ => return None,
        };
    }
    Some((v, v))
}

#[cfg(test)]
mod tests {
    use super::*;
    use classify::rule::{ETHERTYPE_IPV4, ETHERTYPE_IPV6};

    #[test]
    fn the_xr5_entry() {
        let e = parse(
            "50000 deny udp src host 140.0.0.1 sport 1024 dst 141.100.0.1 dport 5000 log",
            Family::Ipv4,
            true,
        )
        .unwrap();
        assert_eq!(
            (e.seq, e.permit, e.log, e.proto),
            (Some(50000), Some(false), true, Some(17))
        );
        let r = e.rule;
        assert_eq!(r.range(Dim::Src0), (0x8c00_0001, 0x8c00_0001));
        assert_eq!(r.range(Dim::Dst0), (0x8d64_0001, 0x8d64_0001));
        assert_eq!(r.range(Dim::SrcPort), (1024, 1024));
        assert_eq!(r.range(Dim::DstPort), (5000, 5000));
        assert_eq!(r.range(Dim::EtherType), (ETHERTYPE_IPV4, ETHERTYPE_IPV4));
        assert_eq!(r.range(Dim::Frag), (0, 1));
    }

    #[test]
    fn shown_text_leaves_the_sequence_number_out() {
        assert_eq!(
            text_without_seq(" 10 deny tcp dport 23 log"),
            "deny tcp dport 23 log"
        );
        assert_eq!(text_without_seq("permit"), "permit");
        assert_eq!(text_without_seq("20  permit udp "), "permit udp");
    }

    #[test]
    fn permit_alone_is_permit_all_of_the_family() {
        let e = parse("permit", Family::Ipv6, true).unwrap();
        assert_eq!(e.permit, Some(true));
        assert_eq!(e.rule, Rule::any().ipv6());
        assert_eq!(
            parse("permit", Family::Any, true).unwrap().rule,
            Rule::any()
        );
    }

    #[test]
    fn exp_matches_labelled_frames_only() {
        let e = parse("exp 5", Family::Any, false).unwrap();
        assert_eq!(e.rule.range(Dim::Exp), (5, 5));
        assert_eq!(e.rule.range(Dim::EtherType), (0x8847, 0x8847));
        let e = parse("exp 1 ethertype 0x8848", Family::Any, false).unwrap();
        assert_eq!(e.rule.range(Dim::EtherType), (0x8848, 0x8848));
        for (line, fam, why) in [
            ("exp 8", Family::Any, "0..=7"),
            ("exp 3", Family::Ipv4, "family any"),
            ("udp exp 3", Family::Any, "no IP fields"),
            ("exp 3 dscp 4", Family::Any, "no IP fields"),
            ("exp 3 src 10.0.0.0/8", Family::Any, "no IP fields"),
        ] {
            let e = parse(line, fam, false).unwrap_err();
            assert!(e.message.contains(why), "{line}: {}", e.message);
        }
    }

    #[test]
    fn qos_lines_and_l2_entries() {
        let e = parse("udp dport 5060-5061 dscp 46", Family::Ipv4, false).unwrap();
        assert_eq!(e.rule.range(Dim::DstPort), (5060, 5061));
        assert_eq!(e.rule.range(Dim::Dscp), (46, 46));
        let e = parse(
            "deny src-mac 02:00:00:00:00:09 ethertype 0x88cc vlan 100 cos 5",
            Family::Any,
            true,
        )
        .unwrap();
        assert_eq!(e.rule.range(Dim::EtherType), (0x88cc, 0x88cc));
        assert_eq!(e.rule.range(Dim::Vlan), (100, 100));
        assert_eq!(e.rule.range(Dim::Pcp), (5, 5));
        assert_eq!(e.rule.range(Dim::EthSrcLo), (9, 9));
        let e = parse(
            "permit tcp dst 2001:db8::/32 dport gt 1023 established",
            Family::Any,
            true,
        )
        .unwrap();
        assert_eq!(
            e.rule.range(Dim::EtherType),
            (ETHERTYPE_IPV6, ETHERTYPE_IPV6)
        );
        assert_eq!(e.rule.range(Dim::DstPort), (1024, 65535));
        assert_eq!(e.rule.tcp_flags, Some((0x10, 0x10)));
    }

    #[test]
    fn mistakes_point_at_the_token() {
        let bad = |s: &str| parse(s, Family::Ipv4, true).unwrap_err();
        assert_eq!(bad("permit udp dport 70000").col, 17);
        assert_eq!(bad("allow").col, 0);
        assert!(bad("deny src 2001:db8::1")
            .message
            .contains("IPv6 address in an IPv4"));
        assert!(bad("deny dport 80").message.contains("need a protocol"));
        assert!(bad("deny udp dport 80 fragments")
            .message
            .contains("later fragments"));
        assert_eq!(bad("deny udp src 10.0.0.0/33").col, 13);
        assert!(bad("deny udp src").message.contains("needs"));
        assert!(bad("deny udp bogus")
            .message
            .contains("unknown keyword `bogus`"));
        assert!(bad("deny udp tcp-flags syn")
            .message
            .contains("protocol tcp"));
    }
}
