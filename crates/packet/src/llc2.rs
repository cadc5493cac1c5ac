//! IEEE 802.2 LLC (ISO/IEC 8802-2) on Ethernet: the LLC header of an 802.3 frame (DSAP, SSAP,
//! control) and the frames of type 2 operation, the connection-mode link SNA runs over.
//!
//! An 802.3 frame is the 14-byte MAC header whose last field is a length (at most 1500), then
//! the LLC header: DSAP (its low bit: individual/group), SSAP (its low bit: command/response),
//! and a control field of one byte (U frames) or two (I and S frames, modulo-128 numbering):
//!
//! - I frames carry N(S) and N(R) and an information field (an SNA PIU);
//! - S frames (RR, RNR, REJ) carry N(R): acknowledgement and flow control;
//! - U frames (SABME, UA, DISC, DM, FRMR, XID, TEST, UI) set up and tear down the link, and
//!   XID and TEST carry an information field of their own.
//!
//! [`parse`] reads a whole frame and never panics; [`write`] builds one. Both are the slow
//! path's (the DLSw service and the tester), a few frames per transaction.

use crate::{Error, Result};

/// The MAC header of an 802.3 frame: destination, source, length.
pub const MAC_LEN: usize = 14;
/// The shortest Ethernet frame without its FCS: shorter frames are padded to it.
pub const MIN_FRAME: usize = 60;

/// The SSAP bit that marks a response.
pub const CR_RESPONSE: u8 = 0x01;
/// The DSAP bit that marks a group address.
pub const IG_GROUP: u8 = 0x01;
/// The null SAP (explorer TESTs are addressed to it).
pub const NULL_SAP: u8 = 0x00;
/// SNA's path control SAP (4) and its common alternatives are ordinary individual SAPs.
pub const SNA_SAP: u8 = 0x04;
/// The P/F bit of a U frame's control byte.
const U_PF: u8 = 0x10;

/// Supervisory functions (the two bits after the `01` of an S frame).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Supervisory {
    /// Receive Ready: acknowledges up to N(R), ready for more.
    Rr,
    /// Receive Not Ready: acknowledges up to N(R), busy.
    Rnr,
    /// Reject: asks for retransmission from N(R).
    Rej,
}

/// Unnumbered frame kinds, by their control byte without the P/F bit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Unnumbered {
    Ui,
    Sabme,
    Ua,
    Disc,
    Dm,
    Frmr,
    Xid,
    Test,
}

impl Unnumbered {
    pub const fn code(self) -> u8 {
        match self {
            Unnumbered::Ui => 0x03,
            Unnumbered::Sabme => 0x6f,
            Unnumbered::Ua => 0x63,
            Unnumbered::Disc => 0x43,
            Unnumbered::Dm => 0x0f,
            Unnumbered::Frmr => 0x87,
            Unnumbered::Xid => 0xaf,
            Unnumbered::Test => 0xe3,
        }
    }

    fn from_code(c: u8) -> Option<Unnumbered> {
        Some(match c & !U_PF {
            0x03 => Unnumbered::Ui,
            0x6f => Unnumbered::Sabme,
            0x63 => Unnumbered::Ua,
            0x43 => Unnumbered::Disc,
            0x0f => Unnumbered::Dm,
            0x87 => Unnumbered::Frmr,
            0xaf => Unnumbered::Xid,
            0xe3 => Unnumbered::Test,
            _ => return None,
        })
    }

    /// The name a trace or a counter shows.
    pub const fn name(self) -> &'static str {
        match self {
            Unnumbered::Ui => "UI",
            Unnumbered::Sabme => "SABME",
            Unnumbered::Ua => "UA",
            Unnumbered::Disc => "DISC",
            Unnumbered::Dm => "DM",
            Unnumbered::Frmr => "FRMR",
            Unnumbered::Xid => "XID",
            Unnumbered::Test => "TEST",
        }
    }
}

