//! DLSw's Switch-to-Switch Protocol (RFC 1795): the messages two DLSw peers exchange over TCP
//! (port 2065) to carry SNA and NetBIOS data links across an IP network.
//!
//! Every message starts with a header of its own stated length (byte 1): 16 bytes for the
//! messages that carry data on an established circuit or keep the transport alive (INFOFRAME,
//! KEEPALIVE, IFCM: the *info header*), 72 for the rest (the *control header*: the circuit's
//! MAC addresses, SAPs and both ends' identifiers). The 2-byte message length at offset 2
//! counts the bytes after the header, so a TCP stream is cut into messages by reading 4 bytes
//! ([`message_len`]).
//!
//! A circuit end is named by its DLC port ID and data link correlator; the *origin* is the DLSw
//! that sent CANUREACH, the *target* the one that answered. Info messages name only the
//! receiver's end (remote DLC and remote DLC port ID at offsets 4 and 8).
//!
//! The capabilities exchange (CAP_EXCHANGE) carries a GDS variable: a request (0x1520) with
//! control vectors (vendor ID, DLSw version, initial pacing window, supported SAPs, ...), a
//! positive response (0x1521) or a refusal (0x1522) with the offending vector and a cause.

use crate::{Error, Result};

/// TCP port of the SSP.
pub const PORT: u16 = 2065;
/// Version 1 (RFC 1795): ASCII '1'.
pub const VERSION: u8 = 0x31;
pub const INFO_HEADER: usize = 16;
pub const CONTROL_HEADER: usize = 72;
/// The control header's protocol ID and header number (RFC 1795 4).
pub const PROTOCOL_ID: u8 = 0x42;
pub const HEADER_NUMBER: u8 = 0x01;

/// Message types (RFC 1795 4, the values tshark's `dlsw` dissector names).
pub mod msg {
    pub const CANUREACH: u8 = 0x03;
    pub const ICANREACH: u8 = 0x04;
    pub const REACH_ACK: u8 = 0x05;
    pub const DGRMFRAME: u8 = 0x06;
    pub const XIDFRAME: u8 = 0x07;
    pub const CONTACT: u8 = 0x08;
    pub const CONTACTED: u8 = 0x09;
    pub const INFOFRAME: u8 = 0x0a;
    pub const ENTER_BUSY: u8 = 0x0c;
    pub const EXIT_BUSY: u8 = 0x0d;
    pub const HALT_DL: u8 = 0x0e;
    pub const DL_HALTED: u8 = 0x0f;
    pub const RESTART_DL: u8 = 0x10;
    pub const DL_RESTARTED: u8 = 0x11;
    pub const HALT_DL_NOACK: u8 = 0x19;
    pub const KEEPALIVE: u8 = 0x1d;
    pub const CAP_EXCHANGE: u8 = 0x20;
    pub const IFCM: u8 = 0x21;
    pub const TEST_CIRCUIT_REQ: u8 = 0x7a;
    pub const TEST_CIRCUIT_RSP: u8 = 0x7b;

    /// A message type's name, as `show` and traces print it.
    pub fn name(t: u8) -> &'static str {
        match t {
            CANUREACH => "CANUREACH",
            ICANREACH => "ICANREACH",
            REACH_ACK => "REACH_ACK",
            DGRMFRAME => "DGRMFRAME",
            XIDFRAME => "XIDFRAME",
            CONTACT => "CONTACT",
            CONTACTED => "CONTACTED",
            INFOFRAME => "INFOFRAME",
            ENTER_BUSY => "ENTER_BUSY",
            EXIT_BUSY => "EXIT_BUSY",
            HALT_DL => "HALT_DL",
            DL_HALTED => "DL_HALTED",
            RESTART_DL => "RESTART_DL",
            DL_RESTARTED => "DL_RESTARTED",
            HALT_DL_NOACK => "HALT_DL_NOACK",
            KEEPALIVE => "KEEPALIVE",
            CAP_EXCHANGE => "CAP_EXCHANGE",
            IFCM => "IFCM",
            TEST_CIRCUIT_REQ => "TEST_CIRCUIT_REQ",
            TEST_CIRCUIT_RSP => "TEST_CIRCUIT_RSP",
            _ => "unknown",
        }
    }

    /// The messages sent with the 16-byte info header.
    pub fn uses_info_header(t: u8) -> bool {
        matches!(t, INFOFRAME | KEEPALIVE | IFCM)
    }
}

