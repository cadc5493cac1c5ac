//! The subagent's side of serving MIB objects (RFC 2741): the Register-PDU it sends for each
//! subtree it serves, the Get, GetNext and GetBulk PDUs the master sends it, and the
//! Response-PDU it answers with. Requests are read in either byte order and checked as untrusted
//! input (the master is another program): a malformed one is an error, never a panic.

use super::{finish, header, put_octets, put_oid, put_u16, put_u32, Header, Value};
use super::{NETWORK_BYTE_ORDER, RESPONSE};

pub const REGISTER: u8 = 3;
pub const GET: u8 = 5;
pub const GET_NEXT: u8 = 6;
pub const GET_BULK: u8 = 7;
pub const TEST_SET: u8 = 8;
pub const COMMIT_SET: u8 = 9;
pub const UNDO_SET: u8 = 10;
pub const CLEANUP_SET: u8 = 11;

/// Header flag: a context (octet string) precedes the payload.
pub const NON_DEFAULT_CONTEXT: u8 = 0x08;

/// SNMP error-status values a Response may carry (RFC 3416), those a read-only subagent uses.
pub const NOT_WRITABLE: u16 = 17;
/// AgentX's own (6.2.16).
pub const PARSE_ERROR: u16 = 266;
pub const PROCESSING_ERROR: u16 = 268;

/// A varbind's value in a Response: a value, or why there is none (5.4).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    Value(Value),
    NoSuchObject,
    NoSuchInstance,
    EndOfMibView,
}

/// One range of a Get/GetNext/GetBulk: from `start` (itself included if `include`) up to, not
/// including, `end` (empty: no end).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SearchRange {
    pub start: Vec<u32>,
    pub include: bool,
    pub end: Vec<u32>,
}

/// What the master asks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    Get(Vec<SearchRange>),
    GetNext(Vec<SearchRange>),
    GetBulk {
        non_repeaters: u16,
        max_repetitions: u16,
        ranges: Vec<SearchRange>,
    },
    /// A TestSet (the others of a set are answered without reading them).
    TestSet,
    /// CommitSet, UndoSet, CleanupSet: nothing to do for a read-only subagent.
    OtherSet(u8),
}

/// A Register-PDU for `subtree` in `context` (None: the default context).
pub fn register(
    session: u32,
    packet: u32,
    context: Option<&str>,
    subtree: &[u32],
    priority: u8,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    header(&mut out, REGISTER, session, 0, packet);
    if let Some(c) = context {
        out[2] |= NON_DEFAULT_CONTEXT;
        put_octets(&mut out, c.as_bytes());
    }
    // timeout (0: the session's), priority, range_subid 0 (no range), reserved.
    out.extend_from_slice(&[0, priority, 0, 0]);
    put_oid(&mut out, subtree, false);
    finish(out)
}

/// A Response-PDU answering the request with header `req`.
pub fn response(
    req: &Header,
    uptime_cs: u32,
    error: u16,
    index: u16,
    varbinds: &[(Vec<u32>, Answer)],
) -> Vec<u8> {
    let mut out = Vec::with_capacity(64 + varbinds.len() * 32);
    header(&mut out, RESPONSE, req.session, req.transaction, req.packet);
    put_u32(&mut out, uptime_cs);
    put_u16(&mut out, error);
    put_u16(&mut out, index);
    for (name, a) in varbinds {
        let tag = match a {
            Answer::Value(v) => v.tag(),
            Answer::NoSuchObject => 128,
            Answer::NoSuchInstance => 129,
            Answer::EndOfMibView => 130,
        };
        put_u16(&mut out, tag);
        put_u16(&mut out, 0);
        put_oid(&mut out, name, false);
        if let Answer::Value(v) = a {
            super::put_value(&mut out, v);
        }
    }
    finish(out)
}

