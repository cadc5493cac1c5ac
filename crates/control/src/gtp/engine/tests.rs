//! The engine message by message: what it answers, and what the data plane's table and the
//! pools hold afterwards.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;
use std::sync::Arc;

use packet::gtp::{self, cause, ie, msg, EndUserAddress, MsgBuilder};

use super::*;
use crate::config::ggsn::GgsnCfg;

const SGSN: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 9);

fn cfg(rate: u32, v4_pool: &str) -> GgsnCfg {
    let text = format!(
        "control-plane: {{ taps: true }}
ports: [{{ name: p0, driver: mem }}]
interfaces: [{{ name: p0, port: p0, mac: '02:00:00:00:00:01', ipv4: [192.0.2.1/24] }}]
ggsn:
  address: 192.0.2.1
  create-rate: {rate}
  apns:
    - {{ name: internet, ipv4-pool: {v4_pool}, ipv6-pool: '2001:db8:100::/56', dns: [192.0.2.53, '2001:db8::53'] }}
    - {{ name: v6only.example, ipv6-pool: '2001:db8:200::/56' }}
"
    );
    crate::config::parse(&text, Path::new("g.yaml"))
        .unwrap()
        .ggsn
        .unwrap()
}

fn engine(rate: u32, pool: &str) -> (Engine, Arc<GtpTable>) {
    let c = cfg(rate, pool);
    let pools: Vec<_> = c.apns.iter().map(|a| a.pools()).collect();
    let t = Arc::new(GtpTable::new(64, &pools, 1));
    (Engine::new(&c, t.clone(), 7), t)
}

fn from() -> SocketAddr {
    SocketAddr::new(IpAddr::V4(SGSN), 2123)
}

/// A Create PDP Context Request as an SGSN sends one.
fn create(seq: u16, imsi: &str, nsapi: u8, apn: &str, eua: EndUserAddress) -> Vec<u8> {
    let mut m = MsgBuilder::new(msg::CREATE_PDP_REQUEST, 0, seq);
    m.tv(ie::IMSI, &gtp::imsi_encode(imsi).unwrap())
        .tv(ie::RECOVERY, &[3])
        .tv(ie::SELECTION_MODE, &[1])
        .tv(ie::TEID_DATA_I, &(0x1000 + u32::from(seq)).to_be_bytes())
        .tv(ie::TEID_C, &(0x2000 + u32::from(seq)).to_be_bytes())
        .tv(ie::NSAPI, &[nsapi])
        .tlv(ie::END_USER_ADDRESS, &eua.encode())
        .tlv(ie::APN, &gtp::apn_encode(apn))
        .tlv(
            ie::PCO,
            &[
                0x80, 0x80, 0x21, 0x10, 1, 0, 0, 0x10, 0x81, 6, 0, 0, 0, 0, 0x83, 6, 0, 0, 0, 0,
            ],
        )
        .tlv(ie::GSN_ADDRESS, &SGSN.octets())
        .tlv(ie::GSN_ADDRESS, &SGSN.octets())
        .tlv(ie::QOS_PROFILE, &[1, 0x23, 0x92, 0x1f]);
    m.finish()
}

/// The one answer's type, TEID and IEs.
fn answer(out: &[Send]) -> (u8, u32, Vec<(u8, Vec<u8>)>) {
    assert_eq!(out.len(), 1, "one answer");
    let b = &out[0].bytes;
    let h = gtp::parse_header(b).unwrap();
    let ies = gtp::ies(h.payload(b))
        .map(|e| e.map(|e| (e.ty, e.value.to_vec())))
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    (h.msg_type, h.teid, ies)
}

fn ie_of(ies: &[(u8, Vec<u8>)], ty: u8) -> Option<&[u8]> {
    ies.iter()
        .find(|(t, _)| *t == ty)
        .map(|(_, v)| v.as_slice())
}