/// The control field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Control {
    /// An information frame: send and receive sequence numbers (0..128), poll/final.
    I {
        ns: u8,
        nr: u8,
        pf: bool,
    },
    S {
        kind: Supervisory,
        nr: u8,
        pf: bool,
    },
    U {
        kind: Unnumbered,
        pf: bool,
    },
}

impl Control {
    /// Bytes the control field takes.
    pub const fn len(&self) -> usize {
        match self {
            Control::U { .. } => 1,
            _ => 2,
        }
    }

    pub const fn is_empty(&self) -> bool {
        false
    }

    pub const fn pf(&self) -> bool {
        match *self {
            Control::I { pf, .. } | Control::S { pf, .. } | Control::U { pf, .. } => pf,
        }
    }
}

/// One LLC frame on Ethernet, as read by [`parse`] (the information field borrowed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame<'a> {
    pub dst: [u8; 6],
    pub src: [u8; 6],
    pub dsap: u8,
    /// The SSAP without its command/response bit.
    pub ssap: u8,
    /// A response (the SSAP's C/R bit set), else a command.
    pub response: bool,
    pub control: Control,
    /// The information field: an I frame's PIU, an XID's or TEST's data; empty otherwise.
    pub info: &'a [u8],
}

/// Reads an 802.3 LLC frame (untagged; the caller strips a VLAN tag first). The length field
/// bounds the LLC part: padding after it is ignored, a length beyond the frame is `Truncated`,
/// an EtherType (above 1500) or an unknown control byte is `Malformed`, and an S or I frame
/// whose second control byte is missing is `Truncated`.
pub fn parse(f: &[u8]) -> Result<Frame<'_>> {
    if f.len() < MAC_LEN + 3 {
        return Err(Error::Truncated);
    }
    let len = u16::from_be_bytes([f[12], f[13]]) as usize;
    if len > 1500 {
        return Err(Error::Malformed);
    }
    if len < 3 {
        return Err(Error::Malformed);
    }
    let llc = f.get(MAC_LEN..MAC_LEN + len).ok_or(Error::Truncated)?;
    let (dsap, ssap_cr, c0) = (llc[0], llc[1], llc[2]);
    let (control, hdr) = if c0 & 0x01 == 0 {
        let c1 = *llc.get(3).ok_or(Error::Truncated)?;
        (
            Control::I {
                ns: c0 >> 1,
                nr: c1 >> 1,
                pf: c1 & 1 != 0,
            },
            4,
        )
    } else if c0 & 0x03 == 0x01 {
        let c1 = *llc.get(3).ok_or(Error::Truncated)?;
        // The S frame's first byte is 0000 SS 01: the four high bits are reserved zeros.
        let kind = match c0 {
            0x01 => Supervisory::Rr,
            0x05 => Supervisory::Rnr,
            0x09 => Supervisory::Rej,
            _ => return Err(Error::Malformed),
        };
        (
            Control::S {
                kind,
                nr: c1 >> 1,
                pf: c1 & 1 != 0,
            },
            4,
        )
    } else {
        let kind = Unnumbered::from_code(c0).ok_or(Error::Malformed)?;
        (
            Control::U {
                kind,
                pf: c0 & U_PF != 0,
            },
            3,
        )
    };
    let mut dst = [0u8; 6];
    let mut src = [0u8; 6];
    dst.copy_from_slice(&f[0..6]);
    src.copy_from_slice(&f[6..12]);
    Ok(Frame {
        dst,
        src,
        dsap,
        ssap: ssap_cr & !CR_RESPONSE,
        response: ssap_cr & CR_RESPONSE != 0,
        control,
        info: &llc[hdr..],
    })
}

