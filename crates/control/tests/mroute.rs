//! Multicast routing through the management plane: `show ip mroute` lists the config's routes
//! per family, and a FIB at its limit refuses routes, counts them and says so once in the log
//! (not once per route). (Traffic through the routes: the observability bed and the scenarios.)

mod common;

use std::time::{Duration, Instant};

use common::*;

fn config(routes: usize) -> String {
    let mut y = String::from(
        "router: { workers: 1 }\nlimits: { mroutes: 16 }\nports:\n  - { name: p0, driver: mem }\n  - { name: p1, driver: mem }\ninterfaces:\n  - { name: p0, port: p0, mac: \"02:00:00:00:00:01\", ipv4: [192.0.2.1/24] }\n  - { name: p1, port: p1, mac: \"02:00:00:00:01:01\", ipv4: [198.51.100.1/24] }\nmulticast-routing:\n  static:\n",
    );
    for g in 0..routes {
        y += &format!(
            "    - {{ source: 192.0.2.2, group: 232.0.0.{}, iif: p0, oifs: [p1] }}\n",
            g + 1
        );
    }
    y
}

#[test]
fn a_full_multicast_fib_refuses_counts_and_logs_once() {
    let dir = std::env::temp_dir().join(format!("linerate-mroute-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (core, _peers) = core_with(&dir, &config(20));
    let v = core.mroutes(&Default::default()).unwrap();
    assert_eq!((v.total, v.capacity, v.table_full), (16, 16, 4), "{v:?}");
    assert!(v
        .routes
        .iter()
        .all(|r| r.origin == "static" && r.oifs == ["p1"]));
    let deadline = Instant::now() + Duration::from_secs(5);
    let logged = loop {
        let l: Vec<_> = core
            .logging(100)
            .into_iter()
            .filter(|r| r.msgid == "MROUTE_LIMIT")
            .collect();
        if !l.is_empty() || Instant::now() > deadline {
            break l;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(logged.len(), 1, "one record, not one per route");
    assert!(
        logged[0].text.contains("4 since the last record"),
        "{}",
        logged[0].text
    );
    assert_eq!(
        core.mroutes(&api::requests::MrouteQuery {
            family: Some("ipv6".into()),
            vrf: None,
        })
        .unwrap()
        .routes
        .len(),
        0
    );
    assert!(core
        .mroutes(&api::requests::MrouteQuery {
            family: Some("ipx".into()),
            vrf: None,
        })
        .is_err());
    core.shutdown();
    let _ = std::fs::remove_dir_all(&dir);
}