#[test]
fn a_context_is_created_answered_installed_and_deleted() {
    let (mut e, t) = engine(1000, "10.64.0.0/24");
    let req = create(
        1,
        "001010123456789",
        5,
        "internet",
        EndUserAddress::Ipv4(None),
    );
    let out = e.handle(0, from(), false, &req);
    let (ty, teid, ies) = answer(&out);
    assert_eq!(
        (ty, teid),
        (msg::CREATE_PDP_RESPONSE, 0x2001),
        "to the SGSN's TEID-C"
    );
    assert_eq!(ie_of(&ies, ie::CAUSE), Some(&[cause::REQUEST_ACCEPTED][..]));
    assert_eq!(ie_of(&ies, ie::RECOVERY), Some(&[7][..]));
    let eua = gtp::end_user_address(ie_of(&ies, ie::END_USER_ADDRESS).unwrap()).unwrap();
    assert_eq!(eua, EndUserAddress::Ipv4(Some(Ipv4Addr::new(10, 64, 0, 1))));
    let ours = u32::from_be_bytes(ie_of(&ies, ie::TEID_DATA_I).unwrap().try_into().unwrap());
    // The data plane has it: by TEID, and by address for the downlink.
    let up = t.uplink(ours).unwrap();
    assert_eq!(up.ue_v4, Some(0x0a40_0001));
    let dl = t.downlink(t.slot_v4(0, 0x0a40_0001).unwrap(), 0).unwrap();
    assert_eq!((dl.peer_teid, dl.peer), (0x1001, u32::from(SGSN)));
    // DNS in the PCO: IPCP with the primary DNS, then the IPv6 server's container.
    let pco = ie_of(&ies, ie::PCO).unwrap();
    assert_eq!(&pco[..4], &[0x80, 0x80, 0x21, 10]);
    assert_eq!(&pco[8..14], &[129, 6, 192, 0, 2, 53]);
    assert_eq!(&pco[14..17], &[0, 3, 16]);
    // The same request again (a retransmission): the same answer, no second context.
    let again = e.handle(100, from(), false, &req);
    assert_eq!(again[0].bytes, out[0].bytes);
    assert_eq!((e.context_count(), e.stats.duplicates), (1, 1));
    // Another request under the same number within the window (an SGSN past 65,536 requests
    // in it): not a retransmission, since it differs; served.
    let other = create(
        1,
        "262010000000002",
        5,
        "internet",
        EndUserAddress::Ipv4(None),
    );
    let (_, _, ies) = answer(&e.handle(150, from(), false, &other));
    assert_eq!(ie_of(&ies, ie::CAUSE), Some(&[cause::REQUEST_ACCEPTED][..]));
    assert_eq!((e.context_count(), e.stats.duplicates), (2, 1));
    assert_eq!(e.handle(160, from(), false, &other).len(), 1);
    assert_eq!((e.context_count(), e.stats.duplicates), (2, 2));
    // Deleted by our TEID: gone from the data plane, its address back in the pool.
    let mut del = MsgBuilder::new(msg::DELETE_PDP_REQUEST, ours, 2);
    del.tv(ie::NSAPI, &[5]);
    let (ty, teid, ies) = answer(&e.handle(200, from(), false, &del.finish()));
    assert_eq!((ty, teid), (msg::DELETE_PDP_RESPONSE, 0x2001));
    assert_eq!(ie_of(&ies, ie::CAUSE), Some(&[cause::REQUEST_ACCEPTED][..]));
    assert_eq!(t.uplink(ours), None);
    assert_eq!(t.slot_v4(0, 0x0a40_0001), None);
    // The other subscriber's context holds the only address still taken.
    assert_eq!(e.apn_usage()[0].v4, (1, 254));
    // A second delete names a context that is no more.
    let mut del = MsgBuilder::new(msg::DELETE_PDP_REQUEST, ours, 3);
    del.tv(ie::NSAPI, &[5]);
    let (_, teid, ies) = answer(&e.handle(300, from(), false, &del.finish()));
    assert_eq!(
        (teid, ie_of(&ies, ie::CAUSE)),
        (0, Some(&[cause::NON_EXISTENT][..]))
    );
}