/// SSP flags: the explorer bit (CANUREACH_ex / ICANREACH_ex, versus _cs: circuit start).
pub const SSP_EXPLORER: u8 = 0x80;
/// Frame direction (offset 38): origin to target, target to origin.
pub const DIR_FROM_ORIGIN: u8 = 0x01;
pub const DIR_FROM_TARGET: u8 = 0x02;

/// The flow control byte (RFC 1795 8.6): indicator, acknowledgement, operator.
pub mod flow {
    /// Flow Control Indicator: the sender asks for a window grant.
    pub const FCI: u8 = 0x80;
    /// Flow Control Acknowledgement: the receiver grants (with the operator).
    pub const FCA: u8 = 0x40;
    pub const OP_MASK: u8 = 0x07;
    pub const REPEAT: u8 = 0;
    pub const INCREMENT: u8 = 1;
    pub const DECREMENT: u8 = 2;
    pub const RESET: u8 = 3;
    pub const HALVE: u8 = 4;
}

/// The circuit fields of a control header.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Circuit {
    pub largest_frame: u8,
    pub ssp_flags: u8,
    pub priority: u8,
    pub target_mac: [u8; 6],
    pub origin_mac: [u8; 6],
    pub origin_sap: u8,
    pub target_sap: u8,
    pub direction: u8,
    pub dlc_header_len: u16,
    pub origin_port: u32,
    pub origin_dlc: u32,
    pub origin_transport: u32,
    pub target_port: u32,
    pub target_dlc: u32,
    pub target_transport: u32,
}

/// One message, read by [`parse`] (its data borrowed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Message<'a> {
    pub msg_type: u8,
    pub flow: u8,
    /// The receiver's circuit end (info messages; control messages carry it too, or zeros).
    pub remote_dlc: u32,
    pub remote_port: u32,
    /// The control header's fields; None for an info header.
    pub circuit: Option<Circuit>,
    /// What follows the header: an INFOFRAME's PIU, an XIDFRAME's XID, a CAP_EXCHANGE's GDS.
    pub data: &'a [u8],
}

fn be32(d: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([d[at], d[at + 1], d[at + 2], d[at + 3]])
}

fn mac(d: &[u8], at: usize) -> [u8; 6] {
    let mut m = [0u8; 6];
    m.copy_from_slice(&d[at..at + 6]);
    m
}

/// The length of the message at the front of a stream (header + data), once 4 bytes of it have
/// arrived: None before that. A header length that is neither 16 nor 72, or a version other
/// than 1, is `Malformed`: the stream cannot be cut into messages past it.
pub fn message_len(stream: &[u8]) -> Option<Result<usize>> {
    if stream.len() < 4 {
        return None;
    }
    let hl = stream[1] as usize;
    if stream[0] != VERSION || (hl != INFO_HEADER && hl != CONTROL_HEADER) {
        return Some(Err(Error::Malformed));
    }
    Some(Ok(hl + u16::from_be_bytes([stream[2], stream[3]]) as usize))
}

/// Reads one whole message (exactly [`message_len`] bytes, or more: the rest is ignored).
/// A header too short for its stated length, a message type whose header kind is the other
/// one, or a control header with the wrong protocol ID is `Malformed`.
pub fn parse(m: &[u8]) -> Result<Message<'_>> {
    let total = message_len(m).ok_or(Error::Truncated)??;
    if m.len() < total || m.len() < INFO_HEADER {
        return Err(Error::Truncated);
    }
    let hl = m[1] as usize;
    let msg_type = m[14];
    if msg::uses_info_header(msg_type) != (hl == INFO_HEADER) {
        return Err(Error::Malformed);
    }
    let circuit = if hl == CONTROL_HEADER {
        if m[16] != PROTOCOL_ID || m[23] != msg_type {
            return Err(Error::Malformed);
        }
        Some(Circuit {
            largest_frame: m[20],
            ssp_flags: m[21],
            priority: m[22] & 0x07,
            target_mac: mac(m, 24),
            origin_mac: mac(m, 30),
            origin_sap: m[36],
            target_sap: m[37],
            direction: m[38],
            dlc_header_len: u16::from_be_bytes([m[42], m[43]]),
            origin_port: be32(m, 44),
            origin_dlc: be32(m, 48),
            origin_transport: be32(m, 52),
            target_port: be32(m, 56),
            target_dlc: be32(m, 60),
            target_transport: be32(m, 64),
        })
    } else {
        None
    };
    Ok(Message {
        msg_type,
        flow: m[15],
        remote_dlc: be32(m, 4),
        remote_port: be32(m, 8),
        circuit,
        data: &m[hl..total],
    })
}

