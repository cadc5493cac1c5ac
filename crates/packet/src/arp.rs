//! ARP for IPv4 over Ethernet (RFC 826): the 28-byte message after the Ethernet (and VLAN)
//! header. Only the Ethernet/IPv4 form exists on the router's links; anything else is rejected.

use crate::ethernet::MacAddr;
use crate::{Error, Result};

pub const ETHERTYPE: u16 = 0x0806;
pub const LEN: usize = 28;
pub const REQUEST: u16 = 1;
pub const REPLY: u16 = 2;

/// A parsed ARP message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Repr {
    pub op: u16,
    pub sender_mac: MacAddr,
    pub sender_ip: u32,
    pub target_mac: MacAddr,
    pub target_ip: u32,
}

impl Repr {
    /// Parses the message at the start of `b` (padding after it is ignored).
    pub fn parse(b: &[u8]) -> Result<Repr> {
        if b.len() < LEN {
            return Err(Error::Truncated);
        }
        let be16 = |i: usize| u16::from_be_bytes([b[i], b[i + 1]]);
        // Hardware Ethernet (1), protocol IPv4, address lengths 6 and 4.
        if be16(0) != 1 || be16(2) != 0x0800 || b[4] != 6 || b[5] != 4 {
            return Err(Error::Malformed);
        }
        let op = be16(6);
        if op != REQUEST && op != REPLY {
            return Err(Error::Malformed);
        }
        let mac = |i: usize| MacAddr(b[i..i + 6].try_into().expect("6 bytes"));
        let ip = |i: usize| u32::from_be_bytes(b[i..i + 4].try_into().expect("4 bytes"));
        Ok(Repr {
            op,
            sender_mac: mac(8),
            sender_ip: ip(14),
            target_mac: mac(18),
            target_ip: ip(24),
        })
    }

    /// Writes the message into `out[..LEN]`.
    pub fn emit(&self, out: &mut [u8]) {
        out[0..2].copy_from_slice(&1u16.to_be_bytes());
        out[2..4].copy_from_slice(&0x0800u16.to_be_bytes());
        out[4] = 6;
        out[5] = 4;
        out[6..8].copy_from_slice(&self.op.to_be_bytes());
        out[8..14].copy_from_slice(&self.sender_mac.0);
        out[14..18].copy_from_slice(&self.sender_ip.to_be_bytes());
        out[18..24].copy_from_slice(&self.target_mac.0);
        out[24..28].copy_from_slice(&self.target_ip.to_be_bytes());
    }
}

/// A whole ARP frame: `eth` (its EtherType is set to ARP's) then `r`, padded to Ethernet's
/// 60-byte minimum. The one builder the control plane's neighbour code and the tester share.
pub fn frame(eth: crate::ethernet::Header, r: &Repr) -> Vec<u8> {
    let eth = crate::ethernet::Header {
        ethertype: ETHERTYPE,
        ..eth
    };
    let mut f = Vec::with_capacity(64);
    let at = eth.push_to(&mut f);
    f.resize(at + LEN, 0);
    r.emit(&mut f[at..]);
    if f.len() < 60 {
        f.resize(60, 0);
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_rejects() {
        let r = Repr {
            op: REQUEST,
            sender_mac: MacAddr([2, 0, 0, 0, 0, 1]),
            sender_ip: 0xC000_0201,
            target_mac: MacAddr::ZERO,
            target_ip: 0xC000_0202,
        };
        let mut b = [0u8; LEN];
        r.emit(&mut b);
        assert_eq!(Repr::parse(&b), Ok(r));
        assert_eq!(Repr::parse(&b[..27]), Err(Error::Truncated));
        let mut bad = b;
        bad[5] = 16;
        assert_eq!(Repr::parse(&bad), Err(Error::Malformed));
        let mut bad = b;
        bad[7] = 3;
        assert_eq!(Repr::parse(&bad), Err(Error::Malformed));
    }
}