#[test]
fn refusals_carry_the_right_cause_and_make_nothing() {
    let (mut e, _) = engine(1000, "10.64.0.0/30");
    let cause_of = |e: &mut Engine, seq: u16, m: &[u8]| {
        let (_, _, ies) = answer(&e.handle(u64::from(seq), from(), false, m));
        ie_of(&ies, ie::CAUSE).unwrap()[0]
    };
    let v4 = EndUserAddress::Ipv4(None);
    assert_eq!(
        cause_of(&mut e, 1, &create(1, "001010000000001", 5, "nowhere", v4)),
        cause::MISSING_OR_UNKNOWN_APN
    );
    assert_eq!(
        cause_of(
            &mut e,
            2,
            &create(2, "001010000000001", 5, "v6only.example", v4)
        ),
        cause::UNKNOWN_PDP_ADDRESS_OR_TYPE
    );
    // A /30 pool: two addresses (not the network's nor the broadcast).
    for (i, seq) in [(1, 3), (2, 4)] {
        let imsi = format!("00101000000000{i}");
        assert_eq!(
            cause_of(&mut e, seq, &create(seq, &imsi, 5, "internet", v4)),
            cause::REQUEST_ACCEPTED
        );
    }
    assert_eq!(
        cause_of(&mut e, 5, &create(5, "001010000000003", 5, "internet", v4)),
        cause::ALL_DYNAMIC_ADDRESSES_OCCUPIED
    );
    // IPv4v6 with the IPv4 pool full: refused whole, its IPv6 prefix not kept.
    let dual = EndUserAddress::Ipv4v6(None, None);
    assert_eq!(
        cause_of(
            &mut e,
            6,
            &create(6, "001010000000003", 5, "internet", dual)
        ),
        cause::ALL_DYNAMIC_ADDRESSES_OCCUPIED
    );
    assert_eq!(e.apn_usage()[0].v6.0, 0, "no IPv6 prefix leaked");
    assert_eq!(e.context_count(), 2);
    // Without a mandatory IE (no QoS profile), or with one that does not decode.
    let mut m = MsgBuilder::new(msg::CREATE_PDP_REQUEST, 0, 7);
    m.tv(ie::IMSI, &gtp::imsi_encode("001010000000009").unwrap())
        .tv(ie::TEID_DATA_I, &[0, 0, 0, 1])
        .tv(ie::TEID_C, &[0, 0, 0, 1])
        .tv(ie::NSAPI, &[5])
        .tlv(ie::END_USER_ADDRESS, &v4.encode())
        .tlv(ie::APN, &gtp::apn_encode("internet"))
        .tlv(ie::GSN_ADDRESS, &SGSN.octets())
        .tlv(ie::GSN_ADDRESS, &SGSN.octets());
    assert_eq!(
        cause_of(&mut e, 7, &m.finish()),
        cause::MANDATORY_IE_MISSING
    );
    let mut bad = create(8, "001010000000009", 5, "internet", v4);
    // The IMSI's first digit made a non-digit nibble.
    bad[13] = 0x6a;
    assert_eq!(cause_of(&mut e, 8, &bad), cause::MANDATORY_IE_INCORRECT);
    assert_eq!(e.context_count(), 2);
}

#[test]
fn creates_beyond_the_rate_are_refused_for_lack_of_resources() {
    let (mut e, _) = engine(10, "10.64.0.0/24");
    let v4 = EndUserAddress::Ipv4(None);
    let causes: Vec<u8> = (0..3u16)
        .map(|i| {
            let m = create(i + 1, &format!("00101000000001{i}"), 5, "internet", v4);
            let (_, _, ies) = answer(&e.handle(0, from(), false, &m));
            ie_of(&ies, ie::CAUSE).unwrap()[0]
        })
        .collect();
    assert_eq!(
        causes,
        [
            cause::REQUEST_ACCEPTED,
            cause::NO_RESOURCES,
            cause::NO_RESOURCES
        ]
    );
    // A tenth of a second later, one more token.
    let m = create(9, "001010000000019", 5, "internet", v4);
    let (_, _, ies) = answer(&e.handle(100, from(), false, &m));
    assert_eq!(ie_of(&ies, ie::CAUSE), Some(&[cause::REQUEST_ACCEPTED][..]));
    assert_eq!(e.context_count(), 2);
}

