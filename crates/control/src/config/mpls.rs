//! `mpls`: label switching on the router's interfaces, static label table entries, and
//! pseudowires: static ones (both labels configured, as `xconnect ... encapsulation manual`
//! does) and ones whose labels LDP signals (no `remote-label`; RFC 4447 PWid FEC over a
//! targeted session to the peer).
//!
//! ```yaml
//! mpls:
//!   interfaces: [core0, core1]     # take labelled frames (EtherType 0x8847)
//!   ttl: uniform                   # uniform (default) or pipe (RFC 3443)
//!   labels:                        # incoming label -> what to do
//!     - { in: 100, out: [200], via: 10.0.0.2 }         # swap
//!     - { in: 101, out: pop, via: 10.0.0.2 }           # pop (penultimate hop)
//!     - { in: 102, out: [200, 300], via: [10.0.0.2, 10.0.1.2] }  # swap and push, ECMP
//!     - { in: 103, lookup: cust-a }                    # pop, look the packet up in a VRF
//!   pseudowires:
//!     - name: pw-100
//!       interface: ac0.100         # the attachment circuit: a VLAN sub-interface or a port
//!       type: vlan                 # vlan (VC type 4, default on a sub-interface) or
//!                                  # ethernet (type 5, default on a port)
//!       peer: 10.9.0.2             # the far PE
//!       vc-id: 100
//!       local-label: 1000          # the peer sends the pseudowire's frames with this label
//!       remote-label: 2000         # ...and takes them with this one
//!       transport: [300]           # labels to reach the peer (none: it is the next hop)
//!       via: 10.0.0.2              # the next hop towards the peer (without `via` and
//!                                  # `transport`: the route to the peer, an LDP-labelled
//!                                  # one's label as the transport label, followed as it
//!                                  # changes)
//!       control-word: true         # RFC 4385 (default false)
//!     - { name: pw-200, interface: ac0.200, peer: 10.9.0.2, vc-id: 200, via: 10.0.0.2 }
//!                                  # signalled by LDP: the local label allocated (16 up,
//!                                  # past every configured one) unless given
//!     - { name: pw-300, interface: ac0.300, peer: 10.9.0.2, vc-id: 300, local-label: 1002,
//!         remote-label: 2002, lsp: to-pe2 }   # over a protected LSP instead of via/transport
//!   lsps:                          # label-switched paths configured here (the place of
//!                                  # RSVP-TE, which has no open peer to signal with)
//!     - name: to-pe2
//!       primary: { via: 10.0.0.2, labels: [300] }  # next hop, then the path's labels
//!       backup: { via: 10.0.1.2, labels: [400] }   # pre-installed, through another interface;
//!                                                  # carries the LSP while the primary's is down
//!   ldp:                           # the LDP speaker (needed by signalled pseudowires)
//!     router-id: 10.0.0.1          # LSR id; an address of an interface (default VRF)
//!     transport-address: 10.0.0.1  # the session's TCP address (default: the router id)
//!     hello-interval-ms: 5000      # targeted hellos (default 5000)
//!     hold-time: 45                # targeted hello hold time, seconds (default 45)
//!     keepalive: 180               # session keepalive hold time, seconds (default 180)
//!     neighbors: [10.9.0.3]        # targeted neighbours besides the pseudowires' peers
//!     interfaces: [core0, core1]   # basic discovery: link hellos to 224.0.0.2 on these
//!     link-hello-interval-ms: 5000 # (default 5000)
//!     link-hold-time: 15           # link hello hold time, seconds (default 15)
//!     label-range: [16000, 99999]  # labels for prefix FECs (the default); configured labels
//!                                  # must stay out of it
//! ```
//!
//! With `ldp`, each IPv4 route of VRF `default` with a next hop is a prefix FEC: LDP gives it a
//! label from `label-range` and advertises it (downstream unsolicited, ordered control), and
//! the labels the next hops' peers advertise become the label table's swaps and the labels
//! pushed on the route (`crates/control/src/ldp/fec.rs`).
//!
//! Static routes take `labels: [..]` beside `via` (a route over an LSP, or an L3VPN route: the
//! VPN label under the transport labels).
//!
//! Besides each value's own syntax, `check` refuses: a label below 16 or above 1,048,575 as an
//! incoming label, a label used twice (by the table or a pseudowire), more than four labels to
//! push, a `via` that is not on a connected subnet of an Ethernet interface, an unknown VRF or
//! interface, an attachment circuit that has addresses, is a bridge member, or carries two
//! pseudowires, type `vlan` on an interface without a VLAN, an LSP named twice or not defined,
//! a pseudowire with both `lsp` and `via`/`transport`, a backup that leaves by the primary's
//! interface (it would protect nothing against that link's failure).