fn header(out: &mut Vec<u8>, hl: usize, data_len: usize, t: u8, flow: u8, dlc: u32, port: u32) {
    out.push(VERSION);
    out.push(hl as u8);
    out.extend_from_slice(&(data_len.min(u16::MAX as usize) as u16).to_be_bytes());
    out.extend_from_slice(&dlc.to_be_bytes());
    out.extend_from_slice(&port.to_be_bytes());
    out.extend_from_slice(&[0, 0, t, flow]);
}

/// Appends an info message (INFOFRAME, KEEPALIVE, IFCM) for the receiver's circuit end
/// (`remote_dlc`, `remote_port`). Data beyond 65,535 bytes is cut.
pub fn write_info(
    out: &mut Vec<u8>,
    t: u8,
    flow: u8,
    remote_dlc: u32,
    remote_port: u32,
    data: &[u8],
) {
    let data = &data[..data.len().min(u16::MAX as usize)];
    header(
        out,
        INFO_HEADER,
        data.len(),
        t,
        flow,
        remote_dlc,
        remote_port,
    );
    out.extend_from_slice(data);
}

/// Appends a control message. The header's remote DLC and port name the receiver's end: the
/// target's for a message from the origin, the origin's for one from the target (zeros while
/// that end has none).
pub fn write_control(out: &mut Vec<u8>, t: u8, flow: u8, c: &Circuit, data: &[u8]) {
    let data = &data[..data.len().min(u16::MAX as usize)];
    let (dlc, port) = if c.direction == DIR_FROM_TARGET {
        (c.origin_dlc, c.origin_port)
    } else {
        (c.target_dlc, c.target_port)
    };
    header(out, CONTROL_HEADER, data.len(), t, flow, dlc, port);
    out.extend_from_slice(&[PROTOCOL_ID, HEADER_NUMBER, 0, 0]);
    out.extend_from_slice(&[c.largest_frame, c.ssp_flags, c.priority & 0x07, t]);
    out.extend_from_slice(&c.target_mac);
    out.extend_from_slice(&c.origin_mac);
    out.extend_from_slice(&[c.origin_sap, c.target_sap, c.direction, 0, 0, 0]);
    out.extend_from_slice(&c.dlc_header_len.to_be_bytes());
    for v in [
        c.origin_port,
        c.origin_dlc,
        c.origin_transport,
        c.target_port,
        c.target_dlc,
        c.target_transport,
        0,
    ] {
        out.extend_from_slice(&v.to_be_bytes());
    }
    out.extend_from_slice(data);
}

/// GDS identifiers of the capabilities exchange.
pub const GDS_REQUEST: u16 = 0x1520;
pub const GDS_RESPONSE: u16 = 0x1521;
pub const GDS_REFUSE: u16 = 0x1522;

/// Control vector types (RFC 1795 7.7).
pub mod cv {
    pub const VENDOR_ID: u8 = 0x81;
    pub const VERSION: u8 = 0x82;
    pub const PACING_WINDOW: u8 = 0x83;
    pub const VERSION_STRING: u8 = 0x84;
    pub const MAC_EXCLUSIVITY: u8 = 0x85;
    pub const SAP_LIST: u8 = 0x86;
    pub const TCP_CONNECTIONS: u8 = 0x87;
}

/// Refusal causes (RFC 1795 7.7.11).
pub mod refuse {
    pub const BAD_GDS_LENGTH: u16 = 0x01;
    pub const BAD_GDS_ID: u16 = 0x02;
    pub const NO_VENDOR_ID: u16 = 0x03;
    pub const NO_VERSION: u16 = 0x04;
    pub const NO_PACING_WINDOW: u16 = 0x05;
    pub const BAD_CV_LENGTHS: u16 = 0x06;
    pub const BAD_CV_ID: u16 = 0x07;
    pub const BAD_CV_LENGTH: u16 = 0x08;
    pub const BAD_CV_VALUE: u16 = 0x09;
    pub const DUPLICATE_CV: u16 = 0x0a;
    pub const OUT_OF_SEQUENCE: u16 = 0x0b;
    pub const NO_SAP_LIST: u16 = 0x0c;
}