/// Reads a request's payload (after the header `h`): its context (if any) and what it asks.
/// Types a subagent never receives are an error.
pub fn parse_request(
    h: &Header,
    payload: &[u8],
) -> Result<(Option<String>, Request), &'static str> {
    let mut r = Reader {
        b: payload,
        at: 0,
        be: h.flags & NETWORK_BYTE_ORDER != 0,
    };
    let context = if h.flags & NON_DEFAULT_CONTEXT != 0 {
        let c = r.octets()?;
        Some(String::from_utf8(c.to_vec()).map_err(|_| "context is not UTF-8")?)
    } else {
        None
    };
    let req = match h.ty {
        GET => Request::Get(r.ranges()?),
        GET_NEXT => Request::GetNext(r.ranges()?),
        GET_BULK => {
            let non_repeaters = r.u16()?;
            let max_repetitions = r.u16()?;
            Request::GetBulk {
                non_repeaters,
                max_repetitions,
                ranges: r.ranges()?,
            }
        }
        TEST_SET => Request::TestSet,
        COMMIT_SET | UNDO_SET | CLEANUP_SET => Request::OtherSet(h.ty),
        _ => return Err("not a request a subagent serves"),
    };
    Ok((context, req))
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
    be: bool,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], &'static str> {
        let end = self.at.checked_add(n).ok_or("length overflow")?;
        let s = self.b.get(self.at..end).ok_or("truncated PDU")?;
        self.at = end;
        Ok(s)
    }

    fn u16(&mut self) -> Result<u16, &'static str> {
        let w: [u8; 2] = self.take(2)?.try_into().expect("2 bytes");
        Ok(if self.be {
            u16::from_be_bytes(w)
        } else {
            u16::from_le_bytes(w)
        })
    }

    fn u32(&mut self) -> Result<u32, &'static str> {
        let w: [u8; 4] = self.take(4)?.try_into().expect("4 bytes");
        Ok(if self.be {
            u32::from_be_bytes(w)
        } else {
            u32::from_le_bytes(w)
        })
    }

    fn octets(&mut self) -> Result<&[u8], &'static str> {
        let n = self.u32()? as usize;
        let padded = n.checked_next_multiple_of(4).ok_or("length overflow")?;
        let s = self.take(padded)?;
        Ok(&s[..n])
    }

    /// An OID and its include flag (5.1).
    fn oid(&mut self) -> Result<(Vec<u32>, bool), &'static str> {
        let h = self.take(4)?;
        let (n, prefix, include) = (h[0] as usize, h[1], h[2] != 0);
        if n > 128 {
            return Err("an OID of more than 128 sub-identifiers");
        }
        let mut oid = Vec::with_capacity(n + 5);
        if prefix != 0 {
            oid.extend_from_slice(&[1, 3, 6, 1, u32::from(prefix)]);
        }
        for _ in 0..n {
            oid.push(self.u32()?);
        }
        Ok((oid, include))
    }

    fn ranges(&mut self) -> Result<Vec<SearchRange>, &'static str> {
        let mut v = Vec::new();
        while self.at < self.b.len() {
            let (start, include) = self.oid()?;
            let (end, _) = self.oid()?;
            v.push(SearchRange {
                start,
                include,
                end,
            });
            if v.len() > 1024 {
                return Err("more than 1,024 ranges");
            }
        }
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::super::{parse_header, HEADER_LEN};
    use super::*;

    /// A request as a master would write it, in either byte order.
    fn req(ty: u8, be: bool, context: Option<&str>, body: &[u8]) -> Vec<u8> {
        let w = |v: u32| if be { v.to_be_bytes() } else { v.to_le_bytes() };
        let mut flags = if be { NETWORK_BYTE_ORDER } else { 0 };
        let mut payload = Vec::new();
        if let Some(c) = context {
            flags |= NON_DEFAULT_CONTEXT;
            payload.extend_from_slice(&w(c.len() as u32));
            payload.extend_from_slice(c.as_bytes());
            while payload.len() % 4 != 0 {
                payload.push(0);
            }
        }
        payload.extend_from_slice(body);
        let mut out = vec![1, ty, flags, 0];
        for v in [7u32, 11, 13, payload.len() as u32] {
            out.extend_from_slice(&w(v));
        }
        out.extend_from_slice(&payload);
        out
    }

    fn oid(be: bool, prefix: u8, include: bool, subids: &[u32]) -> Vec<u8> {
        let mut v = vec![subids.len() as u8, prefix, include as u8, 0];
        for s in subids {
            v.extend_from_slice(&if be { s.to_be_bytes() } else { s.to_le_bytes() });
        }
        v
    }

    #[test]
    fn get_next_and_bulk_are_read_in_either_byte_order_with_their_context() {
        for be in [true, false] {
            // ifDescr (1.3.6.1.2.1.2.2.1.2) to the end of ifTable, in context lr1.
            let mut body = oid(be, 2, false, &[1, 2, 2, 1, 2]);
            body.extend(oid(be, 2, false, &[1, 2, 2, 1, 3]));
            let p = req(GET_NEXT, be, Some("lr1"), &body);
            let h = parse_header(&p, 1 << 16).unwrap();
            let (ctx, r) = parse_request(&h, &p[HEADER_LEN..]).unwrap();
            assert_eq!(ctx.as_deref(), Some("lr1"));
            assert_eq!(
                r,
                Request::GetNext(vec![SearchRange {
                    start: vec![1, 3, 6, 1, 2, 1, 2, 2, 1, 2],
                    include: false,
                    end: vec![1, 3, 6, 1, 2, 1, 2, 2, 1, 3],
                }])
            );
            let mut body = if be {
                vec![0, 1, 0, 10]
            } else {
                vec![1, 0, 10, 0]
            };
            body.extend(oid(be, 0, true, &[1, 3, 6, 1, 2, 1, 2, 1]));
            body.extend(oid(be, 0, false, &[]));
            let p = req(GET_BULK, be, None, &body);
            let h = parse_header(&p, 1 << 16).unwrap();
            let (ctx, r) = parse_request(&h, &p[HEADER_LEN..]).unwrap();
            assert_eq!(ctx, None);
            let Request::GetBulk {
                non_repeaters,
                max_repetitions,
                ranges,
            } = r
            else {
                panic!("{r:?}")
            };
            assert_eq!((non_repeaters, max_repetitions), (1, 10));
            assert!(ranges[0].include && ranges[0].end.is_empty());
        }
    }

    #[test]
    fn a_response_carries_values_and_exceptions() {
        let h = Header {
            ty: GET,
            flags: NETWORK_BYTE_ORDER,
            session: 5,
            transaction: 6,
            packet: 7,
            payload_len: 0,
        };
        let p = response(
            &h,
            100,
            0,
            0,
            &[
                (
                    vec![1, 3, 6, 1, 2, 1, 2, 1, 0],
                    Answer::Value(Value::Integer(4)),
                ),
                (vec![1, 3, 6, 1, 2, 1, 2, 9], Answer::EndOfMibView),
            ],
        );
        let rh = parse_header(&p, 1 << 16).unwrap();
        assert_eq!(
            (rh.ty, rh.session, rh.transaction, rh.packet),
            (RESPONSE, 5, 6, 7)
        );
        assert_eq!(
            super::super::parse_response(&rh, &p[HEADER_LEN..]).unwrap(),
            (100, 0, 0)
        );
        // First varbind: Integer (2), ifNumber.0 compressed under 1.3.6.1.2, value 4.
        assert_eq!(&p[28..32], &[0, 2, 0, 0]);
        assert_eq!(&p[32..36], &[4, 2, 0, 0]);
        assert_eq!(&p[52..56], &4u32.to_be_bytes());
        // Second: endOfMibView (130), no value.
        assert_eq!(&p[56..60], &[0, 130, 0, 0]);
        assert_eq!(
            p.len(),
            56 + 4 + 4 + 3 * 4,
            "1.2.9 under prefix 2, no value"
        );
    }

    #[test]
    fn a_register_names_its_context_and_subtree() {
        let p = register(3, 2, Some("lr1"), &[1, 3, 6, 1, 2, 1, 31, 1, 1], 127);
        let h = parse_header(&p, 1 << 16).unwrap();
        assert_eq!((h.ty, h.session, h.packet), (REGISTER, 3, 2));
        assert!(h.flags & NON_DEFAULT_CONTEXT != 0);
        assert_eq!(&p[20..24], &3u32.to_be_bytes());
        assert_eq!(&p[24..28], b"lr1\0");
        assert_eq!(&p[28..32], &[0, 127, 0, 0]);
        assert_eq!(&p[32..36], &[4, 2, 0, 0], "31.1.1 under prefix 2 after 1");
    }

    #[test]
    fn malformed_requests_are_errors() {
        let h = |ty, len| Header {
            ty,
            flags: NETWORK_BYTE_ORDER,
            session: 0,
            transaction: 0,
            packet: 0,
            payload_len: len,
        };
        assert!(
            parse_request(&h(GET, 4), &[200, 0, 0, 0]).is_err(),
            "too long an OID"
        );
        assert!(
            parse_request(&h(GET, 8), &[2, 0, 0, 0, 0, 0, 0, 1]).is_err(),
            "truncated"
        );
        assert!(parse_request(&h(GET_BULK, 2), &[0, 1]).is_err());
        assert!(parse_request(&h(RESPONSE, 0), &[]).is_err());
        let mut ctx = h(GET, 4);
        ctx.flags |= NON_DEFAULT_CONTEXT;
        assert!(
            parse_request(&ctx, &[0xff, 0xff, 0xff, 0xff]).is_err(),
            "huge context"
        );
    }
}