use std::net::{IpAddr, Ipv4Addr};

use super::fields::{origin_at, seq, Errs, Fields};
use super::Origin;
use dataplane::mpls::{TtlMode, FIRST_UNRESERVED, MAX_LABEL, MAX_LABELS};

#[derive(Clone, Debug, PartialEq)]
pub struct MplsCfg {
    pub interfaces: Vec<(String, Origin)>,
    pub ttl: TtlMode,
    pub labels: Vec<LabelCfg>,
    pub pseudowires: Vec<PseudowireCfg>,
    pub ldp: Option<LdpCfg>,
    pub lsps: Vec<LspCfg>,
}

/// A label-switched path to a far router, configured (`mpls.lsps`): pseudowires name it instead
/// of a next hop and transport labels, and all of them move to its backup together.
#[derive(Clone, Debug, PartialEq)]
pub struct LspCfg {
    pub name: String,
    pub primary: LspPath,
    pub backup: Option<LspPath>,
    pub origin: Origin,
}

/// One way along an LSP: the neighbour and the labels it takes (outermost first; none when the
/// neighbour is the far end).
#[derive(Clone, Debug, PartialEq)]
pub struct LspPath {
    pub via: IpAddr,
    pub labels: Vec<u32>,
}

/// The LDP speaker's settings (`mpls.ldp`).
#[derive(Clone, Debug, PartialEq)]
pub struct LdpCfg {
    pub router_id: Ipv4Addr,
    pub transport: Ipv4Addr,
    pub hello_interval_ms: u64,
    pub hold_time: u16,
    pub keepalive: u16,
    /// Targeted neighbours configured besides the pseudowires' peers.
    pub neighbors: Vec<Ipv4Addr>,
    /// Interfaces with basic discovery: link hellos to 224.0.0.2 (RFC 5036 2.4.1).
    pub interfaces: Vec<(String, Origin)>,
    /// Link hellos' interval and proposed hold time (seconds).
    pub link_hello_interval_ms: u64,
    pub link_hold_time: u16,
    /// The labels LDP gives prefix FECs, lowest first; no configured label may be in it.
    pub label_range: (u32, u32),
    pub origin: Origin,
}

/// The labels LDP allocates to prefix FECs unless `label-range` says otherwise: above the
/// ones configured and pseudowires take from 16 up, as a router's dynamic range sits apart
/// from its static one.
pub const LDP_LABEL_RANGE: (u32, u32) = (16_000, 99_999);

/// What an incoming label does.
#[derive(Clone, Debug, PartialEq)]
pub enum LabelOp {
    /// Pop it and push these (none: pop), to these next hops.
    Forward { out: Vec<u32>, via: Vec<IpAddr> },
    /// Pop it and look the packet under it up in this VRF.
    Lookup { vrf: String },
}

#[derive(Clone, Debug, PartialEq)]
pub struct LabelCfg {
    pub label: u32,
    pub op: LabelOp,
    pub origin: Origin,
}

#[derive(Clone, Debug, PartialEq)]
pub struct PseudowireCfg {
    pub name: String,
    pub interface: String,
    /// None: by the interface (a sub-interface's is VLAN, a port's Ethernet).
    pub vc_type: Option<dataplane::mpls::VcType>,
    pub peer: IpAddr,
    pub vc_id: u32,
    /// Given, or allocated for a signalled pseudowire that names none.
    pub local_label: u32,
    /// None: signalled by LDP.
    pub remote_label: Option<u32>,
    pub transport: Vec<u32>,
    /// The next hop towards the peer (over an LSP: its primary's). None: the way is the
    /// default VRF's route to the peer, followed as it changes (an LDP-labelled route's label
    /// is the transport label).
    pub via: Option<IpAddr>,
    /// Carried by this LSP (`mpls.lsps`) instead of `via` and `transport`.
    pub lsp: Option<String>,
    pub control_word: bool,
    pub origin: Origin,
}