/// A DLSw's capabilities, as its request carries them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Capabilities {
    pub vendor: [u8; 3],
    pub version: (u8, u8),
    pub pacing_window: u16,
    pub version_string: String,
    /// One bit per even SAP, 0x00 first (the high bit of the first byte).
    pub saps: [u8; 16],
    /// 1: one TCP connection carries both directions (else the RFC's two).
    pub tcp_connections: Option<u8>,
}

/// What a CAP_EXCHANGE carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CapEx {
    Request(Capabilities),
    Response,
    /// The offset of the vector at fault in the GDS, and the cause ([`refuse`]).
    Refuse {
        pointer: u16,
        cause: u16,
    },
}

/// Why a capabilities request is refused: its offset in the GDS and the cause.
pub type Refusal = (u16, u16);

/// Reads a CAP_EXCHANGE's data. A request that breaks RFC 1795 7.7's rules (a vector too short
/// or running past the GDS, a required vector missing, one twice, vendor ID not first) comes
/// back as the refusal to send (`Err(Ok(refusal))`); data too short to be a GDS at all as
/// `Err(Err(_))`.
pub fn parse_capex(d: &[u8]) -> std::result::Result<CapEx, std::result::Result<Refusal, Error>> {
    if d.len() < 4 {
        return Err(Err(Error::Truncated));
    }
    let len = u16::from_be_bytes([d[0], d[1]]) as usize;
    let id = u16::from_be_bytes([d[2], d[3]]);
    if len < 4 || len > d.len() {
        return Err(Ok((0, refuse::BAD_GDS_LENGTH)));
    }
    match id {
        GDS_RESPONSE => return Ok(CapEx::Response),
        GDS_REFUSE => {
            if len < 8 {
                return Err(Err(Error::Truncated));
            }
            return Ok(CapEx::Refuse {
                pointer: u16::from_be_bytes([d[4], d[5]]),
                cause: u16::from_be_bytes([d[6], d[7]]),
            });
        }
        GDS_REQUEST => {}
        _ => return Err(Ok((2, refuse::BAD_GDS_ID))),
    }
    let mut c = Capabilities {
        vendor: [0; 3],
        version: (0, 0),
        pacing_window: 0,
        version_string: String::new(),
        saps: [0; 16],
        tcp_connections: None,
    };
    let mut seen = 0u32;
    let mut at = 4;
    while at < len {
        let vl = d[at] as usize;
        if vl < 2 || at + vl > len {
            return Err(Ok((at as u16, refuse::BAD_CV_LENGTHS)));
        }
        let (t, v) = (d[at + 1], &d[at + 2..at + vl]);
        if at == 4 && t != cv::VENDOR_ID {
            return Err(Ok((at as u16, refuse::OUT_OF_SEQUENCE)));
        }
        let bit = 1u32 << (t & 0x1f);
        if (0x81..=0x9f).contains(&t) && seen & bit != 0 {
            return Err(Ok((at as u16, refuse::DUPLICATE_CV)));
        }
        let want = match t {
            cv::VENDOR_ID => Some(3),
            cv::VERSION | cv::PACING_WINDOW => Some(2),
            cv::SAP_LIST => Some(16),
            cv::TCP_CONNECTIONS | cv::MAC_EXCLUSIVITY => Some(1),
            _ => None,
        };
        if want.is_some_and(|w| v.len() != w) {
            return Err(Ok((at as u16, refuse::BAD_CV_LENGTH)));
        }
        match t {
            cv::VENDOR_ID => c.vendor.copy_from_slice(v),
            cv::VERSION => c.version = (v[0], v[1]),
            cv::PACING_WINDOW => c.pacing_window = u16::from_be_bytes([v[0], v[1]]),
            cv::VERSION_STRING => c.version_string = String::from_utf8_lossy(v).into_owned(),
            cv::SAP_LIST => c.saps.copy_from_slice(v),
            cv::TCP_CONNECTIONS => c.tcp_connections = Some(v[0]),
            // Vectors this DLSw does not act on (exclusivity, MAC and name lists, vendor
            // context, multicast) are accepted and ignored, as RFC 1795 allows.
            _ => {}
        }
        if (0x81..=0x9f).contains(&t) {
            seen |= bit;
        }
        at += vl;
    }
    for (t, cause) in [
        (cv::VENDOR_ID, refuse::NO_VENDOR_ID),
        (cv::VERSION, refuse::NO_VERSION),
        (cv::PACING_WINDOW, refuse::NO_PACING_WINDOW),
        (cv::SAP_LIST, refuse::NO_SAP_LIST),
    ] {
        if seen & (1 << (t & 0x1f)) == 0 {
            return Err(Ok((0, cause)));
        }
    }
    Ok(CapEx::Request(c))
}

