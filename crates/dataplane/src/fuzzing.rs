//! Entry points for the cargo-fuzz targets in `fuzz/`, kept in the crate so that the unit tests
//! below run exactly the same code on stable Rust. Not part of the API.
//!
//! What the kernel sends over rtnetlink is trusted less than it might be: a message the link
//! monitor or the XDP attach misreads must not panic the router. A panic here is a bug.

/// `data` as one rtnetlink datagram: the link monitor's decoder (`RTM_NEWLINK`, `RTM_DELLINK`,
/// `NLMSG_ERROR`, `NLMSG_DONE`, the `ifinfomsg` attributes), then the reader of the kernel's
/// answer to the XDP attach (`RTM_SETLINK`, with extended-ack attributes).
#[cfg(target_os = "linux")]
pub fn rtnetlink(data: &[u8]) {
    use crate::port::link::{messages, Msg};
    let mut n = 0;
    for m in messages(data) {
        n += 1;
        if let Msg::Link(ev) = m {
            assert!(!ev.removed || !ev.admin_up && !ev.oper_up);
            assert!(ev.admin_up || !ev.oper_up, "oper up implies admin up");
        }
    }
    // Each message takes at least a 16-byte header.
    assert!(n <= data.len() / 16);
    let _ = crate::port::af_xdp::parse_setlink_ack(data);
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// A netlink header of type `ty` around `payload`.
    fn msg(ty: u16, payload: &[u8]) -> Vec<u8> {
        let mut m = ((16 + payload.len()) as u32).to_ne_bytes().to_vec();
        m.extend_from_slice(&ty.to_ne_bytes());
        m.extend_from_slice(&[0; 10]);
        m.extend_from_slice(payload);
        m
    }

    #[test]
    fn rtnetlink_survives_odd_datagrams() {
        let mut link = vec![0u8; 16];
        link[8] = 1; // IFF_UP
        link.extend_from_slice(&[8, 0, 3, 0, b'e', b't', b'h', 0]); // IFLA_IFNAME
        link.extend_from_slice(&[3, 0, 4, 0]); // IFLA_MTU, too short
        let cases = [
            vec![],
            vec![0xff; 15],
            msg(libc::RTM_NEWLINK, &link),
            msg(libc::RTM_DELLINK, &link[..16]),
            msg(libc::RTM_NEWLINK, &link[..15]),
            msg(libc::NLMSG_ERROR as u16, &[0, 0, 0, 0x80]),
            msg(libc::NLMSG_ERROR as u16, &[0xff; 40]),
            msg(libc::NLMSG_DONE as u16, &[]),
            // A length that claims more than the datagram holds.
            [&u32::MAX.to_ne_bytes()[..], &[16, 0, 0, 0]].concat(),
        ];
        for c in &cases {
            rtnetlink(c);
        }
        for (name, c) in packet::fuzz_inputs::saved("rtnetlink") {
            eprintln!("{name}");
            rtnetlink(&c);
        }
    }
}