/// A label as a config value: a number within 20 bits.
fn label(s: &str, n: &crate::yaml::Node, field: &str, e: &mut Errs) -> Option<u32> {
    match s.parse::<u32>() {
        Ok(l) if l <= MAX_LABEL => Some(l),
        _ => {
            e.at(
                n,
                field,
                format!("`{s}` is not a label (a number from 0 to {MAX_LABEL})"),
            );
            None
        }
    }
}

/// Labels to push: a list of at most [`MAX_LABELS`].
fn push_list(f: &mut Fields<'_>, key: &'static str, e: &mut Errs) -> Vec<u32> {
    let at = f.node(key);
    let mut out = Vec::new();
    for (s, n, path) in f.list(key, e) {
        if let Some(l) = label(&s, n, &path, e) {
            out.push(l);
        }
    }
    if out.len() > MAX_LABELS {
        if let Some(n) = at {
            e.at(
                n,
                &f.field(key),
                format!("at most {MAX_LABELS} labels are pushed"),
            );
        }
    }
    out
}

fn incoming(f: &mut Fields<'_>, key: &'static str, e: &mut Errs) -> Option<u32> {
    let n = f.node(key);
    let s = f.required(key, e)?;
    let l = label(&s, n?, &f.field(key), e)?;
    if l < FIRST_UNRESERVED {
        e.at(
            n?,
            &f.field(key),
            format!("label {l} is reserved (0-15); incoming labels start at 16"),
        );
        return None;
    }
    Some(l)
}

fn addrs(f: &mut Fields<'_>, key: &'static str, e: &mut Errs) -> Vec<IpAddr> {
    let mut out = Vec::new();
    for (s, n, path) in f.list(key, e) {
        match s.parse::<IpAddr>() {
            Ok(a) => out.push(a),
            Err(_) => e.at(n, &path, format!("`{s}` is not an IP address")),
        }
    }
    out
}

