//! A tcpdump-like capture filter over raw Ethernet frames, for the capture and trace taps.
//!
//! [`Filter::parse`] compiles an expression once; [`Filter::matches`] decodes a frame once into a
//! few fields (EtherType, outer VLAN id, IP version, addresses, protocol, ports) and walks the
//! expression tree over them. It runs only while a capture or trace is armed, so it favours being
//! simple and total over being fast: no input makes it panic, and anything malformed or too short
//! simply does not match the primitives that would need it.
//!
//! # Grammar
//!
//! Keywords are lowercase; `and` binds tighter than `or`, as in tcpdump.
//!
//! ```text
//! expr    := term (("or" | "||") term)*
//! term    := factor (("and" | "&&") factor)*
//! factor  := ("not" | "!") factor | "(" expr ")" | primitive
//! primitive :=
//!     "ip" | "ip6" | "arp"                    EtherType 0x0800 / 0x86dd / 0x0806
//!   | "udp" | "tcp"                           IPv4 protocol or IPv6 upper header 17 / 6
//!   | "icmp" | "icmp6"                        IPv4 protocol 1 / IPv6 upper header 58
//!   | "proto" PROTO                           PROTO: 0..255, udp, tcp, icmp, icmp6
//!   | ("ip" | "ip6") "proto" PROTO            the same, IPv4 only / IPv6 only
//!   | "vlan" [VID]                            any 802.1Q/802.1ad tag / outermost VID 0..4095
//!   | [DIR] "host" ADDR                       IPv4 (also ARP sender/target) or IPv6 address
//!   | [DIR] "net" ADDR "/" LEN                host bits set in ADDR are an error
//!   | [DIR] "port" N                          UDP or TCP port 0..65535
//!   | [DIR] "portrange" N "-" N
//!   | ("ip" | "ip6") [DIR] ("host" | "net") ...   IPv4 only / IPv6 only
//!   | ("udp" | "tcp") [DIR] ("port" | "portrange") ...   that transport only
//!   | "ether" [DIR] ["host"] MAC              MAC: aa:bb:cc:dd:ee:ff
//!   | "ether" "proto" N                       EtherType after any VLAN tags
//!   | "len" ("<=" | ">=") N | "less" N | "greater" N     frame length in bytes
//! DIR := "src" | "dst"                        without it: either
//! ```
//!
//! Numbers are decimal or `0x` hex. An empty or whitespace-only expression matches everything.
//! A [`FilterError`] carries the byte offset of the offending token (or the expression's length
//! for a missing one) and displays it as a 1-based column.
//!
//! # What a frame is decoded into
//!
//! - Up to two VLAN tags (TPID 0x8100 or 0x88a8) are looked through for every primitive; `vlan N`
//!   looks at the outermost one. `ether proto` sees the EtherType after the tags, so
//!   `ether proto 0x8100` matches only a frame with a third tag, whose TPID is then taken for the
//!   EtherType (and nothing above it is decoded).
//! - IPv4 honours the IHL (options) and the total length (Ethernet padding is not payload).
//! - IPv6 skips hop-by-hop, routing, destination-options and fragment headers (at most 8) to find
//!   the upper protocol; `proto`, `udp`, `tcp` and `icmp6` look at that.
//! - A non-first fragment (IPv4 fragment offset or IPv6 fragment-header offset not 0) has no ports:
//!   `port` does not match it, `udp`/`tcp`/`proto` still do.
//! - `host` and `net` also match the sender (src) and target (dst) IPv4 address of an Ethernet/IPv4
//!   ARP packet, as tcpdump's do; `ip host` does not.

use core::fmt;
use std::net::IpAddr;
use std::str::FromStr;

const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_ARP: u16 = 0x0806;
const ETHERTYPE_IPV6: u16 = 0x86dd;
const TPID_8021Q: u16 = 0x8100;
const TPID_8021AD: u16 = 0x88a8;
const MAX_VLAN_TAGS: usize = 2;
const MAX_EXT_HEADERS: usize = 8;
const PROTO_ICMP: u8 = 1;
const PROTO_TCP: u8 = 6;
const PROTO_UDP: u8 = 17;
const PROTO_ICMPV6: u8 = 58;

/// How many `(` and `not` may nest; keeps parsing and evaluation off deep recursion.
const MAX_DEPTH: usize = 64;

/// A compiled capture filter. See the [module documentation](self) for the grammar.
#[derive(Clone, Debug)]
pub struct Filter {
    expr: String,
    /// `None` for the empty expression, which matches everything.
    root: Option<Node>,
}

/// Why an expression did not compile: where (a byte offset into the expression) and what was
/// expected there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilterError {
    /// Byte offset into the expression; the expression's length for "end of expression".
    pub pos: usize,
    pub message: String,
}

impl fmt::Display for FilterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "at column {}: {}", self.pos + 1, self.message)
    }
}

impl std::error::Error for FilterError {}

fn error(pos: usize, message: impl Into<String>) -> FilterError {
    FilterError {
        pos,
        message: message.into(),
    }
}

impl Filter {
    /// Compiles `expr`. An empty or whitespace-only expression matches every frame.
    pub fn parse(expr: &str) -> Result<Filter, FilterError> {
        let tokens = tokenize(expr)?;
        let root = if tokens.len() == 1 {
            None // only the end marker
        } else {
            Some(
                Parser {
                    tokens,
                    i: 0,
                    depth: 0,
                }
                .parse()?,
            )
        };
        Ok(Filter {
            expr: expr.to_owned(),
            root,
        })
    }

    /// Whether the frame (starting at the Ethernet destination MAC) matches. Never panics.
    pub fn matches(&self, frame: &[u8]) -> bool {
        match &self.root {
            None => true,
            Some(node) => node.eval(&Decoded::new(frame)),
        }
    }

    /// True only for the empty (or whitespace-only) expression.
    pub fn is_match_all(&self) -> bool {
        self.root.is_none()
    }

    /// The source text the filter was compiled from.
    pub fn expr(&self) -> &str {
        &self.expr
    }
}

impl FromStr for Filter {
    type Err = FilterError;

    fn from_str(s: &str) -> Result<Filter, FilterError> {
        Filter::parse(s)
    }
}

// ---------------------------------------------------------------------------------------------
// Compiled form and evaluation
// ---------------------------------------------------------------------------------------------

/// `And` and `Or` are flat lists so that a long chain does not make a deep tree.
#[derive(Clone, Debug)]
enum Node {
    And(Vec<Node>),
    Or(Vec<Node>),
    Not(Box<Node>),
    Prim(Prim),
}