fn capex_header(out: &mut Vec<u8>, direction: u8, data_len: usize) {
    let c = Circuit {
        direction,
        ..Circuit::default()
    };
    write_control(out, msg::CAP_EXCHANGE, 0, &c, &[]);
    let at = out.len() - CONTROL_HEADER + 2;
    out[at..at + 2].copy_from_slice(&(data_len as u16).to_be_bytes());
}

/// Appends a whole CAP_EXCHANGE request message.
pub fn write_capex_request(out: &mut Vec<u8>, c: &Capabilities) {
    let mut g = vec![0, 0, (GDS_REQUEST >> 8) as u8, GDS_REQUEST as u8];
    let mut v = |t: u8, d: &[u8]| {
        g.push((d.len() + 2) as u8);
        g.push(t);
        g.extend_from_slice(d);
    };
    v(cv::VENDOR_ID, &c.vendor);
    v(cv::VERSION, &[c.version.0, c.version.1]);
    v(cv::PACING_WINDOW, &c.pacing_window.to_be_bytes());
    if !c.version_string.is_empty() {
        let s = c.version_string.as_bytes();
        v(cv::VERSION_STRING, &s[..s.len().min(200)]);
    }
    v(cv::SAP_LIST, &c.saps);
    if let Some(n) = c.tcp_connections {
        v(cv::TCP_CONNECTIONS, &[n]);
    }
    let n = g.len() as u16;
    g[..2].copy_from_slice(&n.to_be_bytes());
    capex_header(out, 0x01, g.len());
    out.extend_from_slice(&g);
}

/// Appends a positive CAP_EXCHANGE response.
pub fn write_capex_response(out: &mut Vec<u8>) {
    capex_header(out, 0x02, 4);
    out.extend_from_slice(&[0, 4, (GDS_RESPONSE >> 8) as u8, GDS_RESPONSE as u8]);
}