pub(super) fn parse(top: &mut Fields<'_>, e: &mut Errs) -> Option<MplsCfg> {
    let n = top.get("mpls")?;
    let mut f = Fields::new("mpls".into(), n, e)?;
    let interfaces = f
        .list("interfaces", e)
        .into_iter()
        .map(|(s, n, path)| (s, origin_at(n, &path)))
        .collect();
    let ttl = match f.str("ttl", e).as_deref() {
        None | Some("uniform") => TtlMode::Uniform,
        Some("pipe") => TtlMode::Pipe,
        Some(other) => {
            let at = f.node("ttl").unwrap_or(n);
            e.at(
                at,
                "mpls.ttl",
                format!("`{other}` is not a TTL mode (uniform or pipe)"),
            );
            TtlMode::Uniform
        }
    };
    let mut labels = Vec::new();
    for (ln, path) in seq(&mut f, "labels", e) {
        let Some(mut lf) = Fields::new(path.clone(), ln, e) else {
            continue;
        };
        let origin = lf.origin();
        let l = incoming(&mut lf, "in", e);
        let lookup = lf.str("lookup", e);
        let pop = lf
            .node("out")
            .is_some_and(|o| matches!(&o.value, crate::yaml::Value::Scalar(s) if s == "pop"));
        let out = if pop {
            lf.get("out");
            Vec::new()
        } else {
            push_list(&mut lf, "out", e)
        };
        let has_out = lf.node("out").is_some();
        let via = addrs(&mut lf, "via", e);
        lf.finish(e);
        let op = match (lookup, has_out) {
            (Some(vrf), false) if via.is_empty() => Some(LabelOp::Lookup { vrf }),
            (None, true) if !via.is_empty() => Some(LabelOp::Forward { out, via }),
            (None, true) => {
                e.at(ln, &path, "a label with `out` needs `via` (its next hops)");
                None
            }
            (None, false) => {
                e.at(
                    ln,
                    &path,
                    "a label needs `out` (labels or `pop`) with `via`, or `lookup: VRF`",
                );
                None
            }
            _ => {
                e.at(
                    ln,
                    &path,
                    "`lookup` excludes `out` and `via` (the packet is looked up, not sent on)",
                );
                None
            }
        };
        if let (Some(label), Some(op)) = (l, op) {
            labels.push(LabelCfg { label, op, origin });
        }
    }
    let lsps = parse_lsps(&mut f, e);
    let mut pseudowires = Vec::new();
    for (pn, path) in seq(&mut f, "pseudowires", e) {
        let Some(mut pf) = Fields::new(path.clone(), pn, e) else {
            continue;
        };
        let origin = pf.origin();
        let name = pf.required("name", e);
        let interface = pf.required("interface", e);
        let vc_type = match pf.str("type", e).as_deref() {
            None => None,
            Some("vlan") => Some(dataplane::mpls::VcType::Vlan),
            Some("ethernet") => Some(dataplane::mpls::VcType::Ethernet),
            Some(other) => {
                let at = pf.node("type").unwrap_or(pn);
                e.at(
                    at,
                    &format!("{path}.type"),
                    format!("`{other}` is not a pseudowire type (vlan or ethernet)"),
                );
                None
            }
        };
        let peer = pf.parse::<IpAddr>("peer", "an IP address", e);
        if pf.node("peer").is_none() {
            e.at(pn, &format!("{path}.peer"), "`peer` is required");
        }
        let vc_id = pf.parse::<u32>("vc-id", "a number", e);
        if pf.node("vc-id").is_none() {
            e.at(pn, &format!("{path}.vc-id"), "`vc-id` is required");
        }
        let remote_at = pf.node("remote-label");
        let remote_label = pf
            .str("remote-label", e)
            .and_then(|s| label(&s, remote_at?, &format!("{path}.remote-label"), e));
        // A static pseudowire needs both labels; a signalled one may leave its own to the
        // allocator (0 until `parse` fills it in).
        let local_label = if remote_at.is_none() && pf.node("local-label").is_none() {
            Some(0)
        } else {
            incoming(&mut pf, "local-label", e)
        };
        let transport = push_list(&mut pf, "transport", e);
        if transport.len() + 1 > MAX_LABELS {
            e.at(
                pn,
                &format!("{path}.transport"),
                format!(
                    "at most {} transport labels (the pseudowire's own makes {MAX_LABELS})",
                    MAX_LABELS - 1
                ),
            );
        }
        let lsp_name = pf.str("lsp", e);
        let mut via = pf.parse::<IpAddr>("via", "an IP address", e);
        match &lsp_name {
            Some(l) => {
                if pf.node("via").is_some() || pf.node("transport").is_some() {
                    e.at(
                        pn,
                        &format!("{path}.lsp"),
                        "`lsp` carries the pseudowire: leave out `via` and `transport`",
                    );
                }
                match lsps.iter().find(|x| &x.name == l) {
                    Some(x) => via = Some(x.primary.via),
                    None => {
                        let at = pf.node("lsp").unwrap_or(pn);
                        e.at(
                            at,
                            &format!("{path}.lsp"),
                            format!("no LSP named `{l}` under `mpls.lsps`"),
                        );
                    }
                }
            }
            None if pf.node("via").is_none() && !transport.is_empty() => e.at(
                pn,
                &format!("{path}.transport"),
                "`transport` goes with `via` (without both, the way to the peer is the route to it)",
            ),
            None => {}
        }
        let control_word = pf
            .parse::<bool>("control-word", "true or false", e)
            .unwrap_or(false);
        pf.finish(e);
        if let (Some(name), Some(interface), Some(peer), Some(vc_id), Some(local_label)) =
            (name, interface, peer, vc_id, local_label)
        {
            pseudowires.push(PseudowireCfg {
                name,
                interface,
                vc_type,
                peer,
                vc_id,
                local_label,
                remote_label,
                transport,
                via,
                lsp: lsp_name,
                control_word,
                origin,
            });
        }
    }
    let ldp = parse_ldp(&mut f, e);
    f.finish(e);
    allocate_local_labels(&labels, &mut pseudowires);
    Some(MplsCfg {
        interfaces,
        ttl,
        labels,
        pseudowires,
        ldp,
        lsps,
    })
}