impl Node {
    fn eval(&self, d: &Decoded) -> bool {
        match self {
            Node::And(nodes) => nodes.iter().all(|n| n.eval(d)),
            Node::Or(nodes) => nodes.iter().any(|n| n.eval(d)),
            Node::Not(node) => !node.eval(d),
            Node::Prim(p) => p.eval(d),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dir {
    Src,
    Dst,
    Either,
}

impl Dir {
    fn test<T: Copy>(self, src: T, dst: T, f: impl Fn(T) -> bool) -> bool {
        match self {
            Dir::Src => f(src),
            Dir::Dst => f(dst),
            Dir::Either => f(src) || f(dst),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Prim {
    /// The EtherType after any VLAN tags.
    EtherType(u16),
    /// The IPv4 protocol or the IPv6 upper-layer header; `version` 4 or 6 restricts it.
    Proto {
        proto: u8,
        version: Option<u8>,
    },
    /// Any tag, or the outermost tag's VLAN id.
    Vlan(Option<u16>),
    /// `host` is a net with a full mask.
    Net4 {
        dir: Dir,
        prefix: u32,
        mask: u32,
    },
    Net6 {
        dir: Dir,
        prefix: u128,
        mask: u128,
    },
    Ports {
        dir: Dir,
        lo: u16,
        hi: u16,
    },
    EtherHost {
        dir: Dir,
        mac: [u8; 6],
    },
    LenLe(u64),
    LenGe(u64),
}

impl Prim {
    fn eval(&self, d: &Decoded) -> bool {
        match *self {
            Prim::EtherType(t) => d.ethertype == Some(t),
            Prim::Proto { proto, version } => {
                d.proto == Some(proto) && version.is_none_or(|v| v == d.ip_version)
            }
            Prim::Vlan(None) => d.vlan.is_some(),
            Prim::Vlan(Some(id)) => d.vlan == Some(id),
            Prim::Net4 { dir, prefix, mask } => {
                d.v4.is_some_and(|(s, t)| dir.test(s, t, |a| a & mask == prefix))
            }
            Prim::Net6 { dir, prefix, mask } => {
                d.v6.is_some_and(|(s, t)| dir.test(s, t, |a| a & mask == prefix))
            }
            Prim::Ports { dir, lo, hi } => d
                .ports
                .is_some_and(|(s, t)| dir.test(s, t, |p| (lo..=hi).contains(&p))),
            Prim::EtherHost { dir, mac } => d
                .macs
                .is_some_and(|(s, t)| dir.test(s, t, |m: [u8; 6]| m == mac)),
            Prim::LenLe(n) => (d.len as u64) <= n,
            Prim::LenGe(n) => (d.len as u64) >= n,
        }
    }
}

/// What the primitives look at, decoded once per frame. `None` means absent or malformed.
#[derive(Default)]
struct Decoded {
    len: usize,
    /// (source, destination); present when the frame has a whole Ethernet header.
    macs: Option<([u8; 6], [u8; 6])>,
    /// The EtherType after the VLAN tags.
    ethertype: Option<u16>,
    /// The outermost tag's VLAN id.
    vlan: Option<u16>,
    /// 4 or 6 when an IP header was decoded, else 0.
    ip_version: u8,
    /// IPv4 (or ARP sender/target) addresses.
    v4: Option<(u32, u32)>,
    v6: Option<(u128, u128)>,
    /// IPv4 protocol or IPv6 upper-layer header.
    proto: Option<u8>,
    /// UDP/TCP ports of a first (or only) fragment.
    ports: Option<(u16, u16)>,
}

fn get16(b: &[u8], at: usize) -> Option<u16> {
    let bytes: [u8; 2] = b.get(at..at.checked_add(2)?)?.try_into().ok()?;
    Some(u16::from_be_bytes(bytes))
}

fn get32(b: &[u8], at: usize) -> Option<u32> {
    let bytes: [u8; 4] = b.get(at..at.checked_add(4)?)?.try_into().ok()?;
    Some(u32::from_be_bytes(bytes))
}

fn get128(b: &[u8], at: usize) -> Option<u128> {
    let bytes: [u8; 16] = b.get(at..at.checked_add(16)?)?.try_into().ok()?;
    Some(u128::from_be_bytes(bytes))
}

fn mac(b: &[u8], at: usize) -> Option<[u8; 6]> {
    b.get(at..at.checked_add(6)?)?.try_into().ok()
}

/// The ports at the start of a UDP or TCP header.
fn l4_ports(proto: u8, l4: &[u8]) -> Option<(u16, u16)> {
    if proto == PROTO_UDP || proto == PROTO_TCP {
        Some((get16(l4, 0)?, get16(l4, 2)?))
    } else {
        None
    }
}

impl Decoded {
    fn new(frame: &[u8]) -> Decoded {
        let mut d = Decoded {
            len: frame.len(),
            ..Decoded::default()
        };
        d.ethernet(frame);
        d
    }

    fn ethernet(&mut self, frame: &[u8]) -> Option<()> {
        let mut ethertype = get16(frame, 12)?;
        self.macs = Some((mac(frame, 6)?, mac(frame, 0)?));
        let mut at = 14;
        for _ in 0..MAX_VLAN_TAGS {
            if ethertype != TPID_8021Q && ethertype != TPID_8021AD {
                break;
            }
            let tci = get16(frame, at)?;
            ethertype = get16(frame, at + 2)?;
            self.vlan.get_or_insert(tci & 0x0fff);
            at += 4;
        }
        self.ethertype = Some(ethertype);
        let l3 = frame.get(at..)?;
        match ethertype {
            ETHERTYPE_IPV4 => self.ipv4(l3),
            ETHERTYPE_IPV6 => self.ipv6(l3),
            ETHERTYPE_ARP => self.arp(l3),
            _ => None,
        }
    }

    fn ipv4(&mut self, b: &[u8]) -> Option<()> {
        let version_ihl = *b.first()?;
        if version_ihl >> 4 != 4 {
            return None;
        }
        let ihl = usize::from(version_ihl & 0x0f) * 4;
        let total = usize::from(get16(b, 2)?);
        if ihl < 20 || total < ihl || b.len() < ihl {
            return None;
        }
        // A capture may be cut short; padding after the total length is not payload.
        let end = total.min(b.len());
        let fragment_offset = get16(b, 6)? & 0x1fff;
        let proto = *b.get(9)?;
        self.ip_version = 4;
        self.v4 = Some((get32(b, 12)?, get32(b, 16)?));
        self.proto = Some(proto);
        if fragment_offset == 0 {
            self.ports = l4_ports(proto, b.get(ihl..end)?);
        }
        Some(())
    }

    fn ipv6(&mut self, b: &[u8]) -> Option<()> {
        if b.len() < 40 || b[0] >> 4 != 6 {
            return None;
        }
        let payload_len = usize::from(get16(b, 4)?);
        // Payload length 0 is a jumbogram (or a sender that did not fill it in): take the frame.
        let end = if payload_len == 0 {
            b.len()
        } else {
            (40 + payload_len).min(b.len())
        };
        let b = b.get(..end)?;
        self.ip_version = 6;
        self.v6 = Some((get128(b, 8)?, get128(b, 24)?));
        let mut next = b[6];
        let mut at = 40;
        let mut first_fragment = true;
        for _ in 0..=MAX_EXT_HEADERS {
            match next {
                0 | 43 | 60 => {
                    let len = (usize::from(*b.get(at + 1)?) + 1) * 8;
                    b.get(at..at + len)?;
                    next = b[at];
                    at += len;
                }
                44 => {
                    let offset = get16(b, at + 2)? >> 3;
                    b.get(at..at + 8)?;
                    first_fragment &= offset == 0;
                    next = b[at];
                    at += 8;
                }
                upper => {
                    self.proto = Some(upper);
                    if first_fragment {
                        self.ports = l4_ports(upper, b.get(at..)?);
                    }
                    return Some(());
                }
            }
        }
        None // too many extension headers: the upper protocol stays unknown
    }

    fn arp(&mut self, b: &[u8]) -> Option<()> {
        // Ethernet hardware addresses, IPv4 protocol addresses.
        if get16(b, 0)? != 1 || get16(b, 2)? != ETHERTYPE_IPV4 || get16(b, 4)? != 0x0604 {
            return None;
        }
        self.v4 = Some((get32(b, 14)?, get32(b, 24)?));
        Some(())
    }
}

// ---------------------------------------------------------------------------------------------
// Tokens
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tok<'a> {
    Word(&'a str),
    LParen,
    RParen,
    Bang,
    AndAnd,
    OrOr,
    Le,
    Ge,
    End,
}

#[derive(Clone, Copy, Debug)]
struct Token<'a> {
    tok: Tok<'a>,
    /// Byte offset in the expression.
    pos: usize,
    /// The source text ("" for the end).
    text: &'a str,
}

impl Token<'_> {
    /// How an error message names what it found.
    fn describe(&self) -> String {
        match self.tok {
            Tok::End => "end of expression".to_owned(),
            _ => format!("{:?}", self.text),
        }
    }
}

/// Bytes that end a word. Everything else, non-ASCII included, is part of one.
fn is_special(b: u8) -> bool {
    b.is_ascii_whitespace() || matches!(b, b'(' | b')' | b'!' | b'&' | b'|' | b'<' | b'>' | b'=')
}

fn tokenize(src: &str) -> Result<Vec<Token<'_>>, FilterError> {
    let bytes = src.as_bytes();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        let next = bytes.get(i + 1).copied();
        let (tok, len) = match (c, next) {
            (b'(', _) => (Tok::LParen, 1),
            (b')', _) => (Tok::RParen, 1),
            (b'!', _) => (Tok::Bang, 1),
            (b'&', Some(b'&')) => (Tok::AndAnd, 2),
            (b'|', Some(b'|')) => (Tok::OrOr, 2),
            (b'<', Some(b'=')) => (Tok::Le, 2),
            (b'>', Some(b'=')) => (Tok::Ge, 2),
            (b'&', _) => return Err(error(i, "unexpected \"&\" (use \"&&\" or \"and\")")),
            (b'|', _) => return Err(error(i, "unexpected \"|\" (use \"||\" or \"or\")")),
            (b'<' | b'>' | b'=', _) => {
                return Err(error(
                    i,
                    format!(
                        "unexpected {:?}: the only comparisons are \"len <= N\" and \"len >= N\"",
                        c as char
                    ),
                ))
            }
            _ => {
                let start = i;
                while i < bytes.len() && !is_special(bytes[i]) {
                    i += 1;
                }
                // `start` and `i` sit next to ASCII bytes or the ends, so on char boundaries.
                let text = &src[start..i];
                tokens.push(Token {
                    tok: Tok::Word(text),
                    pos: start,
                    text,
                });
                continue;
            }
        };
        tokens.push(Token {
            tok,
            pos: i,
            text: &src[i..i + len],
        });
        i += len;
    }
    tokens.push(Token {
        tok: Tok::End,
        pos: src.len(),
        text: "",
    });
    Ok(tokens)
}

/// Decimal or `0x` hex, no sign, no overflow.
fn parse_number(s: &str) -> Option<u64> {
    let (digits, radix) = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => (hex, 16),
        None => (s, 10),
    };
    if digits.is_empty() {
        return None;
    }
    digits.chars().try_fold(0u64, |acc, c| {
        acc.checked_mul(radix)?
            .checked_add(u64::from(c.to_digit(radix as u32)?))
    })
}

fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let mut mac = [0u8; 6];
    let mut parts = s.split(':');
    for byte in &mut mac {
        let part = parts.next()?;
        if part.is_empty() || part.len() > 2 || !part.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        *byte = u8::from_str_radix(part, 16).ok()?;
    }
    parts.next().is_none().then_some(mac)
}

// ---------------------------------------------------------------------------------------------
// Parser
// ---------------------------------------------------------------------------------------------

/// What a qualifier in front of `[src|dst] host/net/port/portrange` allows.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Qual {
    None,
    /// `ip` (4) or `ip6` (6): host and net of that family.
    Ip(u8),
    /// `tcp` or `udp` (the protocol number): port and portrange.
    L4(u8),
}

impl Qual {
    fn kinds(self) -> &'static [&'static str] {
        match self {
            Qual::None => &["host", "net", "port", "portrange"],
            Qual::Ip(_) => &["host", "net"],
            Qual::L4(_) => &["port", "portrange"],
        }
    }

    fn kinds_text(self) -> &'static str {
        match self {
            Qual::None => "\"host\", \"net\", \"port\" or \"portrange\"",
            Qual::Ip(_) => "\"host\" or \"net\"",
            Qual::L4(_) => "\"port\" or \"portrange\"",
        }
    }

    fn family(self) -> &'static str {
        match self {
            Qual::Ip(4) => "IPv4",
            Qual::Ip(_) => "IPv6",
            _ => "IPv4 or IPv6",
        }
    }

    fn allows(self, addr: &IpAddr) -> bool {
        match self {
            Qual::Ip(4) => addr.is_ipv4(),
            Qual::Ip(_) => addr.is_ipv6(),
            _ => true,
        }
    }

    /// The primitive, restricted to what the qualifier names.
    fn wrap(self, prim: Prim) -> Node {
        let guard = match self {
            Qual::None => return Node::Prim(prim),
            Qual::Ip(4) => Prim::EtherType(ETHERTYPE_IPV4),
            Qual::Ip(_) => Prim::EtherType(ETHERTYPE_IPV6),
            Qual::L4(proto) => Prim::Proto {
                proto,
                version: None,
            },
        };
        Node::And(vec![Node::Prim(guard), Node::Prim(prim)])
    }
}

struct Parser<'a> {
    /// Always ends with `Tok::End`.
    tokens: Vec<Token<'a>>,
    i: usize,
    depth: usize,
}

type PResult<T> = Result<T, FilterError>;