/// The control field's bytes.
pub fn control_bytes(c: Control) -> ([u8; 2], usize) {
    match c {
        Control::I { ns, nr, pf } => ([(ns & 0x7f) << 1, ((nr & 0x7f) << 1) | pf as u8], 2),
        Control::S { kind, nr, pf } => {
            let b0 = match kind {
                Supervisory::Rr => 0x01,
                Supervisory::Rnr => 0x05,
                Supervisory::Rej => 0x09,
            };
            ([b0, ((nr & 0x7f) << 1) | pf as u8], 2)
        }
        Control::U { kind, pf } => ([kind.code() | if pf { U_PF } else { 0 }, 0], 1),
    }
}

/// Appends a whole frame to `out` (padded to 60 bytes): MAC header with the LLC length, LLC
/// header, control, `info`. `info` longer than an 802.3 frame can carry is cut to fit.
pub fn write(out: &mut Vec<u8>, f: &Frame<'_>) {
    let (c, clen) = control_bytes(f.control);
    let info = &f.info[..f.info.len().min(1500 - 2 - clen)];
    let start = out.len();
    out.extend_from_slice(&f.dst);
    out.extend_from_slice(&f.src);
    out.extend_from_slice(&((2 + clen + info.len()) as u16).to_be_bytes());
    out.push(f.dsap);
    out.push(f.ssap | if f.response { CR_RESPONSE } else { 0 });
    out.extend_from_slice(&c[..clen]);
    out.extend_from_slice(info);
    if out.len() - start < MIN_FRAME {
        out.resize(start + MIN_FRAME, 0);
    }
}

/// A frame built by [`write`], as a new vector.
pub fn frame(f: &Frame<'_>) -> Vec<u8> {
    let mut v = Vec::with_capacity(MIN_FRAME.max(MAC_LEN + 4 + f.info.len()));
    write(&mut v, f);
    v
}

/// SNA XID format 0 for a type 2.0 PU (the "fixed" XID the report's endpoints exchanged): the
/// format and PU type byte, a reserved byte, then IDBLK (12 bits) and IDNUM (20 bits).
pub fn xid0_t2(idblk: u16, idnum: u32) -> [u8; 6] {
    let id = ((idblk as u32 & 0xfff) << 20) | (idnum & 0xf_ffff);
    let b = id.to_be_bytes();
    [0x02, 0x00, b[0], b[1], b[2], b[3]]
}

/// Reads a format 0 XID: (PU type, IDBLK, IDNUM); None if it is another format or too short.
pub fn parse_xid0(info: &[u8]) -> Option<(u8, u16, u32)> {
    if info.len() < 6 || info[0] >> 4 != 0 {
        return None;
    }
    let id = u32::from_be_bytes([info[2], info[3], info[4], info[5]]);
    Some((info[0] & 0x0f, (id >> 20) as u16, id & 0xf_ffff))
}

