//! The hand-over's messages on its Unix socket: a header (JSON length, blob length), the JSON,
//! then the blob (a table, possibly hundreds of megabytes), with descriptors riding on the
//! header as SCM_RIGHTS. A stream socket, so a blob of any size goes in one message; the
//! kernel never merges a read across a message that carries descriptors, so the receiver's
//! header read gets exactly the header's descriptors.

use std::io::{self, IoSlice, IoSliceMut, Read, Write};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;

use nix::sys::socket::{recvmsg, sendmsg, ControlMessage, ControlMessageOwned, MsgFlags};
use serde::de::DeserializeOwned;
use serde::Serialize;

const HEADER: usize = 12;
/// The kernel's limit on descriptors in one message (SCM_MAX_FD).
pub const MAX_FDS: usize = 253;
/// A JSON part longer than this is not a hand-over message.
const MAX_JSON: usize = 64 << 20;

/// One message as received.
pub struct Received<T> {
    pub msg: T,
    pub fds: Vec<OwnedFd>,
    pub blob: Vec<u8>,
}

fn bad(why: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, why.into())
}

/// Sends `msg` with `fds` (at most [`MAX_FDS`]) and `blob`.
pub fn send<T: Serialize>(
    s: &mut UnixStream,
    msg: &T,
    fds: &[BorrowedFd<'_>],
    blob: &[u8],
) -> io::Result<()> {
    if fds.len() > MAX_FDS {
        return Err(bad(format!(
            "{} descriptors to pass; one message carries at most {MAX_FDS}",
            fds.len()
        )));
    }
    let json = serde_json::to_vec(msg).map_err(|e| bad(e.to_string()))?;
    let mut h = [0u8; HEADER];
    h[..4].copy_from_slice(&(json.len() as u32).to_le_bytes());
    h[4..].copy_from_slice(&(blob.len() as u64).to_le_bytes());
    let raw: Vec<RawFd> = fds.iter().map(|f| f.as_raw_fd()).collect();
    let cmsg = [ControlMessage::ScmRights(&raw)];
    let cmsgs: &[ControlMessage<'_>] = if raw.is_empty() { &[] } else { &cmsg };
    let mut sent = 0;
    while sent == 0 {
        sent = sendmsg::<()>(
            s.as_raw_fd(),
            &[IoSlice::new(&h)],
            cmsgs,
            MsgFlags::empty(),
            None,
        )
        .map_err(io::Error::from)?;
    }
    // The descriptors went with the first bytes; the rest of the header as plain bytes.
    s.write_all(&h[sent..])?;
    s.write_all(&json)?;
    s.write_all(blob)?;
    s.flush()
}

/// Receives one message; an orderly close before it is `UnexpectedEof`.
pub fn recv<T: DeserializeOwned>(s: &mut UnixStream) -> io::Result<Received<T>> {
    let mut h = [0u8; HEADER];
    let mut space = nix::cmsg_space!([RawFd; MAX_FDS]);
    let (n, fds) = {
        let mut iov = [IoSliceMut::new(&mut h)];
        let m = recvmsg::<()>(
            s.as_raw_fd(),
            &mut iov,
            Some(&mut space),
            MsgFlags::MSG_CMSG_CLOEXEC,
        )
        .map_err(io::Error::from)?;
        let mut fds = Vec::new();
        for c in m.cmsgs().map_err(io::Error::from)? {
            if let ControlMessageOwned::ScmRights(raw) = c {
                for fd in raw {
                    // SAFETY: the kernel has just installed this descriptor in our table for
                    // this message; nothing else owns it.
                    fds.push(unsafe { OwnedFd::from_raw_fd(fd) });
                }
            }
        }
        if m.flags.contains(MsgFlags::MSG_CTRUNC) {
            return Err(bad("descriptors lost: the control message was truncated"));
        }
        (m.bytes, fds)
    };
    if n == 0 {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the other process closed the hand-over",
        ));
    }
    s.read_exact(&mut h[n..])?;
    let json_len = u32::from_le_bytes(h[..4].try_into().expect("4 bytes")) as usize;
    let blob_len = u64::from_le_bytes(h[4..].try_into().expect("8 bytes")) as usize;
    if json_len > MAX_JSON {
        return Err(bad(format!("a {json_len}-byte message")));
    }
    let mut json = vec![0u8; json_len];
    s.read_exact(&mut json)?;
    let msg = serde_json::from_slice(&json).map_err(|e| bad(format!("hand-over message: {e}")))?;
    // Read in steps: a length the peer got wrong must not allocate it all up front.
    let mut blob = Vec::new();
    (&mut *s).take(blob_len as u64).read_to_end(&mut blob)?;
    if blob.len() != blob_len {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the hand-over ended inside a table",
        ));
    }
    Ok(Received { msg, fds, blob })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[derive(Serialize, serde::Deserialize, Debug, PartialEq)]
    struct M {
        name: String,
        n: u32,
    }

    #[test]
    fn messages_carry_descriptors_and_blobs_both_ways() {
        let (mut a, mut b) = UnixStream::pair().unwrap();
        let (mut p, mut q) = UnixStream::pair().unwrap();
        let blob: Vec<u8> = (0..3_000_000u32).map(|i| i as u8).collect();
        let m = M {
            name: "port p1".into(),
            n: 7,
        };
        let t = std::thread::spawn(move || {
            let r: Received<M> = recv(&mut b).unwrap();
            let r2: Received<M> = recv(&mut b).unwrap();
            (r, r2)
        });
        send(&mut a, &m, &[p.as_fd(), q.as_fd()], &blob).unwrap();
        send(&mut a, &m, &[], &[]).unwrap();
        let (r, r2) = t.join().unwrap();
        assert_eq!(r.msg, m);
        assert_eq!(r.blob, blob);
        assert_eq!((r.fds.len(), r2.fds.len(), r2.blob.len()), (2, 0, 0));
        // The received descriptors are the same sockets: what goes in one comes out the other.
        let mut p2 = UnixStream::from(r.fds.into_iter().next().unwrap());
        p2.write_all(b"ping").unwrap();
        let mut got = [0u8; 4];
        q.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"ping");
        p.write_all(b"x").unwrap();
    }

    #[test]
    fn a_close_or_garbage_is_an_error_not_a_panic() {
        let (a, mut b) = UnixStream::pair().unwrap();
        drop(a);
        let e = recv::<M>(&mut b).err().unwrap();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
        let (mut a, mut b) = UnixStream::pair().unwrap();
        a.write_all(&[0xff; HEADER]).unwrap();
        assert!(recv::<M>(&mut b).is_err(), "a huge length");
        let (mut a, mut b) = UnixStream::pair().unwrap();
        let mut h = [0u8; HEADER];
        h[..4].copy_from_slice(&3u32.to_le_bytes());
        a.write_all(&h).unwrap();
        a.write_all(b"{{{").unwrap();
        assert!(recv::<M>(&mut b).is_err(), "not JSON");
        let (mut a, mut b) = UnixStream::pair().unwrap();
        h[..4].copy_from_slice(&2u32.to_le_bytes());
        h[4..].copy_from_slice(&100u64.to_le_bytes());
        a.write_all(&h).unwrap();
        a.write_all(b"{}").unwrap();
        a.write_all(&[1; 10]).unwrap();
        drop(a);
        assert!(recv::<M>(&mut b).is_err(), "short blob");
    }
}