impl<'a> Parser<'a> {
    fn peek(&self) -> Token<'a> {
        self.tokens[self.i]
    }

    /// Takes the next token; the end is never passed.
    fn bump(&mut self) -> Token<'a> {
        let t = self.peek();
        if t.tok != Tok::End {
            self.i += 1;
        }
        t
    }

    fn parse(mut self) -> PResult<Node> {
        let node = self.or_expr(None)?;
        let t = self.peek();
        match t.tok {
            Tok::End => Ok(node),
            Tok::RParen => Err(error(t.pos, "unbalanced \")\": no \"(\" to close")),
            _ => Err(error(
                t.pos,
                format!(
                    "expected \"and\", \"or\" or end of expression, found {}",
                    t.describe()
                ),
            )),
        }
    }

    /// `after` names the token before the first operand, for "missing operand" messages.
    fn or_expr(&mut self, after: Option<&'a str>) -> PResult<Node> {
        let mut terms = vec![self.and_expr(after)?];
        loop {
            let t = self.peek();
            if !matches!(t.tok, Tok::OrOr | Tok::Word("or")) {
                break;
            }
            self.bump();
            terms.push(self.and_expr(Some(t.text))?);
        }
        Ok(if terms.len() == 1 {
            terms.swap_remove(0)
        } else {
            Node::Or(terms)
        })
    }

    fn and_expr(&mut self, after: Option<&'a str>) -> PResult<Node> {
        let mut factors = vec![self.factor(after)?];
        loop {
            let t = self.peek();
            if !matches!(t.tok, Tok::AndAnd | Tok::Word("and")) {
                break;
            }
            self.bump();
            factors.push(self.factor(Some(t.text))?);
        }
        Ok(if factors.len() == 1 {
            factors.swap_remove(0)
        } else {
            Node::And(factors)
        })
    }

    fn nest(&mut self, pos: usize) -> PResult<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(error(
                pos,
                format!(
                    "expression nested too deeply (more than {MAX_DEPTH} levels of \"(\" and \"not\")"
                ),
            ));
        }
        Ok(())
    }

    fn factor(&mut self, after: Option<&'a str>) -> PResult<Node> {
        let t = self.peek();
        match t.tok {
            Tok::Bang | Tok::Word("not") => {
                self.bump();
                self.nest(t.pos)?;
                let inner = self.factor(Some(t.text))?;
                self.depth -= 1;
                Ok(Node::Not(Box::new(inner)))
            }
            Tok::LParen => {
                self.bump();
                self.nest(t.pos)?;
                let inner = self.or_expr(Some("("))?;
                let close = self.peek();
                if close.tok != Tok::RParen {
                    return Err(error(
                        close.pos,
                        format!(
                            "expected \"and\", \"or\" or \")\" to close the \"(\" at column {}, found {}",
                            t.pos + 1,
                            close.describe()
                        ),
                    ));
                }
                self.bump();
                self.depth -= 1;
                Ok(inner)
            }
            Tok::Word(w) if w != "and" && w != "or" => {
                self.bump();
                self.primitive(t)
            }
            _ => Err(error(
                t.pos,
                match after {
                    Some(a) => format!("expected a primitive after {a:?}, found {}", t.describe()),
                    None => format!("expected a primitive, found {}", t.describe()),
                },
            )),
        }
    }

    /// `t`, a word, has been taken.
    fn primitive(&mut self, t: Token<'a>) -> PResult<Node> {
        let prim = match t.text {
            "ip" => return self.ip_qualified(4),
            "ip6" => return self.ip_qualified(6),
            "tcp" => return self.l4_qualified(PROTO_TCP),
            "udp" => return self.l4_qualified(PROTO_UDP),
            "src" | "dst" | "host" | "net" | "port" | "portrange" => {
                return self.addressed(t, Qual::None)
            }
            "arp" => Prim::EtherType(ETHERTYPE_ARP),
            "icmp" => Prim::Proto {
                proto: PROTO_ICMP,
                version: Some(4),
            },
            "icmp6" => Prim::Proto {
                proto: PROTO_ICMPV6,
                version: Some(6),
            },
            "proto" => Prim::Proto {
                proto: self.proto_number()?,
                version: None,
            },
            "vlan" => Prim::Vlan(self.optional_vlan_id()?),
            "ether" => self.ether()?,
            "len" => {
                let op = self.bump();
                let le = match op.tok {
                    Tok::Le => true,
                    Tok::Ge => false,
                    _ => {
                        return Err(error(
                            op.pos,
                            format!(
                                "expected \"<=\" or \">=\" after \"len\", found {}",
                                op.describe()
                            ),
                        ))
                    }
                };
                let n = self.length()?;
                if le {
                    Prim::LenLe(n)
                } else {
                    Prim::LenGe(n)
                }
            }
            "greater" => Prim::LenGe(self.length()?),
            "less" => Prim::LenLe(self.length()?),
            w => return Err(error(t.pos, format!("unknown primitive {w:?}"))),
        };
        Ok(Node::Prim(prim))
    }

    /// After `ip`/`ip6`: `proto`, `[src|dst] host|net`, or nothing (the EtherType).
    fn ip_qualified(&mut self, version: u8) -> PResult<Node> {
        let t = self.peek();
        match t.tok {
            Tok::Word("proto") => {
                self.bump();
                Ok(Node::Prim(Prim::Proto {
                    proto: self.proto_number()?,
                    version: Some(version),
                }))
            }
            Tok::Word("src" | "dst" | "host" | "net") => {
                self.bump();
                self.addressed(t, Qual::Ip(version))
            }
            _ => Ok(Node::Prim(Prim::EtherType(if version == 4 {
                ETHERTYPE_IPV4
            } else {
                ETHERTYPE_IPV6
            }))),
        }
    }

    /// After `tcp`/`udp`: `[src|dst] port|portrange`, or nothing (the protocol).
    fn l4_qualified(&mut self, proto: u8) -> PResult<Node> {
        let t = self.peek();
        match t.tok {
            Tok::Word("src" | "dst" | "port" | "portrange") => {
                self.bump();
                self.addressed(t, Qual::L4(proto))
            }
            _ => Ok(Node::Prim(Prim::Proto {
                proto,
                version: None,
            })),
        }
    }

    /// `first` (taken) is `src`, `dst` or one of the kinds `qual` allows.
    fn addressed(&mut self, first: Token<'a>, qual: Qual) -> PResult<Node> {
        let (dir, kind) = match first.text {
            "src" | "dst" => {
                let dir = if first.text == "src" {
                    Dir::Src
                } else {
                    Dir::Dst
                };
                let t = self.peek();
                match t.tok {
                    Tok::Word(k) if qual.kinds().contains(&k) => {
                        self.bump();
                        (dir, k)
                    }
                    _ => {
                        return Err(error(
                            t.pos,
                            format!(
                                "expected {} after {:?}, found {}",
                                qual.kinds_text(),
                                first.text,
                                t.describe()
                            ),
                        ))
                    }
                }
            }
            k => (Dir::Either, k),
        };
        let prim = match kind {
            "host" => self.host(dir, qual)?,
            "net" => self.net(dir, qual)?,
            "port" => {
                let port = self.number("a port number 0..65535", 0xffff)? as u16;
                Prim::Ports {
                    dir,
                    lo: port,
                    hi: port,
                }
            }
            _ => self.portrange(dir)?,
        };
        Ok(qual.wrap(prim))
    }

    /// The next word, or an error saying `what` was expected.
    fn value(&mut self, what: &str) -> PResult<(&'a str, usize)> {
        let t = self.peek();
        match t.tok {
            Tok::Word(w) => {
                self.bump();
                Ok((w, t.pos))
            }
            _ => Err(error(
                t.pos,
                format!("expected {what}, found {}", t.describe()),
            )),
        }
    }

    fn number(&mut self, what: &str, max: u64) -> PResult<u64> {
        let (w, pos) = self.value(what)?;
        parse_number(w)
            .filter(|&n| n <= max)
            .ok_or_else(|| error(pos, format!("expected {what}, found {w:?}")))
    }

    fn length(&mut self) -> PResult<u64> {
        self.number("a frame length in bytes", u64::from(u32::MAX))
    }

    fn proto_number(&mut self) -> PResult<u8> {
        let what = "an IP protocol number 0..255 or one of udp, tcp, icmp, icmp6";
        let (w, pos) = self.value(what)?;
        match w {
            "udp" => Ok(PROTO_UDP),
            "tcp" => Ok(PROTO_TCP),
            "icmp" => Ok(PROTO_ICMP),
            "icmp6" => Ok(PROTO_ICMPV6),
            _ => parse_number(w)
                .and_then(|n| u8::try_from(n).ok())
                .ok_or_else(|| error(pos, format!("expected {what}, found {w:?}"))),
        }
    }

    /// `vlan` takes an id when a word other than `and`/`or` follows.
    fn optional_vlan_id(&mut self) -> PResult<Option<u16>> {
        match self.peek().tok {
            Tok::Word(w) if w != "and" && w != "or" => {
                Ok(Some(self.number("a VLAN id 0..4095", 4095)? as u16))
            }
            _ => Ok(None),
        }
    }

    fn ether(&mut self) -> PResult<Prim> {
        let t = self.bump();
        let dir = match t.tok {
            Tok::Word("proto") => {
                let what = "an EtherType 0..65535 (decimal or 0x hex)";
                return Ok(Prim::EtherType(self.number(what, 0xffff)? as u16));
            }
            Tok::Word("host") => Dir::Either,
            Tok::Word("src") => Dir::Src,
            Tok::Word("dst") => Dir::Dst,
            _ => {
                return Err(error(
                    t.pos,
                    format!(
                    "expected \"host\", \"src\", \"dst\" or \"proto\" after \"ether\", found {}",
                    t.describe()
                ),
                ))
            }
        };
        if dir != Dir::Either && self.peek().tok == Tok::Word("host") {
            self.bump();
        }
        let what = "a MAC address like aa:bb:cc:dd:ee:ff";
        let (w, pos) = self.value(what)?;
        let mac =
            parse_mac(w).ok_or_else(|| error(pos, format!("expected {what}, found {w:?}")))?;
        Ok(Prim::EtherHost { dir, mac })
    }

    fn host(&mut self, dir: Dir, qual: Qual) -> PResult<Prim> {
        let what = format!("an {} address", qual.family());
        let (w, pos) = self.value(&what)?;
        let addr = w
            .parse::<IpAddr>()
            .ok()
            .filter(|a| qual.allows(a))
            .ok_or_else(|| error(pos, format!("expected {what}, found {w:?}")))?;
        Ok(match addr {
            IpAddr::V4(a) => Prim::Net4 {
                dir,
                prefix: u32::from(a),
                mask: u32::MAX,
            },
            IpAddr::V6(a) => Prim::Net6 {
                dir,
                prefix: u128::from(a),
                mask: u128::MAX,
            },
        })
    }

    fn net(&mut self, dir: Dir, qual: Qual) -> PResult<Prim> {
        let what = format!("an {} network PREFIX/LEN", qual.family());
        let (w, pos) = self.value(&what)?;
        let bad = || error(pos, format!("expected {what}, found {w:?}"));
        let (a, l) = w.split_once('/').ok_or_else(bad)?;
        let addr = a
            .parse::<IpAddr>()
            .ok()
            .filter(|a| qual.allows(a))
            .ok_or_else(bad)?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let len = parse_number(l).filter(|&n| n <= max).ok_or_else(|| {
            error(
                pos + a.len() + 1,
                format!("expected a prefix length 0..{max}, found {l:?}"),
            )
        })? as u32;
        let non_network = || error(pos, format!("non-network bits set in {w:?}"));
        Ok(match addr {
            IpAddr::V4(a) => {
                let prefix = u32::from(a);
                let mask = u32::MAX.checked_shl(32 - len).unwrap_or(0);
                if prefix & !mask != 0 {
                    return Err(non_network());
                }
                Prim::Net4 { dir, prefix, mask }
            }
            IpAddr::V6(a) => {
                let prefix = u128::from(a);
                let mask = u128::MAX.checked_shl(128 - len).unwrap_or(0);
                if prefix & !mask != 0 {
                    return Err(non_network());
                }
                Prim::Net6 { dir, prefix, mask }
            }
        })
    }

    fn portrange(&mut self, dir: Dir) -> PResult<Prim> {
        let what = "a port range A-B with ports 0..65535";
        let (w, pos) = self.value(what)?;
        let port = |s: &str| parse_number(s).and_then(|n| u16::try_from(n).ok());
        let (lo, hi) = w
            .split_once('-')
            .and_then(|(a, b)| Some((port(a)?, port(b)?)))
            .ok_or_else(|| error(pos, format!("expected {what}, found {w:?}")))?;
        if lo > hi {
            return Err(error(
                pos,
                format!("port range {w:?} is empty: {lo} is greater than {hi}"),
            ));
        }
        Ok(Prim::Ports { dir, lo, hi })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    // -- Frame builders ------------------------------------------------------------------------

    const MAC_A: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0x00, 0x0a];
    const MAC_B: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0x00, 0x0b];

    /// Ethernet from MAC_A to MAC_B with the given tags (TPID, TCI), outermost first.
    fn eth_tagged(tags: &[(u16, u16)], ethertype: u16, payload: &[u8]) -> Vec<u8> {
        let mut f = Vec::new();
        f.extend_from_slice(&MAC_B);
        f.extend_from_slice(&MAC_A);
        for &(tpid, tci) in tags {
            f.extend_from_slice(&tpid.to_be_bytes());
            f.extend_from_slice(&tci.to_be_bytes());
        }
        f.extend_from_slice(&ethertype.to_be_bytes());
        f.extend_from_slice(payload);
        f
    }

    fn eth(ethertype: u16, payload: &[u8]) -> Vec<u8> {
        eth_tagged(&[], ethertype, payload)
    }

    /// IPv4 with `options` (a multiple of 4 bytes) and the raw flags/fragment-offset field.
    fn ipv4(src: &str, dst: &str, proto: u8, frag: u16, options: &[u8], payload: &[u8]) -> Vec<u8> {
        assert_eq!(options.len() % 4, 0);
        let ihl = 20 + options.len();
        let total = (ihl + payload.len()) as u16;
        let mut h = vec![0x40 | (ihl / 4) as u8, 0];
        h.extend_from_slice(&total.to_be_bytes());
        h.extend_from_slice(&[0x12, 0x34]);
        h.extend_from_slice(&frag.to_be_bytes());
        h.extend_from_slice(&[64, proto, 0, 0]);
        h.extend_from_slice(&src.parse::<Ipv4Addr>().unwrap().octets());
        h.extend_from_slice(&dst.parse::<Ipv4Addr>().unwrap().octets());
        h.extend_from_slice(options);
        let sum = crate::checksum::fold(crate::checksum::sum(&h));
        h[10..12].copy_from_slice(&sum.to_be_bytes());
        h.extend_from_slice(payload);
        h
    }

    fn ipv6(src: &str, dst: &str, next: u8, payload: &[u8]) -> Vec<u8> {
        let mut h = vec![0x60, 0, 0, 0];
        h.extend_from_slice(&(payload.len() as u16).to_be_bytes());
        h.extend_from_slice(&[next, 64]);
        h.extend_from_slice(&src.parse::<Ipv6Addr>().unwrap().octets());
        h.extend_from_slice(&dst.parse::<Ipv6Addr>().unwrap().octets());
        h.extend_from_slice(payload);
        h
    }

    /// An 8-byte hop-by-hop, routing or destination-options header (PadN filler).
    fn ext_header(next: u8, payload: &[u8]) -> Vec<u8> {
        let mut h = vec![next, 0, 1, 4, 0, 0, 0, 0];
        h.extend_from_slice(payload);
        h
    }

    /// An IPv6 fragment header; `offset` in 8-byte units.
    fn frag6(next: u8, offset: u16, more: bool, payload: &[u8]) -> Vec<u8> {
        let mut h = vec![next, 0];
        h.extend_from_slice(&((offset << 3) | u16::from(more)).to_be_bytes());
        h.extend_from_slice(&[0xde, 0xad, 0xbe, 0xef]);
        h.extend_from_slice(payload);
        h
    }

    fn udp(sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
        let mut h = Vec::new();
        h.extend_from_slice(&sport.to_be_bytes());
        h.extend_from_slice(&dport.to_be_bytes());
        h.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
        h.extend_from_slice(&[0, 0]);
        h.extend_from_slice(payload);
        h
    }

    fn tcp(sport: u16, dport: u16) -> Vec<u8> {
        let mut h = Vec::new();
        h.extend_from_slice(&sport.to_be_bytes());
        h.extend_from_slice(&dport.to_be_bytes());
        h.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x02, 0xff, 0xff, 0, 0, 0, 0]);
        h
    }

    fn icmp_echo() -> Vec<u8> {
        vec![8, 0, 0xf7, 0xff, 0, 1, 0, 0]
    }

    fn arp_request(spa: &str, tpa: &str) -> Vec<u8> {
        let mut a = vec![0, 1, 0x08, 0x00, 6, 4, 0, 1];
        a.extend_from_slice(&MAC_A);
        a.extend_from_slice(&spa.parse::<Ipv4Addr>().unwrap().octets());
        a.extend_from_slice(&[0; 6]);
        a.extend_from_slice(&tpa.parse::<Ipv4Addr>().unwrap().octets());
        eth(ETHERTYPE_ARP, &a)
    }

    /// 10.0.0.1:1234 -> 192.168.1.10:53 over UDP, untagged.
    fn v4_udp() -> Vec<u8> {
        let ip = ipv4(
            "10.0.0.1",
            "192.168.1.10",
            17,
            0x4000,
            &[],
            &udp(1234, 53, b"query"),
        );
        eth(ETHERTYPE_IPV4, &ip)
    }

    /// 10.0.0.2:40000 -> 10.1.2.3:80 over TCP, with 4 bytes of IPv4 options (IHL 6).
    fn v4_tcp_options() -> Vec<u8> {
        let ip = ipv4("10.0.0.2", "10.1.2.3", 6, 0, &[1, 1, 1, 0], &tcp(40000, 80));
        eth(ETHERTYPE_IPV4, &ip)
    }

    /// A non-first fragment (offset 185 * 8) of 10.0.0.1 -> 192.168.1.10 UDP whose payload
    /// happens to look like ports 1234 -> 53.
    fn v4_udp_fragment() -> Vec<u8> {
        let ip = ipv4(
            "10.0.0.1",
            "192.168.1.10",
            17,
            185,
            &[],
            &udp(1234, 53, b"rest"),
        );
        eth(ETHERTYPE_IPV4, &ip)
    }

    /// VLAN 100, 2001:db8::1:5353 -> 2001:db8:1::2:53 over UDP.
    fn vlan_v6_udp() -> Vec<u8> {
        let ip = ipv6("2001:db8::1", "2001:db8:1::2", 17, &udp(5353, 53, b"q"));
        eth_tagged(&[(TPID_8021Q, 0x2000 | 100)], ETHERTYPE_IPV6, &ip)
    }

    /// fe80::1:50000 -> fe80::2:443 over TCP behind a hop-by-hop header, untagged.
    fn v6_hbh_tcp() -> Vec<u8> {
        let ip = ipv6("fe80::1", "fe80::2", 0, &ext_header(6, &tcp(50000, 443)));
        eth(ETHERTYPE_IPV6, &ip)
    }

    /// IPv6 UDP behind routing, destination options and a first fragment header: ports visible.
    fn v6_chain_first_fragment() -> Vec<u8> {
        let upper = frag6(17, 0, true, &udp(7, 9, b"x"));
        let ip = ipv6(
            "2001:db8::1",
            "2001:db8::2",
            43,
            &ext_header(60, &ext_header(44, &upper)),
        );
        eth(ETHERTYPE_IPV6, &ip)
    }

    /// A non-first IPv6 fragment of UDP whose payload looks like ports 7 -> 9.
    fn v6_fragment() -> Vec<u8> {
        let ip = ipv6(
            "2001:db8::1",
            "2001:db8::2",
            44,
            &frag6(17, 100, false, &udp(7, 9, b"")),
        );
        eth(ETHERTYPE_IPV6, &ip)
    }

    /// Q-in-Q: S-tag 10, C-tag 20, then 172.16.5.5:67 -> 255.255.255.255:68 UDP.
    fn qinq_v4_udp() -> Vec<u8> {
        let ip = ipv4(
            "172.16.5.5",
            "255.255.255.255",
            17,
            0,
            &[],
            &udp(67, 68, b""),
        );
        eth_tagged(&[(TPID_8021AD, 10), (TPID_8021Q, 20)], ETHERTYPE_IPV4, &ip)
    }

    fn v4_icmp() -> Vec<u8> {
        eth(
            ETHERTYPE_IPV4,
            &ipv4("10.0.0.1", "10.0.0.2", 1, 0, &[], &icmp_echo()),
        )
    }

    fn v6_icmp() -> Vec<u8> {
        let ip = ipv6(
            "2001:db8::1",
            "2001:db8::2",
            58,
            &[128, 0, 0, 0, 0, 1, 0, 1],
        );
        eth(ETHERTYPE_IPV6, &ip)
    }

    fn arp() -> Vec<u8> {
        arp_request("10.0.0.1", "10.0.0.254")
    }

    fn all_frames() -> Vec<Vec<u8>> {
        vec![
            v4_udp(),
            v4_tcp_options(),
            v4_udp_fragment(),
            vlan_v6_udp(),
            v6_hbh_tcp(),
            v6_chain_first_fragment(),
            v6_fragment(),
            qinq_v4_udp(),
            v4_icmp(),
            v6_icmp(),
            arp(),
        ]
    }

    // -- Helpers -------------------------------------------------------------------------------

    fn f(expr: &str) -> Filter {
        Filter::parse(expr).unwrap_or_else(|e| panic!("{expr:?} did not parse: {e}"))
    }

    fn m(expr: &str, frame: &[u8]) -> bool {
        f(expr).matches(frame)
    }

    /// Each expression matches exactly the frames marked true.
    fn check(expr: &str, cases: &[(&[u8], bool)]) {
        let filter = f(expr);
        for (i, (frame, want)) in cases.iter().enumerate() {
            assert_eq!(filter.matches(frame), *want, "{expr:?} on case {i}");
        }
    }

    fn err(expr: &str) -> FilterError {
        match Filter::parse(expr) {
            Ok(f) => panic!("{expr:?} parsed: {f:?}"),
            Err(e) => e,
        }
    }

    // -- API -----------------------------------------------------------------------------------

    #[test]
    fn filter_empty_matches_everything() {
        for expr in ["", " ", "\t\n  "] {
            let filter = f(expr);
            assert!(filter.is_match_all());
            assert_eq!(filter.expr(), expr);
            assert!(filter.matches(&[]));
            assert!(filter.matches(&[1, 2, 3]));
            for frame in all_frames() {
                assert!(filter.matches(&frame));
            }
        }
        assert!(!f("len >= 0").is_match_all());
        assert!(!f("ip").is_match_all());
    }

    #[test]
    fn filter_from_str_clone_expr_display() {
        let filter: Filter = " udp and port 53 ".parse().unwrap();
        assert_eq!(filter.expr(), " udp and port 53 ");
        let copy = filter.clone();
        assert!(copy.matches(&v4_udp()));
        assert!(!copy.matches(&v4_tcp_options()));
        assert!(format!("{copy:?}").contains("udp and port 53"));

        let e = "port http".parse::<Filter>().unwrap_err();
        assert_eq!(e.pos, 5);
        assert_eq!(
            e.to_string(),
            "at column 6: expected a port number 0..65535, found \"http\""
        );
        let boxed: Box<dyn std::error::Error> = Box::new(e);
        assert!(boxed.to_string().starts_with("at column 6:"));
    }

    // -- Primitives ----------------------------------------------------------------------------

    #[test]
    fn filter_ethertype_primitives() {
        let (u4, v6, a, q) = (v4_udp(), vlan_v6_udp(), arp(), qinq_v4_udp());
        let cases = |i4, i6, ar, qq| [(&u4[..], i4), (&v6[..], i6), (&a[..], ar), (&q[..], qq)];
        check("ip", &cases(true, false, false, true));
        check("ip6", &cases(false, true, false, false));
        check("arp", &cases(false, false, true, false));
        check("ether proto 0x0800", &cases(true, false, false, true));
        check("ether proto 2048", &cases(true, false, false, true));
        check("ether proto 0x86DD", &cases(false, true, false, false));
        check("ether proto 0x0806", &cases(false, false, true, false));
        // Tags are looked through, so the TPID is never the EtherType.
        check("ether proto 0x8100", &cases(false, false, false, false));
        check("ether proto 0x88a8", &cases(false, false, false, false));
    }

    #[test]
    fn filter_protocol_primitives() {
        let frames = all_frames();
        let expect = |expr: &str, want: &[bool]| {
            let filter = f(expr);
            let got: Vec<bool> = frames.iter().map(|fr| filter.matches(fr)).collect();
            assert_eq!(got, want, "{expr:?}");
        };
        // Order: v4_udp, v4_tcp_options, v4_udp_fragment, vlan_v6_udp, v6_hbh_tcp,
        // v6_chain_first_fragment, v6_fragment, qinq_v4_udp, v4_icmp, v6_icmp, arp.
        let udp = [
            true, false, true, true, false, true, true, true, false, false, false,
        ];
        let tcp = [
            false, true, false, false, true, false, false, false, false, false, false,
        ];
        let icmp = [
            false, false, false, false, false, false, false, false, true, false, false,
        ];
        let icmp6 = [
            false, false, false, false, false, false, false, false, false, true, false,
        ];
        expect("udp", &udp);
        expect("proto 17", &udp);
        expect("proto udp", &udp);
        expect("proto 0x11", &udp);
        expect("tcp", &tcp);
        expect("proto tcp", &tcp);
        expect("proto 6", &tcp);
        expect("icmp", &icmp);
        expect("proto icmp", &icmp);
        expect("icmp6", &icmp6);
        expect("proto icmp6", &icmp6);
        expect("proto 58", &icmp6);
        expect("proto 0", &[false; 11]); // hop-by-hop is skipped, not reported
        expect("proto 44", &[false; 11]); // so is the fragment header
        expect(
            "ip proto udp",
            &[
                true, false, true, false, false, false, false, true, false, false, false,
            ],
        );
        expect(
            "ip6 proto 17",
            &[
                false, false, false, true, false, true, true, false, false, false, false,
            ],
        );
        expect(
            "ip6 proto tcp",
            &[
                false, false, false, false, true, false, false, false, false, false, false,
            ],
        );
    }

    #[test]
    fn filter_proto_on_odd_headers() {
        // ICMP number on IPv6 is not "icmp", and ICMPv6 number on IPv4 is not "icmp6".
        let v6_proto1 = eth(ETHERTYPE_IPV6, &ipv6("::1", "::2", 1, &[0; 8]));
        assert!(!m("icmp", &v6_proto1));
        assert!(m("proto 1", &v6_proto1));
        let v4_proto58 = eth(
            ETHERTYPE_IPV4,
            &ipv4("1.1.1.1", "2.2.2.2", 58, 0, &[], &[0; 8]),
        );
        assert!(!m("icmp6", &v4_proto58));
        assert!(m("proto icmp6", &v4_proto58));
        // An unskipped header (AH, 51) is the upper protocol; no next header (59) too.
        let ah = eth(
            ETHERTYPE_IPV6,
            &ipv6("::1", "::2", 51, &[17, 1, 0, 0, 0, 0, 0, 0]),
        );
        assert!(m("proto 51", &ah) && !m("udp", &ah));
        let none = eth(ETHERTYPE_IPV6, &ipv6("::1", "::2", 59, &[]));
        assert!(m("proto 59", &none));
        // More than 8 extension headers: the upper protocol is unknown.
        let chain = |n: usize| {
            let mut payload = ext_header(17, &udp(1, 2, b""));
            for _ in 1..n {
                payload = ext_header(60, &payload);
            }
            eth(ETHERTYPE_IPV6, &ipv6("::1", "::2", 60, &payload))
        };
        let long = chain(9);
        assert!(!m("udp", &long) && !m("port 2", &long) && m("ip6", &long) && m("host ::1", &long));
        // Eight are fine.
        let ok = chain(8);
        assert!(m("udp and port 2", &ok));
    }

    #[test]
    fn filter_vlan() {
        let (plain, one, two) = (v4_udp(), vlan_v6_udp(), qinq_v4_udp());
        let cases = |a, b, c| [(&plain[..], a), (&one[..], b), (&two[..], c)];
        check("vlan", &cases(false, true, true));
        check("vlan 100", &cases(false, true, false));
        check("vlan 10", &cases(false, false, true));
        check("vlan 20", &cases(false, false, false)); // only the outermost tag
        check("vlan 0x64", &cases(false, true, false));
        check("vlan and ip", &cases(false, false, true));
        check("vlan or ip", &cases(true, true, true));
        check("not vlan", &cases(true, false, false));
        // Look-through for every primitive, no "vlan and" needed.
        check("ip6 and udp and dst port 53", &cases(false, true, false));
        check("src host 2001:db8::1", &cases(false, true, false));
        check("host 172.16.5.5 and port 68", &cases(false, false, true));
        check("ether src 02:00:00:00:00:0a", &cases(true, true, true));
        // Priority bits do not leak into the id.
        let prio = eth_tagged(&[(TPID_8021Q, 0xf000 | 7)], ETHERTYPE_IPV4, &[]);
        assert!(m("vlan 7", &prio));
        // A third tag is not looked through: its TPID is then the EtherType.
        let three = eth_tagged(
            &[(TPID_8021AD, 1), (TPID_8021Q, 2), (TPID_8021Q, 3)],
            ETHERTYPE_IPV4,
            &ipv4("1.1.1.1", "2.2.2.2", 17, 0, &[], &udp(1, 2, b"")),
        );
        assert!(m("vlan 1", &three) && m("ether proto 0x8100", &three) && !m("ip", &three));
        // A truncated tag is no tag.
        let cut = eth_tagged(&[], TPID_8021Q, &[0, 5]);
        assert!(!m("vlan", &cut) && !m("vlan 5", &cut) && m("ether host 02:00:00:00:00:0a", &cut));
    }

    #[test]
    fn filter_host() {
        let (u4, t4, v6, a) = (v4_udp(), v4_tcp_options(), vlan_v6_udp(), arp());
        let cases = |w, x, y, z| [(&u4[..], w), (&t4[..], x), (&v6[..], y), (&a[..], z)];
        check("host 10.0.0.1", &cases(true, false, false, true));
        check("src host 10.0.0.1", &cases(true, false, false, true));
        check("dst host 10.0.0.1", &cases(false, false, false, false));
        check("host 192.168.1.10", &cases(true, false, false, false));
        check("dst host 192.168.1.10", &cases(true, false, false, false));
        check("src host 192.168.1.10", &cases(false, false, false, false));
        check("host 10.1.2.3", &cases(false, true, false, false));
        check("dst host 10.0.0.254", &cases(false, false, false, true)); // ARP target
        check("ip host 10.0.0.1", &cases(true, false, false, false)); // not ARP
        check("ip src host 10.0.0.1", &cases(true, false, false, false));
        check("host 2001:db8::1", &cases(false, false, true, false));
        check("host 2001:db8:1::2", &cases(false, false, true, false));
        check("src host 2001:db8:1::2", &cases(false, false, false, false));
        check("dst host 2001:db8:1::2", &cases(false, false, true, false));
        check("ip6 host 2001:db8::1", &cases(false, false, true, false));
        check(
            "ip6 dst host 2001:db8::1",
            &cases(false, false, false, false),
        );
        // An IPv4-mapped address is not the IPv4 address.
        check("host ::ffff:10.0.0.1", &cases(false, false, false, false));
        check("host 10.0.0.3", &cases(false, false, false, false));
    }

    #[test]
    fn filter_net() {
        let (u4, t4, v6, hbh, a) = (
            v4_udp(),
            v4_tcp_options(),
            vlan_v6_udp(),
            v6_hbh_tcp(),
            arp(),
        );
        let cases = |v, w, x, y, z| {
            [
                (&u4[..], v),
                (&t4[..], w),
                (&v6[..], x),
                (&hbh[..], y),
                (&a[..], z),
            ]
        };
        check("net 10.0.0.0/8", &cases(true, true, false, false, true));
        check("net 10.0.0.0/24", &cases(true, true, false, false, true));
        check(
            "dst net 10.0.0.0/8",
            &cases(false, true, false, false, true),
        );
        check(
            "src net 192.168.0.0/16",
            &cases(false, false, false, false, false),
        );
        check(
            "dst net 192.168.0.0/16",
            &cases(true, false, false, false, false),
        );
        check("net 10.1.2.3/32", &cases(false, true, false, false, false));
        check("net 0.0.0.0/0", &cases(true, true, false, false, true));
        check("ip net 0.0.0.0/0", &cases(true, true, false, false, false));
        check(
            "net 2001:db8::/32",
            &cases(false, false, true, false, false),
        );
        check(
            "src net 2001:db8::/48",
            &cases(false, false, true, false, false),
        );
        check(
            "dst net 2001:db8::/48",
            &cases(false, false, false, false, false),
        );
        check(
            "dst net 2001:db8:1::/48",
            &cases(false, false, true, false, false),
        );
        check("net fe80::/10", &cases(false, false, false, true, false));
        check("net fe80::2/128", &cases(false, false, false, true, false));
        check("net ::/0", &cases(false, false, true, true, false));
        check("ip6 net ::/0", &cases(false, false, true, true, false));
    }

    #[test]
    fn filter_ports() {
        let (u4, t4, v6, hbh, q) = (
            v4_udp(),
            v4_tcp_options(),
            vlan_v6_udp(),
            v6_hbh_tcp(),
            qinq_v4_udp(),
        );
        let cases = |v, w, x, y, z| {
            [
                (&u4[..], v),
                (&t4[..], w),
                (&v6[..], x),
                (&hbh[..], y),
                (&q[..], z),
            ]
        };
        check("port 53", &cases(true, false, true, false, false));
        check("dst port 53", &cases(true, false, true, false, false));
        check("src port 53", &cases(false, false, false, false, false));
        check("src port 1234", &cases(true, false, false, false, false));
        check("port 80", &cases(false, true, false, false, false)); // after IPv4 options
        check("src port 40000", &cases(false, true, false, false, false));
        check("port 443", &cases(false, false, false, true, false)); // after hop-by-hop
        check("dst port 443", &cases(false, false, false, true, false));
        check("src port 443", &cases(false, false, false, false, false));
        check("port 68", &cases(false, false, false, false, true)); // under Q-in-Q
        check("portrange 50-60", &cases(true, false, true, false, false));
        check("portrange 53-53", &cases(true, false, true, false, false));
        check("portrange 54-100", &cases(false, true, false, false, true));
        check(
            "src portrange 1000-6000",
            &cases(true, false, true, false, false),
        );
        check(
            "dst portrange 0-65535",
            &cases(true, true, true, true, true),
        );
        check("tcp port 80", &cases(false, true, false, false, false));
        check("udp port 80", &cases(false, false, false, false, false));
        check("udp port 53", &cases(true, false, true, false, false));
        check("udp dst port 53", &cases(true, false, true, false, false));
        check("tcp dst port 53", &cases(false, false, false, false, false));
        check(
            "tcp src portrange 40000-50000",
            &cases(false, true, false, true, false),
        );
        check(
            "udp portrange 60-70",
            &cases(false, false, false, false, true),
        );
        // ICMP, ARP and unknown protocols have no ports.
        assert!(!m("port 0 or port 2048 or port 8", &v4_icmp()));
        assert!(!m("portrange 0-65535", &arp()));
        let sctp = eth(
            ETHERTYPE_IPV4,
            &ipv4("1.1.1.1", "2.2.2.2", 132, 0, &[], &udp(1, 2, b"")),
        );
        assert!(!m("portrange 0-65535", &sctp));
    }

    #[test]
    fn filter_fragments_have_no_ports() {
        let (frag4, frag6, first6) = (v4_udp_fragment(), v6_fragment(), v6_chain_first_fragment());
        assert!(m("udp", &frag4) && m("proto 17", &frag4) && m("host 10.0.0.1", &frag4));
        assert!(!m("port 53", &frag4) && !m("src port 1234", &frag4) && !m("udp port 53", &frag4));
        assert!(!m("portrange 0-65535", &frag4));
        assert!(m("udp", &frag6) && m("ip6 proto udp", &frag6) && m("host 2001:db8::2", &frag6));
        assert!(!m("port 9", &frag6) && !m("portrange 0-65535", &frag6));
        // A first fragment (offset 0, more fragments) behind routing and dst-options has ports.
        assert!(m("udp and src port 7 and dst port 9", &first6));
        // An IPv4 first fragment with MF set has ports too.
        let mf = eth(
            ETHERTYPE_IPV4,
            &ipv4("1.1.1.1", "2.2.2.2", 17, 0x2000, &[], &udp(5, 6, b"")),
        );
        assert!(m("src port 5 and dst port 6", &mf));
    }

    #[test]
    fn filter_ipv4_lengths() {
        // Total length stops before the ports: Ethernet padding is not read as a UDP header.
        let mut ip = ipv4("1.1.1.1", "2.2.2.2", 17, 0, &[], &[]);
        ip.extend_from_slice(&udp(53, 53, b"")); // padding that looks like ports
        let padded = eth(ETHERTYPE_IPV4, &ip);
        assert!(m("udp and host 1.1.1.1", &padded) && !m("port 53", &padded));
        // Total length beyond the frame (cut capture): what is there is used.
        let mut full = v4_udp();
        full.truncate(14 + 20 + 4);
        assert!(m("port 53 and src port 1234", &full));
        full.truncate(14 + 20 + 3);
        assert!(m("udp and host 10.0.0.1", &full) && !m("port 53", &full));
        // IHL below 5, total length below the IHL, and a wrong version are not IPv4.
        for (byte, value) in [(14, 0x44), (14, 0x65), (17, 0), (17, 19)] {
            let mut bad = v4_udp();
            bad[byte] = value;
            assert!(m("ip", &bad), "EtherType still says IPv4");
            assert!(
                !m("udp or host 10.0.0.1 or port 53 or net 0.0.0.0/0", &bad),
                "{byte}={value}"
            );
        }
        // IHL beyond the frame.
        let mut bad = v4_udp();
        bad[14] = 0x4f;
        bad.truncate(14 + 40);
        assert!(!m("udp or host 10.0.0.1", &bad));
    }

    #[test]
    fn filter_ipv6_lengths() {
        // Payload length shorter than the hop-by-hop header: the walk stops, the addresses stay.
        let mut hbh = v6_hbh_tcp();
        hbh[14 + 4..14 + 6].copy_from_slice(&4u16.to_be_bytes());
        assert!(m("ip6 and host fe80::1", &hbh) && !m("tcp", &hbh) && !m("port 443", &hbh));
        // Payload length 0: the rest of the frame is the payload.
        let mut zero = v6_hbh_tcp();
        zero[14 + 4..14 + 6].copy_from_slice(&0u16.to_be_bytes());
        assert!(m("tcp and port 443", &zero));
        // Padding after the payload is not read.
        let mut ip = ipv6("::1", "::2", 17, &[0, 9, 0]);
        ip.extend_from_slice(&udp(9, 9, b""));
        let padded = eth(ETHERTYPE_IPV6, &ip);
        assert!(m("udp", &padded) && !m("port 9", &padded));
        // Version 4 in an IPv6 EtherType.
        let mut bad = vlan_v6_udp();
        bad[18] = 0x40;
        assert!(m("ip6", &bad) && !m("udp or host 2001:db8::1 or port 53", &bad));
    }

    #[test]
    fn filter_arp() {
        let a = arp();
        assert!(m("arp and src host 10.0.0.1 and dst host 10.0.0.254", &a));
        assert!(m("arp and net 10.0.0.0/24", &a));
        assert!(!m("ip or ip6 or udp or proto 0 or port 0", &a));
        // Not Ethernet/IPv4 ARP: no addresses.
        let mut odd = arp();
        odd[14 + 5] = 16;
        assert!(m("arp", &odd) && !m("host 10.0.0.1", &odd));
        let short = &a[..14 + 27];
        assert!(m("arp", short) && !m("host 10.0.0.254", short));
        assert!(m("host 10.0.0.254", &a[..14 + 28]));
    }

    #[test]
    fn filter_ether_host() {
        let frame = v4_udp(); // MAC_A -> MAC_B
        check(
            "ether host 02:00:00:00:00:0a",
            &[
                (&frame, true),
                (&frame[..14], true),
                (&frame[..13], false),
                (&[], false),
            ],
        );
        assert!(m("ether src 02:00:00:00:00:0a", &frame));
        assert!(m("ether src host 02:00:00:00:00:0a", &frame));
        assert!(!m("ether dst 02:00:00:00:00:0a", &frame));
        assert!(m("ether dst host 02:00:00:00:00:0B", &frame));
        assert!(m("ether dst 2:0:0:0:0:b", &frame));
        assert!(m("ether host 02:00:00:00:00:0b", &frame));
        assert!(!m("ether host ff:ff:ff:ff:ff:ff", &frame));
    }

    #[test]
    fn filter_len() {
        let frame = v4_udp();
        let n = frame.len();
        let cases = |expr: String, want: [bool; 3]| {
            check(
                &expr,
                &[
                    (&frame[..n - 1], want[0]),
                    (&frame, want[1]),
                    (&[0u8; 200][..], want[2]),
                ],
            );
        };
        cases(format!("len <= {n}"), [true, true, false]);
        cases(format!("len >= {n}"), [false, true, true]);
        cases(format!("len<={n}"), [true, true, false]);
        cases(format!("less {n}"), [true, true, false]);
        cases(format!("greater {n}"), [false, true, true]);
        cases(format!("greater {}", n + 1), [false, false, true]);
        cases(format!("less {}", n - 2), [false, false, false]);
        assert!(m("len <= 0", &[]) && m("len >= 0", &[]) && !m("greater 1", &[]));
        assert!(!m("len >= 4294967295", &[]));
    }

    // -- Operators -----------------------------------------------------------------------------

    #[test]
    fn filter_precedence_and_operators() {
        let frame = v4_udp(); // ip, udp, not tcp, not arp
                              // `and` binds tighter: arp or (udp and tcp) is false; (arp or udp) and tcp too; check a
                              // case where the two readings differ.
        assert!(m("udp or arp and tcp", &frame)); // udp or (arp and tcp)
        assert!(!m("(udp or arp) and tcp", &frame));
        assert!(m("tcp and arp or udp", &frame)); // (tcp and arp) or udp
        assert!(!m("tcp and (arp or udp)", &frame));
        assert!(m("udp || arp && tcp", &frame));
        assert!(m("udp||arp&&tcp", &frame));
        assert!(!m("(udp||arp)&&tcp", &frame));
        // not binds tightest.
        assert!(!m("not udp or tcp", &frame)); // (not udp) or tcp
        assert!(m("not (udp and tcp)", &frame));
        assert!(m("not tcp and udp", &frame)); // (not tcp) and udp
        assert!(!m("not (tcp or udp)", &frame));
        assert!(m("!tcp && !arp", &frame));
        assert!(m("! ! udp", &frame) && m("not not udp", &frame) && !m("!!!udp", &frame));
        assert!(m("((((udp))))", &frame));
        assert!(m(
            "(ip and (udp or tcp)) and not (port 80 or port 443)",
            &frame
        ));
        assert!(m(
            "ip and udp and port 53 and host 10.0.0.1 and len >= 40",
            &frame
        ));
        assert!(!m(
            "ip and udp and port 53 and host 10.0.0.1 and len >= 400",
            &frame
        ));
        assert!(m("arp or icmp or icmp6 or udp", &frame));
        assert!(!m("arp or icmp or icmp6 or tcp", &frame));
    }

    #[test]
    fn filter_long_chains_and_deep_nesting() {
        let frame = v4_udp();
        let chain = vec!["udp"; 20_000].join(" and ");
        assert!(m(&chain, &frame));
        let chain = vec!["tcp"; 20_000].join(" or ") + " or udp";
        assert!(m(&chain, &frame));
        let nested = format!("{}udp{}", "(".repeat(MAX_DEPTH), ")".repeat(MAX_DEPTH));
        assert!(m(&nested, &frame));
        let nots = format!("{}udp", "not ".repeat(MAX_DEPTH));
        assert!(m(&nots, &frame));
        let e = err(&format!(
            "{}udp{}",
            "(".repeat(100_000),
            ")".repeat(100_000)
        ));
        assert_eq!(e.pos, MAX_DEPTH);
        assert!(e.message.contains("nested too deeply"), "{e}");
        let e = err(&"!".repeat(100_000));
        assert_eq!(e.pos, MAX_DEPTH);
    }

    // -- Errors --------------------------------------------------------------------------------

    #[test]
    fn filter_errors() {
        let cases: &[(&str, usize, &str)] = &[
            ("dst port http", 9, "expected a port number 0..65535, found \"http\""),
            ("port 65536", 5, "expected a port number 0..65535, found \"65536\""),
            ("port -1", 5, "expected a port number 0..65535, found \"-1\""),
            ("port +1", 5, "expected a port number 0..65535, found \"+1\""),
            ("port", 4, "expected a port number 0..65535, found end of expression"),
            ("port )", 5, "expected a port number 0..65535, found \")\""),
            ("hots 10.0.0.1", 0, "unknown primitive \"hots\""),
            ("ip and IP", 7, "unknown primitive \"IP\""),
            ("udp and", 7, "expected a primitive after \"and\", found end of expression"),
            ("udp &&", 6, "expected a primitive after \"&&\", found end of expression"),
            ("udp or", 6, "expected a primitive after \"or\", found end of expression"),
            ("udp and or tcp", 8, "expected a primitive after \"and\", found \"or\""),
            ("and udp", 0, "expected a primitive, found \"and\""),
            ("not", 3, "expected a primitive after \"not\", found end of expression"),
            ("!", 1, "expected a primitive after \"!\", found end of expression"),
            ("()", 1, "expected a primitive after \"(\", found \")\""),
            (")", 0, "expected a primitive, found \")\""),
            (
                "(udp or tcp",
                11,
                "expected \"and\", \"or\" or \")\" to close the \"(\" at column 1, found end of expression",
            ),
            (
                "ip and (udp tcp)",
                12,
                "expected \"and\", \"or\" or \")\" to close the \"(\" at column 8, found \"tcp\"",
            ),
            ("udp)", 3, "unbalanced \")\": no \"(\" to close"),
            ("(udp))", 5, "unbalanced \")\": no \"(\" to close"),
            ("udp tcp", 4, "expected \"and\", \"or\" or end of expression, found \"tcp\""),
            ("udp (tcp)", 4, "expected \"and\", \"or\" or end of expression, found \"(\""),
            ("port 53 80", 8, "expected \"and\", \"or\" or end of expression, found \"80\""),
            ("udp & tcp", 4, "unexpected \"&\" (use \"&&\" or \"and\")"),
            ("udp | tcp", 4, "unexpected \"|\" (use \"||\" or \"or\")"),
            ("len < 5", 4, "unexpected '<': the only comparisons are \"len <= N\" and \"len >= N\""),
            ("len == 5", 4, "unexpected '=': the only comparisons are \"len <= N\" and \"len >= N\""),
            ("len 5", 4, "expected \"<=\" or \">=\" after \"len\", found \"5\""),
            ("len", 3, "expected \"<=\" or \">=\" after \"len\", found end of expression"),
            ("len >= x", 7, "expected a frame length in bytes, found \"x\""),
            ("greater 4294967296", 8, "expected a frame length in bytes, found \"4294967296\""),
            ("less", 4, "expected a frame length in bytes, found end of expression"),
            ("<= 5", 0, "expected a primitive, found \"<=\""),
            ("host", 4, "expected an IPv4 or IPv6 address, found end of expression"),
            ("host foo", 5, "expected an IPv4 or IPv6 address, found \"foo\""),
            ("src host 10.0.0.256", 9, "expected an IPv4 or IPv6 address, found \"10.0.0.256\""),
            ("ip host ::1", 8, "expected an IPv4 address, found \"::1\""),
            ("ip6 src host 10.0.0.1", 13, "expected an IPv6 address, found \"10.0.0.1\""),
            ("src", 3, "expected \"host\", \"net\", \"port\" or \"portrange\" after \"src\", found end of expression"),
            ("dst 10.0.0.1", 4, "expected \"host\", \"net\", \"port\" or \"portrange\" after \"dst\", found \"10.0.0.1\""),
            ("ip src port 53", 7, "expected \"host\" or \"net\" after \"src\", found \"port\""),
            ("tcp dst host 1.1.1.1", 8, "expected \"port\" or \"portrange\" after \"dst\", found \"host\""),
            ("net 10.0.0.0", 4, "expected an IPv4 or IPv6 network PREFIX/LEN, found \"10.0.0.0\""),
            ("net ten/8", 4, "expected an IPv4 or IPv6 network PREFIX/LEN, found \"ten/8\""),
            ("net 10.0.0.0/33", 13, "expected a prefix length 0..32, found \"33\""),
            ("net 10.0.0.0/", 13, "expected a prefix length 0..32, found \"\""),
            ("net ::/129", 7, "expected a prefix length 0..128, found \"129\""),
            ("net 10.0.0.1/8", 4, "non-network bits set in \"10.0.0.1/8\""),
            ("dst net 2001:db8::1/64", 8, "non-network bits set in \"2001:db8::1/64\""),
            ("ip6 net 10.0.0.0/8", 8, "expected an IPv6 network PREFIX/LEN, found \"10.0.0.0/8\""),
            ("portrange 10", 10, "expected a port range A-B with ports 0..65535, found \"10\""),
            ("portrange 1-70000", 10, "expected a port range A-B with ports 0..65535, found \"1-70000\""),
            ("portrange 20-10", 10, "port range \"20-10\" is empty: 20 is greater than 10"),
            ("proto", 5, "expected an IP protocol number 0..255 or one of udp, tcp, icmp, icmp6, found end of expression"),
            ("proto 256", 6, "expected an IP protocol number 0..255 or one of udp, tcp, icmp, icmp6, found \"256\""),
            ("ip proto gre", 9, "expected an IP protocol number 0..255 or one of udp, tcp, icmp, icmp6, found \"gre\""),
            ("vlan 4096", 5, "expected a VLAN id 0..4095, found \"4096\""),
            ("vlan x", 5, "expected a VLAN id 0..4095, found \"x\""),
            ("ether", 5, "expected \"host\", \"src\", \"dst\" or \"proto\" after \"ether\", found end of expression"),
            ("ether 02:00:00:00:00:0a", 6, "expected \"host\", \"src\", \"dst\" or \"proto\" after \"ether\", found \"02:00:00:00:00:0a\""),
            ("ether host 02:00:00:00:00", 11, "expected a MAC address like aa:bb:cc:dd:ee:ff, found \"02:00:00:00:00\""),
            ("ether src 02:00:00:00:00:0a:0b", 10, "expected a MAC address like aa:bb:cc:dd:ee:ff, found \"02:00:00:00:00:0a:0b\""),
            ("ether dst host 002:00:00:00:00:0a", 15, "expected a MAC address like aa:bb:cc:dd:ee:ff, found \"002:00:00:00:00:0a\""),
            ("ether proto 0x10000", 12, "expected an EtherType 0..65535 (decimal or 0x hex), found \"0x10000\""),
            ("ether proto 0x", 12, "expected an EtherType 0..65535 (decimal or 0x hex), found \"0x\""),
            ("UDP", 0, "unknown primitive \"UDP\""),
            ("  udp  and  hots", 12, "unknown primitive \"hots\""),
        ];
        for &(expr, pos, message) in cases {
            let e = err(expr);
            assert_eq!((e.pos, e.message.as_str()), (pos, message), "{expr:?}");
            assert_eq!(e.to_string(), format!("at column {}: {message}", pos + 1));
        }
    }

    #[test]
    fn filter_error_positions_are_byte_offsets() {
        let e = err("host é");
        assert_eq!(
            (e.pos, e.message.as_str()),
            (5, "expected an IPv4 or IPv6 address, found \"é\"")
        );
        let e = err("é and udp");
        assert_eq!((e.pos, e.message.as_str()), (0, "unknown primitive \"é\""));
        let e = err("é & ip");
        assert_eq!(e.pos, 3); // "é" is two bytes
        let e = err("udp\u{0}");
        assert_eq!(
            (e.pos, e.message.as_str()),
            (0, "unknown primitive \"udp\\0\"")
        );
    }

    // -- Robustness ----------------------------------------------------------------------------

    /// xorshift64: small, seeded, reproducible.
    struct XorShift(u64);

    impl XorShift {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    const FILTERS: &[&str] = &[
        "",
        "ip",
        "ip6",
        "arp",
        "udp",
        "tcp",
        "icmp",
        "icmp6",
        "proto 0",
        "proto 44",
        "proto 51",
        "vlan",
        "vlan 0",
        "vlan 4095",
        "host 10.0.0.1",
        "src host 0.0.0.0",
        "dst host ::",
        "net 0.0.0.0/0",
        "net ::/0",
        "src net 10.0.0.0/8",
        "dst net 2001:db8::/32",
        "port 0",
        "src port 53",
        "dst portrange 0-65535",
        "tcp port 80",
        "udp src portrange 1-1024",
        "ether host 00:00:00:00:00:00",
        "ether src ff:ff:ff:ff:ff:ff",
        "ether proto 0",
        "ether proto 0x8100",
        "len <= 64",
        "greater 100",
        "ip and udp and not port 53",
        "(arp or icmp) and not vlan 5",
        "ip6 proto 17 or ip proto 6",
        "ip host 10.0.0.1 or ip6 net fe80::/10",
    ];

    /// Random bytes shaped like Ethernet with tags, IPv4, IPv6 with extension headers or ARP
    /// often enough that the deeper decoding runs.
    fn shaped_frame(rng: &mut XorShift) -> Vec<u8> {
        let len = match rng.below(4) {
            0 => rng.below(20),
            1 => rng.below(64),
            _ => rng.below(160),
        } as usize;
        let mut d: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        let mut at = 12;
        let put16 = |d: &mut Vec<u8>, at: usize, v: u16| {
            if at + 2 <= d.len() {
                d[at..at + 2].copy_from_slice(&v.to_be_bytes());
            }
        };
        for _ in 0..rng.below(4) {
            let tpid = [TPID_8021Q, TPID_8021AD][rng.below(2) as usize];
            put16(&mut d, at, tpid);
            at += 4;
        }
        let ethertype = [
            ETHERTYPE_IPV4,
            ETHERTYPE_IPV6,
            ETHERTYPE_ARP,
            rng.next() as u16,
        ][rng.below(4) as usize];
        put16(&mut d, at, ethertype);
        let l3 = at + 2;
        if l3 >= d.len() {
            return d;
        }
        let fit = (d.len() - l3) as u16;
        match ethertype {
            ETHERTYPE_IPV4 => {
                d[l3] = 0x45 + rng.below(3) as u8;
                let total = if rng.below(4) == 0 {
                    rng.next() as u16
                } else {
                    fit
                };
                put16(&mut d, l3 + 2, total);
                if rng.below(2) == 0 {
                    put16(&mut d, l3 + 6, 0);
                }
                if l3 + 9 < d.len() {
                    d[l3 + 9] = [1, 6, 17, 58][rng.below(4) as usize];
                }
            }
            ETHERTYPE_IPV6 => {
                d[l3] = 0x60;
                let plen = if rng.below(4) == 0 {
                    rng.next() as u16
                } else {
                    fit.saturating_sub(40)
                };
                put16(&mut d, l3 + 4, plen);
                // A chain of small extension headers; `next_at` is the byte naming the next one.
                let mut next_at = l3 + 6;
                let mut h = l3 + 40;
                for _ in 0..rng.below(5) {
                    if next_at >= d.len() {
                        break;
                    }
                    let ext = [0, 43, 60, 44][rng.below(4) as usize];
                    d[next_at] = ext;
                    next_at = h;
                    if ext == 44 {
                        if rng.below(2) == 0 {
                            put16(&mut d, h + 2, 0); // a first fragment
                        }
                        h += 8;
                    } else {
                        let units = rng.below(2) as u8;
                        if h + 1 < d.len() {
                            d[h + 1] = units;
                        }
                        h += 8 * (usize::from(units) + 1);
                    }
                }
                if next_at < d.len() {
                    d[next_at] = [6, 17, 58, 59][rng.below(4) as usize];
                }
            }
            ETHERTYPE_ARP => {
                for (i, b) in [0u8, 1, 8, 0, 6, 4].into_iter().enumerate() {
                    if l3 + i < d.len() && rng.below(8) != 0 {
                        d[l3 + i] = b;
                    }
                }
            }
            _ => {}
        }
        d
    }

    fn compiled_filters() -> Vec<Filter> {
        FILTERS.iter().map(|e| f(e)).collect()
    }

    /// Every filter runs on the frame without panicking, and its negation gives the opposite answer.
    fn check_frame(filters: &[Filter], negated: &[Filter], frame: &[u8], case: &str) {
        for (filter, not) in filters.iter().zip(negated) {
            let x = filter.matches(frame);
            assert_eq!(not.matches(frame), !x, "not ({}) on {case}", filter.expr());
        }
    }

    fn negations(filters: &[Filter]) -> Vec<Filter> {
        filters
            .iter()
            .map(|x| {
                if x.is_match_all() {
                    f("not len >= 0")
                } else {
                    f(&format!("not ({})", x.expr()))
                }
            })
            .collect()
    }

    #[test]
    fn filter_never_panics_on_random_frames() {
        let filters = compiled_filters();
        let negated = negations(&filters);
        let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
        let mut hits = vec![0usize; filters.len()];
        for case in 0..5_000 {
            let frame = shaped_frame(&mut rng);
            check_frame(&filters, &negated, &frame, &format!("random case {case}"));
            for (h, filter) in hits.iter_mut().zip(&filters) {
                *h += usize::from(filter.matches(&frame));
            }
        }
        // The shaping is good enough that the primitives see both answers.
        for (expr, h) in FILTERS.iter().zip(&hits) {
            assert!(*h < 5_000 || expr.is_empty(), "{expr:?} matched everything");
        }
        let decoded = [
            "ip",
            "ip6",
            "arp",
            "udp",
            "tcp",
            "vlan",
            "net 0.0.0.0/0",
            "net ::/0",
            "dst portrange 0-65535",
        ];
        for (expr, h) in FILTERS.iter().zip(&hits) {
            if decoded.contains(expr) {
                assert!(*h > 0, "{expr:?} never matched a random frame");
            }
        }
    }

    #[test]
    fn filter_never_panics_on_truncations() {
        let filters = compiled_filters();
        let negated = negations(&filters);
        for (i, frame) in all_frames().iter().enumerate() {
            for len in 0..=frame.len() {
                check_frame(
                    &filters,
                    &negated,
                    &frame[..len],
                    &format!("frame {i} cut to {len}"),
                );
            }
        }
    }

    #[test]
    fn filter_negation_on_golden_frames() {
        let exprs = [
            "udp",
            "tcp and port 80",
            "vlan 100",
            "host 10.0.0.1",
            "net 2001:db8::/32",
            "arp or icmp",
            "ether src 02:00:00:00:00:0a",
            "len >= 80",
            "not ip6",
        ];
        for expr in exprs {
            let x = f(expr);
            let not = f(&format!("not ({expr})"));
            let bang = f(&format!("!({expr})"));
            for frame in all_frames() {
                assert_eq!(not.matches(&frame), !x.matches(&frame), "{expr:?}");
                assert_eq!(bang.matches(&frame), !x.matches(&frame), "{expr:?}");
                assert!(f(&format!("({expr}) or not ({expr})")).matches(&frame));
                assert!(!f(&format!("({expr}) and not ({expr})")).matches(&frame));
            }
        }
    }

    #[test]
    fn filter_parse_never_panics_on_random_expressions() {
        const WORDS: &[&str] = &[
            "ip",
            "ip6",
            "arp",
            "udp",
            "tcp",
            "icmp",
            "icmp6",
            "proto",
            "vlan",
            "host",
            "net",
            "port",
            "portrange",
            "ether",
            "src",
            "dst",
            "len",
            "greater",
            "less",
            "and",
            "or",
            "not",
            "&&",
            "||",
            "!",
            "(",
            ")",
            "<=",
            ">=",
            "<",
            "&",
            "17",
            "0x800",
            "4096",
            "10.0.0.0/8",
            "::1",
            "1-2",
            "2-1",
            "aa:bb:cc:dd:ee:ff",
            "é",
            "",
            "\u{0}",
        ];
        let frames = all_frames();
        let mut rng = XorShift(42);
        let mut parsed = 0;
        for _ in 0..5_000 {
            let n = rng.below(8) as usize;
            let expr: Vec<&str> = (0..n)
                .map(|_| WORDS[rng.below(WORDS.len() as u64) as usize])
                .collect();
            let sep = if rng.below(2) == 0 { " " } else { "" };
            let expr = expr.join(sep);
            match Filter::parse(&expr) {
                Ok(filter) => {
                    parsed += 1;
                    for frame in &frames {
                        filter.matches(frame);
                    }
                }
                Err(e) => assert!(e.pos <= expr.len(), "{expr:?}: {e}"),
            }
        }
        assert!(parsed > 100, "only {parsed} random expressions parsed");
    }
}
