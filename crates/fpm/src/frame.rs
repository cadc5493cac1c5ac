//! FPM framing: what zebra's `dplane_fpm_nl` wraps every netlink message in on its TCP stream.
//!
//! A frame is a 4-byte header `{version: u8 = 1, msg_type: u8, length: u16 big-endian}` followed by
//! `length - 4` bytes of payload; the length counts the header. Only `msg_type` 1 (netlink) is
//! supported: zebra 8.4's `dplane_fpm_nl` never sends anything else, and protobuf (2) belongs to the
//! older `zebra_fpm` module.
//!
//! [`FrameReader`] owns the receive buffer so that a socket reads straight into it and frames come
//! out as slices of it: a byte is copied once (kernel to buffer), except the tail of a frame split
//! across reads, which moves to the front of the buffer when room runs out.

use std::fmt;
use std::io::{self, Read};

/// The only FPM protocol version there is.
pub const VERSION: u8 = 1;
/// `msg_type` of a frame carrying netlink messages.
pub const MSG_NETLINK: u8 = 1;
/// `msg_type` of a frame carrying a protobuf message (the old `zebra_fpm`; unsupported).
pub const MSG_PROTOBUF: u8 = 2;
/// Bytes of the frame header.
pub const HEADER_LEN: usize = 4;
/// The longest frame the 16-bit length allows, header included.
pub const MAX_FRAME: usize = u16::MAX as usize;
/// Default receive buffer: large enough that one read carries thousands of routes.
pub const DEFAULT_BUFFER: usize = 1 << 20;

/// Why a frame could not be read or written. Any of these on receive means the stream has lost
/// its framing, so the connection must be reset: zebra reconnects and replays.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameError {
    /// The version byte is not 1.
    BadVersion(u8),
    /// A protobuf frame (type 2): this server speaks netlink only.
    Protobuf,
    /// A message type that FPM does not define.
    UnknownType(u8),
    /// A length shorter than the header itself.
    BadLength(u16),
    /// (encoder) A payload that does not fit the 16-bit length.
    TooLong(usize),
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::BadVersion(v) => write!(f, "FPM frame version {v}, expected 1"),
            Self::Protobuf => write!(f, "FPM protobuf frame (only netlink is supported)"),
            Self::UnknownType(t) => write!(f, "FPM frame of unknown type {t}"),
            Self::BadLength(l) => write!(f, "FPM frame length {l} is below the header's 4"),
            Self::TooLong(l) => write!(f, "FPM payload of {l} bytes exceeds a frame"),
        }
    }
}

impl std::error::Error for FrameError {}

/// Checks a frame header and returns the frame's total length (header included).
pub fn parse_header(h: [u8; HEADER_LEN]) -> Result<usize, FrameError> {
    if h[0] != VERSION {
        return Err(FrameError::BadVersion(h[0]));
    }
    match h[1] {
        MSG_NETLINK => {}
        MSG_PROTOBUF => return Err(FrameError::Protobuf),
        t => return Err(FrameError::UnknownType(t)),
    }
    let len = u16::from_be_bytes([h[2], h[3]]);
    if (len as usize) < HEADER_LEN {
        return Err(FrameError::BadLength(len));
    }
    Ok(len as usize)
}

/// Appends one netlink frame holding `payload` to `out`.
pub fn encode_frame(payload: &[u8], out: &mut Vec<u8>) -> Result<(), FrameError> {
    let total = payload.len() + HEADER_LEN;
    if total > MAX_FRAME {
        return Err(FrameError::TooLong(payload.len()));
    }
    out.extend_from_slice(&[VERSION, MSG_NETLINK]);
    out.extend_from_slice(&(total as u16).to_be_bytes());
    out.extend_from_slice(payload);
    Ok(())
}

/// Reassembles frames from a byte stream cut anywhere (frames split across reads, several per
/// read). Errors are sticky: after a malformed header nothing more is yielded, because nothing
/// after it can be trusted to start on a frame boundary.
pub struct FrameReader {
    /// Bytes `start..end` are received and not yet yielded; the rest is room to read into.
    buf: Vec<u8>,
    start: usize,
    end: usize,
    error: Option<FrameError>,
}

impl Default for FrameReader {
    fn default() -> Self {
        Self::new()
    }
}

impl FrameReader {
    pub fn new() -> Self {
        Self::with_capacity(DEFAULT_BUFFER)
    }

    /// A reader whose buffer holds `cap` bytes (at least two maximal frames, so that a read always
    /// has room for a whole frame after compaction).
    pub fn with_capacity(cap: usize) -> Self {
        Self {
            buf: vec![0; cap.max(2 * MAX_FRAME)],
            start: 0,
            end: 0,
            error: None,
        }
    }

    /// Received bytes not yet returned as frames (a partial frame, usually).
    pub fn buffered(&self) -> usize {
        self.end - self.start
    }

    /// Room to receive into. Moves the partial frame to the front when less than a maximal frame
    /// fits behind it, and grows the buffer only if [`feed`](Self::feed) was given more than it
    /// holds.
    pub fn spare(&mut self) -> &mut [u8] {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
        if self.buf.len() - self.end < MAX_FRAME && self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.end == self.buf.len() {
            let len = self.buf.len();
            self.buf.resize(len * 2, 0);
        }
        &mut self.buf[self.end..]
    }

    /// Marks `n` bytes of [`spare`](Self::spare) as received.
    pub fn commit(&mut self, n: usize) {
        assert!(n <= self.buf.len() - self.end, "commit beyond spare room");
        self.end += n;
    }