/// Sequence arithmetic modulo 128: how far `b` is ahead of `a`.
#[inline]
pub const fn seq_diff(a: u8, b: u8) -> u8 {
    b.wrapping_sub(a) & 0x7f
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: [u8; 6] = [0x02, 0, 0, 0, 0, 1];
    const B: [u8; 6] = [0x02, 0, 0, 0, 0, 2];

    fn f(control: Control, response: bool, info: &[u8]) -> Vec<u8> {
        frame(&Frame {
            dst: A,
            src: B,
            dsap: 4,
            ssap: 4,
            response,
            control,
            info,
        })
    }

    #[test]
    fn every_control_field_survives_a_round_trip() {
        let mut cs = vec![];
        for kind in [
            Unnumbered::Ui,
            Unnumbered::Sabme,
            Unnumbered::Ua,
            Unnumbered::Disc,
            Unnumbered::Dm,
            Unnumbered::Frmr,
            Unnumbered::Xid,
            Unnumbered::Test,
        ] {
            for pf in [false, true] {
                cs.push(Control::U { kind, pf });
            }
        }
        for kind in [Supervisory::Rr, Supervisory::Rnr, Supervisory::Rej] {
            cs.push(Control::S {
                kind,
                nr: 127,
                pf: true,
            });
            cs.push(Control::S {
                kind,
                nr: 5,
                pf: false,
            });
        }
        cs.push(Control::I {
            ns: 127,
            nr: 0,
            pf: false,
        });
        cs.push(Control::I {
            ns: 3,
            nr: 99,
            pf: true,
        });
        for c in cs {
            for response in [false, true] {
                let bytes = f(c, response, b"abc");
                assert_eq!(bytes.len(), 60, "padded");
                let p = parse(&bytes).unwrap();
                assert_eq!((p.control, p.response, p.info), (c, response, &b"abc"[..]));
                assert_eq!((p.dst, p.src, p.dsap, p.ssap), (A, B, 4, 4));
            }
        }
    }

    #[test]
    fn known_bytes_decode_as_the_standard_says() {
        // RR response, N(R)=5, F=1: 01 0B; SABME P=1: 7F; I N(S)=1 N(R)=2: 02 04.
        let mut fr = vec![0u8; 12];
        fr.extend_from_slice(&[0, 4, 0x04, 0x05, 0x01, 0x0b]);
        let p = parse(&fr).unwrap();
        assert!(p.response);
        assert_eq!(
            p.control,
            Control::S {
                kind: Supervisory::Rr,
                nr: 5,
                pf: true
            }
        );
        let mut fr = vec![0u8; 12];
        fr.extend_from_slice(&[0, 3, 0x04, 0x04, 0x7f]);
        assert_eq!(
            parse(&fr).unwrap().control,
            Control::U {
                kind: Unnumbered::Sabme,
                pf: true
            }
        );
        let mut fr = vec![0u8; 12];
        fr.extend_from_slice(&[0, 5, 0x04, 0x04, 0x02, 0x04, 0xaa]);
        let p = parse(&fr).unwrap();
        assert_eq!(
            p.control,
            Control::I {
                ns: 1,
                nr: 2,
                pf: false
            }
        );
        assert_eq!(p.info, &[0xaa]);
    }

    #[test]
    fn bad_frames_are_refused_with_a_reason() {
        let mut fr = vec![0u8; 12];
        fr.extend_from_slice(&[0x08, 0x00, 4, 4, 3]);
        assert_eq!(parse(&fr), Err(Error::Malformed), "an EtherType");
        let mut fr = vec![0u8; 12];
        fr.extend_from_slice(&[0, 40, 4, 4, 3]);
        assert_eq!(parse(&fr), Err(Error::Truncated), "length past the end");
        let mut fr = vec![0u8; 12];
        fr.extend_from_slice(&[0, 3, 4, 4, 0x01]);
        assert_eq!(parse(&fr), Err(Error::Truncated), "S frame without N(R)");
        let mut fr = vec![0u8; 12];
        fr.extend_from_slice(&[0, 4, 4, 4, 0x0d, 0]);
        assert_eq!(parse(&fr), Err(Error::Malformed), "S function 11");
        let mut fr = vec![0u8; 12];
        fr.extend_from_slice(&[0, 3, 4, 4, 0x23]);
        assert_eq!(parse(&fr), Err(Error::Malformed), "unknown U frame");
        assert_eq!(parse(&[0u8; 10]), Err(Error::Truncated));
    }

    #[test]
    fn xid0_carries_the_pu_identity() {
        let x = xid0_t2(0x017, 0x12345);
        assert_eq!(x, [0x02, 0x00, 0x01, 0x71, 0x23, 0x45]);
        assert_eq!(parse_xid0(&x), Some((2, 0x017, 0x12345)));
        assert_eq!(parse_xid0(&[0x32, 0, 0, 0, 0, 0]), None, "format 3");
    }

    #[test]
    fn sequence_numbers_wrap_at_128() {
        assert_eq!(seq_diff(126, 2), 4);
        assert_eq!(seq_diff(5, 5), 0);
    }
}