/// Appends a CAP_EXCHANGE refusal.
pub fn write_capex_refuse(out: &mut Vec<u8>, (pointer, cause): Refusal) {
    capex_header(out, 0x02, 8);
    out.extend_from_slice(&[0, 8, (GDS_REFUSE >> 8) as u8, GDS_REFUSE as u8]);
    out.extend_from_slice(&pointer.to_be_bytes());
    out.extend_from_slice(&cause.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caps() -> Capabilities {
        Capabilities {
            vendor: [0x00, 0x00, 0x0c],
            version: (1, 0),
            pacing_window: 20,
            version_string: "Linerate".into(),
            saps: [0xff; 16],
            tcp_connections: Some(1),
        }
    }

    #[test]
    fn a_control_message_round_trips_with_its_circuit() {
        let c = Circuit {
            largest_frame: 0x30,
            ssp_flags: SSP_EXPLORER,
            priority: 2,
            target_mac: [2, 0, 0, 0, 0, 1],
            origin_mac: [2, 0, 0, 0, 0, 2],
            origin_sap: 4,
            target_sap: 8,
            direction: DIR_FROM_TARGET,
            dlc_header_len: 0,
            origin_port: 7,
            origin_dlc: 8,
            origin_transport: 9,
            target_port: 10,
            target_dlc: 11,
            target_transport: 12,
        };
        let mut v = Vec::new();
        write_control(&mut v, msg::XIDFRAME, flow::FCI, &c, b"xid");
        assert_eq!(v.len(), CONTROL_HEADER + 3);
        assert_eq!(message_len(&v), Some(Ok(v.len())));
        let m = parse(&v).unwrap();
        assert_eq!(m.msg_type, msg::XIDFRAME);
        assert_eq!(m.flow, flow::FCI);
        assert_eq!(m.circuit, Some(c));
        assert_eq!(m.data, b"xid");
        // From the target, the header names the origin's end.
        assert_eq!((m.remote_dlc, m.remote_port), (8, 7));
    }

    #[test]
    fn an_info_message_round_trips() {
        let mut v = Vec::new();
        write_info(
            &mut v,
            msg::INFOFRAME,
            flow::FCA | flow::HALVE,
            5,
            6,
            &[0xaa; 128],
        );
        assert_eq!(v.len(), INFO_HEADER + 128);
        let m = parse(&v).unwrap();
        assert_eq!(
            (m.msg_type, m.flow, m.remote_dlc, m.remote_port),
            (msg::INFOFRAME, 0x44, 5, 6)
        );
        assert_eq!(m.circuit, None);
        assert_eq!(m.data.len(), 128);
    }

    #[test]
    fn malformed_headers_are_refused() {
        assert_eq!(message_len(&[0x31, 16, 0]), None);
        assert_eq!(message_len(&[0x32, 16, 0, 0]), Some(Err(Error::Malformed)));
        assert_eq!(message_len(&[0x31, 20, 0, 0]), Some(Err(Error::Malformed)));
        let mut v = Vec::new();
        write_info(&mut v, msg::INFOFRAME, 0, 1, 1, b"abc");
        assert_eq!(parse(&v[..18]), Err(Error::Truncated));
        // An INFOFRAME under a control header.
        let mut c = Vec::new();
        write_control(&mut c, msg::INFOFRAME, 0, &Circuit::default(), &[]);
        assert_eq!(parse(&c), Err(Error::Malformed));
        let mut c = Vec::new();
        write_control(&mut c, msg::CONTACT, 0, &Circuit::default(), &[]);
        c[16] = 0x41;
        assert_eq!(parse(&c), Err(Error::Malformed), "protocol ID");
    }

    #[test]
    fn capabilities_round_trip_and_are_answered() {
        let mut v = Vec::new();
        write_capex_request(&mut v, &caps());
        let m = parse(&v).unwrap();
        assert_eq!(m.msg_type, msg::CAP_EXCHANGE);
        assert_eq!(m.circuit.unwrap().direction, 1);
        assert_eq!(parse_capex(m.data), Ok(CapEx::Request(caps())));
        let mut r = Vec::new();
        write_capex_response(&mut r);
        assert_eq!(parse_capex(parse(&r).unwrap().data), Ok(CapEx::Response));
        let mut r = Vec::new();
        write_capex_refuse(&mut r, (4, refuse::NO_SAP_LIST));
        assert_eq!(
            parse_capex(parse(&r).unwrap().data),
            Ok(CapEx::Refuse {
                pointer: 4,
                cause: refuse::NO_SAP_LIST
            })
        );
    }

    #[test]
    fn a_request_that_breaks_the_rules_is_refused_with_its_cause() {
        let mut v = Vec::new();
        write_capex_request(&mut v, &caps());
        let gds = v[CONTROL_HEADER..].to_vec();
        // Without the SAP list (cut the GDS before it): its vectors are 5 + 4 + 4 + 10 bytes.
        let mut cut = gds[..4 + 5 + 4 + 4 + 10].to_vec();
        let n = cut.len() as u16;
        cut[..2].copy_from_slice(&n.to_be_bytes());
        assert_eq!(parse_capex(&cut), Err(Ok((0, refuse::NO_SAP_LIST))));
        // Version first, vendor ID second.
        let mut swapped = gds.clone();
        swapped[4..13].copy_from_slice(&[4, 0x82, 1, 0, 5, 0x81, 0, 0, 0x0c]);
        assert_eq!(parse_capex(&swapped), Err(Ok((4, refuse::OUT_OF_SEQUENCE))));
        // A vector running past the GDS.
        let mut long = gds.clone();
        long[9] = 0x7f;
        assert_eq!(parse_capex(&long), Err(Ok((9, refuse::BAD_CV_LENGTHS))));
        // The pacing window twice.
        let mut twice = gds.clone();
        twice.extend_from_slice(&[4, 0x83, 0, 1]);
        let n = twice.len() as u16;
        twice[..2].copy_from_slice(&n.to_be_bytes());
        assert!(matches!(
            parse_capex(&twice),
            Err(Ok((_, refuse::DUPLICATE_CV)))
        ));
        assert_eq!(parse_capex(&[0, 4, 0x15]), Err(Err(Error::Truncated)));
        assert_eq!(
            parse_capex(&[0, 4, 0x99, 0x99]),
            Err(Ok((2, refuse::BAD_GDS_ID)))
        );
    }
}
