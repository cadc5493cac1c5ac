use std::net::IpAddr;

use super::*;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn route(p: &str) -> Route<'static> {
    Route {
        op: Op::New,
        replace: true,
        table: RT_TABLE_MAIN,
        prefix: p.parse().unwrap(),
        rtype: RouteType::Unicast,
        protocol: 196,
        priority: 20,
        nh_id: 0,
        gateway: None,
        oif: 0,
        multipath: Paths::default(),
        encap: false,
    }
}

fn nh(id: u32) -> Nexthop<'static> {
    Nexthop {
        op: Op::New,
        id,
        family: AF_INET,
        protocol: RTPROT_ZEBRA,
        flags: 0,
        blackhole: false,
        oif: 3,
        gateway: Some(ip("10.0.0.2")),
        group: Members::default(),
        group_type: 0,
        encap: false,
    }
}

fn enc(m: &Msg<'_>) -> Vec<u8> {
    let mut b = Vec::new();
    encode::message(&mut b, m, 77);
    b
}

fn dec(b: &[u8]) -> Result<Msg<'_>, DecodeError> {
    decode(b).map(|(m, _)| m)
}

fn samples() -> Vec<Msg<'static>> {
    vec![
        Msg::Route(Route {
            nh_id: 29,
            ..route("198.51.100.0/24")
        }),
        Msg::Route(Route {
            gateway: Some(ip("2001:db8::2")),
            oif: 3,
            replace: false,
            ..route("2001:db8:100::/48")
        }),
        Msg::Route(Route {
            multipath: Paths::from_hops(
                true,
                &[
                    NextHop::new(Some(ip("10.0.0.2")), 3),
                    NextHop {
                        gateway: Some(ip("fe80::1")),
                        ifindex: 5,
                        weight: 256,
                    },
                    NextHop::new(None, 7),
                ],
            ),
            table: 1000,
            ..route("0.0.0.0/0")
        }),
        Msg::Route(Route {
            rtype: RouteType::Blackhole,
            ..route("203.0.113.0/25")
        }),
        Msg::Route(Route {
            op: Op::Del,
            replace: false,
            rtype: RouteType::Other(RTN_UNSPEC),
            ..route("2001:db8:300::/48")
        }),
        Msg::Route(Route {
            gateway: Some(ip("10.9.9.9")),
            ..route("2001:db8::/32")
        }),
        Msg::Nexthop(nh(5)),
        Msg::Nexthop(Nexthop {
            family: AF_INET6,
            gateway: Some(ip("2001:db8:1::2")),
            ..nh(6)
        }),
        Msg::Nexthop(Nexthop {
            blackhole: true,
            gateway: None,
            oif: 0,
            ..nh(24)
        }),
        Msg::Nexthop(Nexthop {
            family: AF_UNSPEC,
            gateway: None,
            oif: 0,
            group: Members::from_members(&[
                GroupMember { id: 5, weight: 1 },
                GroupMember { id: 6, weight: 100 },
            ]),
            group_type: 1,
            ..nh(29)
        }),
        Msg::Nexthop(Nexthop {
            op: Op::Del,
            family: AF_UNSPEC,
            protocol: 0,
            gateway: None,
            oif: 0,
            ..nh(29)
        }),
    ]
}

#[test]
fn round_trips() {
    for m in samples() {
        let b = enc(&m);
        let (got, used) = decode(&b).unwrap();
        assert_eq!(used, b.len());
        assert_eq!(got, m);
        assert_eq!(got.clone().into_owned(), m);
    }
}

#[test]
fn multipath_weights_and_families() {
    let m = &samples()[2];
    let b = enc(m);
    let Msg::Route(r) = dec(&b).unwrap() else {
        panic!()
    };
    let hops: Vec<NextHop> = r.multipath.iter().collect();
    assert_eq!(hops.len(), 3);
    assert_eq!(hops[1].weight, 256);
    assert_eq!(hops[1].gateway, Some(ip("fe80::1")), "RTA_VIA");
    assert_eq!(hops[2].gateway, None);
    assert_eq!(r.table, 1000);
}

#[test]
fn several_messages_back_to_back() {
    let all = samples();
    let mut b = Vec::new();
    for m in &all {
        b.extend(enc(m));
    }
    let got: Vec<Msg<'_>> = messages(&b).map(Result::unwrap).collect();
    assert_eq!(got, all);
}

#[test]
fn others_are_typed_and_skipped() {
    let mut b = enc(&Msg::Other { nlmsg_type: 28 }); // RTM_NEWNEIGH
    let mut mpls = enc(&samples()[0]);
    mpls[16] = 28; // AF_MPLS
    b.extend(&mpls);
    let got: Vec<Msg<'_>> = messages(&b).map(Result::unwrap).collect();
    assert_eq!(
        got,
        [
            Msg::Other { nlmsg_type: 28 },
            Msg::Other {
                nlmsg_type: RTM_NEWROUTE
            }
        ]
    );
}