#[test]
fn dual_stack_update_echo_and_other_versions() {
    let (mut e, t) = engine(1000, "10.64.0.0/24");
    let m = create(
        1,
        "001010000000001",
        5,
        "internet",
        EndUserAddress::Ipv4v6(None, None),
    );
    let (_, _, ies) = answer(&e.handle(0, from(), false, &m));
    let eua = gtp::end_user_address(ie_of(&ies, ie::END_USER_ADDRESS).unwrap()).unwrap();
    let EndUserAddress::Ipv4v6(Some(v4), Some(v6)) = eua else {
        panic!("{eua:?}");
    };
    assert_eq!(v4, Ipv4Addr::new(10, 64, 0, 1));
    assert_eq!(
        u128::from(v6) >> 64,
        0x2001_0db8_0100_0000,
        "the pool's first /64"
    );
    let ours = u32::from_be_bytes(ie_of(&ies, ie::TEID_C).unwrap().try_into().unwrap());
    // The UE moves to another SGSN.
    let new_sgsn = Ipv4Addr::new(192, 0, 2, 10);
    let mut u = MsgBuilder::new(msg::UPDATE_PDP_REQUEST, ours, 2);
    u.tv(ie::TEID_DATA_I, &[0, 0, 0x77, 0x77])
        .tv(ie::NSAPI, &[5])
        .tlv(ie::GSN_ADDRESS, &new_sgsn.octets())
        .tlv(ie::GSN_ADDRESS, &new_sgsn.octets())
        .tlv(ie::QOS_PROFILE, &[1, 0x23, 0x92, 0x1f]);
    let (ty, _, ies) = answer(&e.handle(10, from(), false, &u.finish()));
    assert_eq!(ty, msg::UPDATE_PDP_RESPONSE);
    assert_eq!(ie_of(&ies, ie::CAUSE), Some(&[cause::REQUEST_ACCEPTED][..]));
    let dl = t
        .downlink(t.slot_v6(0, 0x2001_0db8_0100_0000).unwrap(), 0)
        .unwrap();
    assert_eq!((dl.peer_teid, dl.peer), (0x7777, u32::from(new_sgsn)));
    // Echo: our restart counter.
    let (ty, _, ies) = answer(&e.handle(
        20,
        from(),
        false,
        &MsgBuilder::new(msg::ECHO_REQUEST, 0, 3).finish(),
    ));
    assert_eq!(
        (ty, ie_of(&ies, ie::RECOVERY)),
        (msg::ECHO_RESPONSE, Some(&[7][..]))
    );
    // GTPv2: Version Not Supported.
    let v2 = [0x40, 1, 0, 4, 0, 0, 1, 0];
    let out = e.handle(30, from(), false, &v2);
    assert_eq!(out[0].bytes[1], msg::VERSION_NOT_SUPPORTED);
    // Garbage: counted, unanswered.
    assert!(e.handle(40, from(), false, &[0x32, 1, 0]).is_empty());
    assert_eq!(e.stats.malformed, 1);
}

#[test]
fn an_sgsn_restart_tears_its_contexts_down() {
    let (mut e, t) = engine(1000, "10.64.0.0/24");
    let v4 = EndUserAddress::Ipv4(None);
    e.handle(
        0,
        from(),
        false,
        &create(1, "001010000000001", 5, "internet", v4),
    );
    assert_eq!(e.context_count(), 1);
    // The same SGSN with another restart counter: its first context is gone.
    let mut m = create(2, "001010000000002", 5, "internet", v4);
    let at = m.windows(2).position(|w| w == [ie::RECOVERY, 3]).unwrap();
    m[at + 1] = 4;
    e.handle(10, from(), false, &m);
    assert_eq!(e.context_count(), 1);
    assert_eq!(e.stats.contexts_torn_down_by_restart, 1);
    assert_eq!(t.slot_v4(0, 0x0a40_0001), None);
}