/// `mpls.lsps`: each with a name, a primary path and an optional backup.
fn parse_lsps(f: &mut Fields<'_>, e: &mut Errs) -> Vec<LspCfg> {
    let mut out: Vec<LspCfg> = Vec::new();
    for (ln, path) in seq(f, "lsps", e) {
        let Some(mut lf) = Fields::new(path.clone(), ln, e) else {
            continue;
        };
        let origin = lf.origin();
        let name = lf.required("name", e);
        let way = |lf: &mut Fields<'_>, key: &'static str, e: &mut Errs| {
            let n = lf.get(key)?;
            let mut wf = Fields::new(format!("{path}.{key}"), n, e)?;
            let via = wf.parse::<IpAddr>("via", "an IP address", e);
            if wf.node("via").is_none() {
                e.at(n, &format!("{path}.{key}.via"), "`via` is required");
            }
            let labels = push_list(&mut wf, "labels", e);
            if labels.len() + 1 > MAX_LABELS {
                e.at(
                    n,
                    &format!("{path}.{key}.labels"),
                    format!(
                        "at most {} labels (a pseudowire's own makes {MAX_LABELS})",
                        MAX_LABELS - 1
                    ),
                );
            }
            wf.finish(e);
            Some(LspPath { via: via?, labels })
        };
        let primary = way(&mut lf, "primary", e);
        if lf.node("primary").is_none() {
            e.at(ln, &format!("{path}.primary"), "`primary` is required");
        }
        let backup = way(&mut lf, "backup", e);
        lf.finish(e);
        let (Some(name), Some(primary)) = (name, primary) else {
            continue;
        };
        if out.iter().any(|l| l.name == name) {
            e.at(
                ln,
                &format!("{path}.name"),
                format!("LSP `{name}` is named twice"),
            );
            continue;
        }
        out.push(LspCfg {
            name,
            primary,
            backup,
            origin,
        });
    }
    out
}

/// Gives each signalled pseudowire without a local label the lowest unused one from 16 up, in
/// config order (the same config always gets the same labels).
fn allocate_local_labels(labels: &[LabelCfg], pws: &mut [PseudowireCfg]) {
    let mut used: std::collections::HashSet<u32> = labels.iter().map(|l| l.label).collect();
    used.extend(pws.iter().map(|p| p.local_label).filter(|&l| l != 0));
    let mut next = FIRST_UNRESERVED;
    for p in pws.iter_mut().filter(|p| p.local_label == 0) {
        while used.contains(&next) {
            next += 1;
        }
        p.local_label = next;
        used.insert(next);
    }
}

fn parse_ldp(f: &mut Fields<'_>, e: &mut Errs) -> Option<LdpCfg> {
    let n = f.get("ldp")?;
    let mut lf = Fields::new("mpls.ldp".into(), n, e)?;
    let origin = lf.origin();
    let router_id = lf.parse::<Ipv4Addr>("router-id", "an IPv4 address", e);
    if lf.node("router-id").is_none() {
        e.at(n, "mpls.ldp.router-id", "`router-id` is required");
    }
    let transport = lf.parse::<Ipv4Addr>("transport-address", "an IPv4 address", e);
    let hello_interval_ms = lf
        .parse::<u64>("hello-interval-ms", "a number of milliseconds", e)
        .unwrap_or(5000);
    let hold_time = lf
        .parse::<u16>("hold-time", "a number of seconds (1 to 65535)", e)
        .unwrap_or(45);
    let keepalive = lf
        .parse::<u16>("keepalive", "a number of seconds (1 to 65535)", e)
        .unwrap_or(180);
    let mut neighbors = Vec::new();
    for (s, node, path) in lf.list("neighbors", e) {
        match s.parse::<Ipv4Addr>() {
            Ok(a) => neighbors.push(a),
            Err(_) => e.at(node, &path, format!("`{s}` is not an IPv4 address")),
        }
    }
    let interfaces = lf
        .list("interfaces", e)
        .into_iter()
        .map(|(s, n, path)| (s, origin_at(n, &path)))
        .collect();
    let link_hello_interval_ms = lf
        .parse::<u64>("link-hello-interval-ms", "a number of milliseconds", e)
        .unwrap_or(5000);
    let link_hold_time = lf
        .parse::<u16>("link-hold-time", "a number of seconds (1 to 65535)", e)
        .unwrap_or(15);
    let mut label_range = LDP_LABEL_RANGE;
    if let Some(r) = lf.node("label-range") {
        let l = lf.list("label-range", e);
        let v: Vec<Option<u32>> = l.iter().map(|(s, _, _)| s.parse::<u32>().ok()).collect();
        match v.as_slice() {
            [Some(a), Some(b)] if *a >= FIRST_UNRESERVED && a <= b && *b <= MAX_LABEL => {
                label_range = (*a, *b)
            }
            _ => e.at(
                r,
                "mpls.ldp.label-range",
                format!("`[from, to]` with {FIRST_UNRESERVED} <= from <= to <= {MAX_LABEL}"),
            ),
        }
    }
    let nodes: Vec<(&str, Option<&crate::yaml::Node>)> = [
        "hello-interval-ms",
        "hold-time",
        "keepalive",
        "link-hello-interval-ms",
        "link-hold-time",
    ]
    .into_iter()
    .map(|k| (k, lf.node(k)))
    .collect();
    lf.finish(e);
    for ((key, at), bad) in nodes.into_iter().zip([
        hello_interval_ms == 0,
        hold_time == 0,
        keepalive == 0,
        link_hello_interval_ms == 0,
        link_hold_time == 0,
    ]) {
        if bad {
            e.at(
                at.unwrap_or(n),
                &format!("mpls.ldp.{key}"),
                "must be above 0",
            );
        }
    }
    if hold_time != 0 && hello_interval_ms >= u64::from(hold_time) * 1000 {
        e.at(
            n,
            "mpls.ldp.hello-interval-ms",
            format!("hellos every {hello_interval_ms} ms never beat a hold time of {hold_time} s"),
        );
    }
    if link_hold_time != 0 && link_hello_interval_ms >= u64::from(link_hold_time) * 1000 {
        e.at(
            n,
            "mpls.ldp.link-hello-interval-ms",
            format!(
                "hellos every {link_hello_interval_ms} ms never beat a hold time of {link_hold_time} s"
            ),
        );
    }
    let router_id = router_id?;
    Some(LdpCfg {
        router_id,
        transport: transport.unwrap_or(router_id),
        hello_interval_ms,
        hold_time,
        keepalive,
        neighbors,
        interfaces,
        link_hello_interval_ms,
        link_hold_time,
        label_range,
        origin,
    })
}