#[test]
fn host_bits_are_masked() {
    let mut b = enc(&Msg::Route(route("192.0.2.0/24")));
    b[16 + 12 + 4 + 3] = 0x55; // last byte of RTA_DST
    let Msg::Route(r) = dec(&b).unwrap() else {
        panic!()
    };
    assert_eq!(r.prefix, "192.0.2.0/24".parse().unwrap());
}

/// Offsets in an encoded route: nlmsghdr 16, rtmsg 12, then RTA_DST.
const RT_ATTRS: usize = 16 + 12;

fn set_len(b: &mut [u8]) {
    let n = b.len() as u32;
    b[..4].copy_from_slice(&n.to_ne_bytes());
}

/// Appends a raw attribute and fixes nlmsg_len.
fn with_attr(mut b: Vec<u8>, t: u16, payload: &[u8]) -> Vec<u8> {
    b.extend(((4 + payload.len()) as u16).to_ne_bytes());
    b.extend(t.to_ne_bytes());
    b.extend(payload);
    b.resize(align4(b.len()), 0);
    set_len(&mut b);
    b
}

#[test]
fn malformed_headers() {
    let good = enc(&samples()[0]);
    assert_eq!(dec(&good[..15]), Err(DecodeError::Truncated));
    let mut b = good.clone();
    b[..4].copy_from_slice(&15u32.to_ne_bytes());
    assert_eq!(dec(&b), Err(DecodeError::BadMsgLen(15)));
    let mut b = good.clone();
    b[..4].copy_from_slice(&1000u32.to_ne_bytes());
    assert_eq!(dec(&b), Err(DecodeError::BadMsgLen(1000)));
    // rtmsg / nhmsg cut short
    let mut b = good[..16 + 11].to_vec();
    set_len(&mut b);
    assert_eq!(dec(&b), Err(DecodeError::Truncated));
    let mut b = enc(&samples()[6])[..16 + 7].to_vec();
    set_len(&mut b);
    assert_eq!(dec(&b), Err(DecodeError::Truncated));
}

#[test]
fn malformed_attributes() {
    let base = enc(&Msg::Route(route("192.0.2.0/24")));
    // attribute length below its header, beyond the message, and stray trailing bytes
    let mut b = base.clone();
    b[RT_ATTRS..RT_ATTRS + 2].copy_from_slice(&3u16.to_ne_bytes());
    assert_eq!(dec(&b), Err(DecodeError::BadAttr));
    let mut b = base.clone();
    b[RT_ATTRS..RT_ATTRS + 2].copy_from_slice(&200u16.to_ne_bytes());
    assert_eq!(dec(&b), Err(DecodeError::BadAttr));
    let mut b = base.clone();
    b.extend([1, 2]);
    set_len(&mut b);
    assert_eq!(dec(&b), Err(DecodeError::BadAttr));
    // fixed-size attributes of the wrong size
    let bad_len = |attr, len| Err(DecodeError::BadAttrLen { attr, len });
    assert_eq!(
        dec(&with_attr(base.clone(), RTA_OIF, &[1, 2])),
        bad_len(RTA_OIF, 2)
    );
    assert_eq!(
        dec(&with_attr(base.clone(), RTA_GATEWAY, &[0; 16])),
        bad_len(RTA_GATEWAY, 16),
        "an IPv6 gateway on an IPv4 route must come as RTA_VIA"
    );
    assert_eq!(
        dec(&with_attr(base.clone(), RTA_DST, &[0; 5])),
        bad_len(RTA_DST, 5)
    );
    assert_eq!(
        dec(&with_attr(base.clone(), RTA_VIA, &[7, 0, 1, 2, 3, 4])),
        bad_len(RTA_VIA, 6)
    );
    assert_eq!(
        dec(&with_attr(base.clone(), RTA_VIA, &[2])),
        bad_len(RTA_VIA, 1)
    );
    assert_eq!(
        dec(&with_attr(base.clone(), RTA_NH_ID, &0u32.to_ne_bytes())),
        Err(DecodeError::ZeroId)
    );
    let mut b = base.clone();
    b[17] = 33;
    assert_eq!(dec(&b), Err(DecodeError::BadPrefixLen(33)));
}