#[test]
fn a_g_pdu_for_an_unknown_teid_gets_an_error_indication() {
    let (mut e, _) = engine(1000, "10.64.0.0/24");
    let mut g = vec![0x30, 255, 0, 4, 0xde, 0xad, 0xbe, 0xef];
    g.extend_from_slice(&[0x45, 0, 0, 4]);
    let out = e.handle(0, SocketAddr::new(IpAddr::V4(SGSN), 2152), true, &g);
    let (ty, teid, ies) = answer(&out);
    assert!(out[0].user_plane);
    assert_eq!((ty, teid), (msg::ERROR_INDICATION, 0));
    assert_eq!(
        ie_of(&ies, ie::TEID_DATA_I),
        Some(&[0xde, 0xad, 0xbe, 0xef][..])
    );
    assert_eq!(ie_of(&ies, ie::GSN_ADDRESS), Some(&[192, 0, 2, 1][..]));
}

#[test]
fn a_path_that_answers_no_echo_fails_and_its_contexts_go() {
    // echo-interval 60 s: the first Echo Request a minute after the first context.
    let (mut e, t) = engine(1000, "10.64.0.0/24");
    let v4 = EndUserAddress::Ipv4(None);
    e.handle(
        0,
        from(),
        false,
        &create(1, "262010000000001", 5, "internet", v4),
    );
    assert!(e.tick(59_000).is_empty());
    let first = e.tick(60_000);
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].to, SocketAddr::new(IpAddr::V4(SGSN), 2123));
    let h = gtp::parse_header(&first[0].bytes).unwrap();
    assert_eq!(h.msg_type, msg::ECHO_REQUEST);
    // Answered: nothing more until the next interval.
    let mut r = MsgBuilder::new(msg::ECHO_RESPONSE, 0, h.seq.unwrap());
    r.tv(ie::RECOVERY, &[3]);
    assert!(e.handle(60_100, from(), false, &r.finish()).is_empty());
    assert!(e.tick(63_500).is_empty(), "answered: not sent again");
    // The next one goes unanswered: sent again every T3, N3 times, then the path has failed.
    let mut sent = 0;
    let mut now = 120_000;
    while now <= 120_000 + T3_MS * u64::from(N3) {
        sent += e.tick(now).len();
        now += 500;
    }
    assert_eq!(sent, N3 as usize);
    assert_eq!(e.context_count(), 0);
    assert_eq!(t.slot_v4(0, 0x0a40_0001), None);
    assert_eq!(
        std::mem::take(&mut e.events),
        [GtpEvent::PathFailure {
            sgsn: SGSN,
            contexts: 1
        }]
    );
    assert_eq!(e.stats.path_failures, 1);
    // No contexts: no more Echo Requests to that SGSN.
    assert!(e.tick(300_000).is_empty());
}

#[test]
fn an_echo_response_with_another_restart_counter_ends_the_sgsns_contexts() {
    let (mut e, _) = engine(1000, "10.64.0.0/24");
    let v4 = EndUserAddress::Ipv4(None);
    e.handle(
        0,
        from(),
        false,
        &create(1, "262010000000001", 5, "internet", v4),
    );
    let mut r = MsgBuilder::new(msg::ECHO_RESPONSE, 0, 99);
    r.tv(ie::RECOVERY, &[4]);
    e.handle(10, from(), false, &r.finish());
    assert_eq!(e.context_count(), 0);
    assert_eq!(
        e.events,
        [GtpEvent::PeerRestart {
            sgsn: SGSN,
            old: 3,
            new: 4,
            contexts: 1
        }]
    );
}