/// The checks against the rest of the config.
pub(super) fn cross_check(cfg: &super::Config, e: &mut Errs) {
    let Some(m) = &cfg.mpls else {
        return;
    };
    let ifc = |name: &str| cfg.interfaces.iter().find(|i| i.name == name);
    for (name, o) in &m.interfaces {
        match ifc(name) {
            None => e.origin(o, format!("no interface named `{name}`")),
            Some(i) if i.atm.is_some() || i.bvi.is_some() => e.origin(
                o,
                format!("interface `{name}`: MPLS is carried on Ethernet interfaces only"),
            ),
            Some(_) => {}
        }
    }
    // Every incoming label once, whoever owns it.
    let mut seen: std::collections::HashMap<u32, Origin> = Default::default();
    let ldp_range = m.ldp.as_ref().map(|l| l.label_range);
    let mut claim = |l: u32, at: &Origin, e: &mut Errs| match seen.get(&l) {
        _ if ldp_range.is_some_and(|(a, b)| (a..=b).contains(&l)) => {
            let (a, b) = ldp_range.unwrap_or_default();
            e.origin(
                at,
                format!("label {l} is in LDP's label range ({a}-{b}, `mpls.ldp.label-range`)"),
            )
        }
        Some(first) => e.origin(
            at,
            format!(
                "label {l} is already used (line {}, `{}`)",
                first.line, first.field
            ),
        ),
        None => {
            seen.insert(l, at.clone());
        }
    };
    for l in &m.labels {
        claim(l.label, &l.origin, e);
        match &l.op {
            LabelOp::Lookup { vrf } if !cfg.vrfs.contains(vrf) => e.origin(
                &l.origin,
                format!("label {}: VRF `{vrf}` is not defined under `vrfs`", l.label),
            ),
            LabelOp::Forward { via, .. } => {
                for a in via {
                    check_via(cfg, *a, &l.origin, e);
                }
            }
            _ => {}
        }
    }
    for l in &m.lsps {
        check_via(cfg, l.primary.via, &l.origin, e);
        if let Some(b) = &l.backup {
            check_via(cfg, b.via, &l.origin, e);
            let out_if = |a| super::find_connected(cfg, "default", a).map(|i| i.name.clone());
            if let (Some(p), Some(q)) = (out_if(l.primary.via), out_if(b.via)) {
                if p == q {
                    e.origin(
                        &l.origin,
                        format!(
                            "LSP `{}`: the backup leaves by `{p}` as the primary does: it would protect nothing against that link's failure",
                            l.name
                        ),
                    );
                }
            }
        }
    }
    let mut acs: std::collections::HashMap<&str, &str> = Default::default();
    if let Some(l) = &m.ldp {
        for (name, o) in &l.interfaces {
            if !m.interfaces.iter().any(|(i, _)| i == name) {
                e.origin(
                    o,
                    format!("interface `{name}` is not in `mpls.interfaces`: LDP discovers neighbours only where labelled frames are taken"),
                );
            } else if ifc(name).is_some_and(|i| i.ipv4.is_empty() || i.vrf != "default") {
                e.origin(
                    o,
                    format!(
                        "interface `{name}`: link hellos need an IPv4 address in VRF `default`"
                    ),
                );
            }
        }
        for (what, a) in [
            ("router-id", l.router_id),
            ("transport-address", l.transport),
        ] {
            if super::check::own_address(cfg, IpAddr::V4(a)).is_none_or(|i| i.vrf != "default") {
                e.origin(
                    &l.origin,
                    format!("{what} {a} is not an address of an interface in VRF `default`"),
                );
            }
        }
    }
    for p in &m.pseudowires {
        claim(p.local_label, &p.origin, e);
        if p.remote_label.is_none() {
            if m.ldp.is_none() {
                e.origin(
                    &p.origin,
                    format!(
                        "pseudowire `{}` has no `remote-label`: LDP signals it, and `mpls.ldp` is not configured",
                        p.name
                    ),
                );
            }
            if !p.peer.is_ipv4() {
                e.origin(
                    &p.origin,
                    format!("pseudowire `{}`: LDP signals IPv4 peers only", p.name),
                );
            }
        }
        if m.pseudowires.iter().filter(|q| q.name == p.name).count() > 1 {
            e.origin(&p.origin, format!("pseudowire `{}` is named twice", p.name));
        }
        if let Some(other) = acs.insert(&p.interface, &p.name) {
            e.origin(
                &p.origin,
                format!(
                    "interface `{}` is already the attachment circuit of pseudowire `{other}`",
                    p.interface
                ),
            );
        }
        if let Some(via) = p.via {
            check_via(cfg, via, &p.origin, e);
        }
        let Some(i) = ifc(&p.interface) else {
            e.origin(
                &p.origin,
                format!(
                    "pseudowire `{}`: no interface named `{}`",
                    p.name, p.interface
                ),
            );
            continue;
        };
        if !i.ipv4.is_empty() || !i.ipv6.is_empty() {
            e.origin(
                &p.origin,
                format!(
                    "interface `{}` has addresses: an attachment circuit carries frames, not routes",
                    i.name
                ),
            );
        }
        let bridged = cfg
            .bridges
            .iter()
            .flat_map(|b| &b.members)
            .any(|x| x.interface == i.name);
        if bridged || i.bvi.is_some() || i.atm.is_some() || i.s_vlan.is_some() {
            e.origin(
                &p.origin,
                format!(
                    "interface `{}`: an attachment circuit is a port or an 802.1Q sub-interface, not a bridge member, a routed bridge interface, an ATM VC or a Q-in-Q interface",
                    i.name
                ),
            );
        }
        if p.vc_type == Some(dataplane::mpls::VcType::Vlan) && i.vlan.is_none() {
            e.origin(
                &p.origin,
                format!(
                    "pseudowire `{}`: type vlan needs a VLAN sub-interface; `{}` is a port (use type ethernet)",
                    p.name, i.name
                ),
            );
        }
    }
}

/// A next hop must sit on a connected subnet of an Ethernet interface in the default VRF (the
/// core's: labels are switched there).
fn check_via(cfg: &super::Config, a: IpAddr, o: &Origin, e: &mut Errs) {
    match super::find_connected(cfg, "default", a) {
        None => e.origin(
            o,
            format!("next hop {a} is not on a connected subnet in VRF `default`"),
        ),
        Some(i) if i.atm.is_some() || i.bvi.is_some() => e.origin(
            o,
            format!(
                "next hop {a} is out of `{}`: labels are sent on Ethernet interfaces only",
                i.name
            ),
        ),
        Some(_) => {}
    }
}