#[test]
fn malformed_multipath() {
    let base = enc(&Msg::Route(route("192.0.2.0/24")));
    let mp = |raw: &[u8]| dec(&with_attr(base.clone(), RTA_MULTIPATH, raw)).map(|_| ());
    assert_eq!(mp(&[8, 0, 0, 0, 3, 0, 0, 0]), Ok(()));
    assert_eq!(
        mp(&[7, 0, 0, 0, 3, 0, 0, 0]),
        Err(DecodeError::BadMultipath)
    );
    assert_eq!(
        mp(&[16, 0, 0, 0, 3, 0, 0, 0]),
        Err(DecodeError::BadMultipath)
    );
    assert_eq!(mp(&[8, 0, 0, 0]), Err(DecodeError::BadMultipath));
    // nested gateway of the wrong family width
    let mut r = vec![20, 0, 0, 0, 3, 0, 0, 0, 12, 0, 5, 0];
    r.extend([0; 8]);
    assert_eq!(
        mp(&r),
        Err(DecodeError::BadAttrLen {
            attr: RTA_GATEWAY,
            len: 8
        })
    );
    // nested attribute overrunning its record
    assert_eq!(
        mp(&[12, 0, 0, 0, 3, 0, 0, 0, 9, 0, 5, 0]),
        Err(DecodeError::BadAttr)
    );
}

#[test]
fn malformed_nexthops() {
    let conflict = |m: Nexthop<'_>| dec(&enc(&Msg::Nexthop(m))).map(Msg::into_owned);
    let group = Members::from_members(&[GroupMember { id: 5, weight: 1 }]);
    assert!(matches!(
        conflict(Nexthop {
            group: group.clone(),
            ..nh(9)
        }),
        Err(DecodeError::Conflict(_))
    ));
    assert!(matches!(
        conflict(Nexthop {
            blackhole: true,
            ..nh(9)
        }),
        Err(DecodeError::Conflict(_))
    ));
    assert!(matches!(
        conflict(Nexthop {
            gateway: None,
            oif: 0,
            ..nh(9)
        }),
        Err(DecodeError::Conflict(_))
    ));
    assert!(matches!(
        conflict(Nexthop {
            family: AF_UNSPEC,
            ..nh(9)
        }),
        Err(DecodeError::Conflict(_))
    ));
    assert!(matches!(
        conflict(Nexthop {
            gateway: None,
            oif: 0,
            family: AF_UNSPEC,
            group: group.clone(),
            ..nh(5)
        }),
        Err(DecodeError::Conflict("group contains itself"))
    ));
    // the IPv4 family with an IPv6 gateway
    let mut b = enc(&Msg::Nexthop(Nexthop {
        gateway: None,
        ..nh(9)
    }));
    b = with_attr(b, NHA_GATEWAY, &[0; 16]);
    assert_eq!(
        dec(&b),
        Err(DecodeError::BadAttrLen {
            attr: NHA_GATEWAY,
            len: 16
        })
    );
    // no id, id 0, group of a partial entry, group member 0, bad group type
    let mut hdr = enc(&Msg::Nexthop(nh(9)))[..16 + 8].to_vec();
    set_len(&mut hdr);
    assert_eq!(
        dec(&with_attr(hdr.clone(), NHA_OIF, &[3, 0, 0, 0])),
        Err(DecodeError::MissingId)
    );
    assert_eq!(
        dec(&with_attr(hdr.clone(), NHA_ID, &[0; 4])),
        Err(DecodeError::ZeroId)
    );
    let with_id = with_attr(hdr, NHA_ID, &[9, 0, 0, 0]);
    assert_eq!(
        dec(&with_attr(with_id.clone(), NHA_GROUP, &[5, 0, 0, 0, 0, 0])),
        Err(DecodeError::BadGroup)
    );
    assert_eq!(
        dec(&with_attr(with_id.clone(), NHA_GROUP, &[])),
        Err(DecodeError::BadGroup)
    );
    assert_eq!(
        dec(&with_attr(with_id.clone(), NHA_GROUP, &[0; 8])),
        Err(DecodeError::BadGroup)
    );
    assert_eq!(
        dec(&with_attr(with_id, NHA_GROUP_TYPE, &[0; 4])),
        Err(DecodeError::BadAttrLen {
            attr: NHA_GROUP_TYPE,
            len: 4
        })
    );
}

#[test]
fn every_truncation_is_an_error_not_a_panic() {
    for m in samples() {
        let good = enc(&m);
        for cut in 0..good.len() {
            let mut b = good[..cut].to_vec();
            assert!(dec(&b).is_err(), "cut {cut} of {m:?}");
            if b.len() >= 4 {
                set_len(&mut b);
                let _ = dec(&b); // may be valid (attributes are optional), must not panic
            }
        }
    }
}

#[test]
fn messages_stop_at_the_first_error() {
    let mut b = enc(&samples()[0]);
    b.extend([9, 9, 9]);
    b.extend(enc(&samples()[1]));
    let got: Vec<_> = messages(&b).collect();
    assert_eq!(got.len(), 2);
    assert!(got[0].is_ok());
    assert!(matches!(got[1], Err(DecodeError::BadMsgLen(_))));
}