    /// One `read` from `r` straight into the buffer; `Ok(0)` is end of stream.
    pub fn read_from<R: Read>(&mut self, r: &mut R) -> io::Result<usize> {
        let n = r.read(self.spare())?;
        self.commit(n);
        Ok(n)
    }

    /// Appends bytes received elsewhere (tests, replay files). This copies; sockets should use
    /// [`read_from`](Self::read_from).
    pub fn feed(&mut self, mut chunk: &[u8]) {
        while !chunk.is_empty() {
            let room = self.spare();
            let n = room.len().min(chunk.len());
            room[..n].copy_from_slice(&chunk[..n]);
            self.commit(n);
            chunk = &chunk[n..];
        }
    }

    /// The payload of the next complete frame, `Ok(None)` if more bytes are needed, or the error
    /// that broke the stream (sticky).
    pub fn next_frame(&mut self) -> Result<Option<&[u8]>, FrameError> {
        if let Some(e) = self.error {
            return Err(e);
        }
        let avail = self.end - self.start;
        if avail < HEADER_LEN {
            return Ok(None);
        }
        let s = self.start;
        let h = [
            self.buf[s],
            self.buf[s + 1],
            self.buf[s + 2],
            self.buf[s + 3],
        ];
        let len = match parse_header(h) {
            Ok(len) => len,
            Err(e) => {
                self.error = Some(e);
                return Err(e);
            }
        };
        if avail < len {
            return Ok(None);
        }
        self.start += len;
        Ok(Some(&self.buf[s + HEADER_LEN..s + len]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(payloads: &[&[u8]]) -> Vec<u8> {
        let mut out = Vec::new();
        for p in payloads {
            encode_frame(p, &mut out).unwrap();
        }
        out
    }

    fn drain(r: &mut FrameReader) -> Vec<Vec<u8>> {
        let mut got = Vec::new();
        while let Some(p) = r.next_frame().unwrap() {
            got.push(p.to_vec());
        }
        got
    }

    #[test]
    fn header_layout() {
        let mut out = Vec::new();
        encode_frame(&[9, 8, 7], &mut out).unwrap();
        assert_eq!(out, [1, 1, 0, 7, 9, 8, 7]);
        assert_eq!(parse_header([1, 1, 0, 4]), Ok(4));
    }

    #[test]
    fn every_split_point_reassembles() {
        let payloads: Vec<Vec<u8>> = (0..5u8).map(|i| vec![i; i as usize * 7]).collect();
        let refs: Vec<&[u8]> = payloads.iter().map(|p| p.as_slice()).collect();
        let stream = frames(&refs);
        for cut in 0..=stream.len() {
            let mut r = FrameReader::with_capacity(0);
            r.feed(&stream[..cut]);
            let mut got = drain(&mut r);
            r.feed(&stream[cut..]);
            got.extend(drain(&mut r));
            assert_eq!(got, payloads, "cut at {cut}");
            assert_eq!(r.buffered(), 0);
        }
    }

    #[test]
    fn byte_at_a_time_and_max_frames() {
        let big = vec![0xAB; MAX_FRAME - HEADER_LEN];
        let stream = frames(&[&big, &[1], &big, &[]]);
        let mut r = FrameReader::with_capacity(0);
        let mut got = Vec::new();
        for b in &stream {
            r.feed(std::slice::from_ref(b));
            got.extend(drain(&mut r));
        }
        assert_eq!(got, vec![big.clone(), vec![1], big, vec![]]);
    }

    #[test]
    fn feed_larger_than_buffer_grows() {
        let p = vec![3u8; 1000];
        let stream = frames(&vec![p.as_slice(); 400]);
        let mut r = FrameReader::with_capacity(0);
        r.feed(&stream);
        assert_eq!(drain(&mut r).len(), 400);
    }

    #[test]
    fn malformed_headers_are_sticky_errors() {
        for (bytes, err) in [
            ([2u8, 1, 0, 8], FrameError::BadVersion(2)),
            ([1, 2, 0, 8], FrameError::Protobuf),
            ([1, 0, 0, 8], FrameError::UnknownType(0)),
            ([1, 9, 0, 8], FrameError::UnknownType(9)),
            ([1, 1, 0, 3], FrameError::BadLength(3)),
            ([1, 1, 0, 0], FrameError::BadLength(0)),
        ] {
            let mut r = FrameReader::new();
            r.feed(&frames(&[b"ok"]));
            r.feed(&bytes);
            assert_eq!(r.next_frame(), Ok(Some(&b"ok"[..])));
            assert_eq!(r.next_frame(), Err(err));
            r.feed(&frames(&[b"later"]));
            assert_eq!(r.next_frame(), Err(err), "errors are sticky");
        }
    }

    #[test]
    fn encoder_rejects_oversized_payloads() {
        let mut out = Vec::new();
        assert!(encode_frame(&vec![0; MAX_FRAME - HEADER_LEN], &mut out).is_ok());
        let too = vec![0; MAX_FRAME - HEADER_LEN + 1];
        assert_eq!(
            encode_frame(&too, &mut out),
            Err(FrameError::TooLong(too.len()))
        );
    }

    #[test]
    fn read_from_a_reader() {
        let stream = frames(&[b"abc", b"defg"]);
        let mut src = &stream[..];
        let mut r = FrameReader::new();
        while r.read_from(&mut src).unwrap() > 0 {}
        assert_eq!(drain(&mut r), vec![b"abc".to_vec(), b"defg".to_vec()]);
    }
}
