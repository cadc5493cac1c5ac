//! Configs that must be refused, each with the file, line, column and field of every error and a
//! short message. The files in `fixtures/refused/` are the reproductions from the hardening issue
//! (`linerate check` accepted them, or reported them without a position); `fixtures/base.yaml` is
//! the valid config they were made from.

use std::path::{Path, PathBuf};

use control::config::{self, ConfigError};
use control::Router;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// What `linerate check` does: the config, then the route files by building the router.
fn check(name: &str) -> Result<(), String> {
    let cfg = config::load(&fixture(name)).map_err(|e| e.to_string())?;
    Router::build(cfg).map(|_| ()).map_err(|e| e.to_string())
}

fn config_errors(name: &str) -> Vec<ConfigError> {
    config::load(&fixture(name)).expect_err(name).0
}

/// The single error of `name`, checked for its position and field.
fn one_error(name: &str, line: usize, col: usize, field: &str) -> ConfigError {
    let e = config_errors(name);
    assert_eq!(e.len(), 1, "{name}: {e:#?}");
    let e = e.into_iter().next().unwrap();
    assert_eq!(
        (e.line, e.col, e.field.as_str()),
        (line, col, field),
        "{name}: {e}"
    );
    assert!(e.file.ends_with(name), "{e}");
    e
}

#[test]
fn the_base_config_is_valid() {
    check("base.yaml").unwrap();
}

#[test]
fn overlapping_subnets_on_two_interfaces_are_refused() {
    let e = one_error(
        "refused/05-overlapping-subnets.yaml",
        7,
        60,
        "interfaces[1].ipv4[0]",
    );
    assert!(e.message.contains("overlaps `192.0.2.1/24`"), "{e}");
    assert!(e.message.contains("192.0.2.128/25"), "{e}");
}

#[test]
fn an_empty_file_is_refused() {
    let e = one_error("refused/13-empty.yaml", 1, 1, "document");
    assert!(e.message.contains("empty"), "{e}");
}

#[test]
fn network_and_broadcast_addresses_are_refused_on_interfaces() {
    let e = config_errors("refused/37-interface-address-network.yaml");
    let at = |field: &str, what: &str| {
        e.iter()
            .any(|x| x.line == 7 && x.field == field && x.message.contains(what))
    };
    assert!(at("interfaces[1].ipv4[0]", "network address"), "{e:#?}");
    assert!(at("interfaces[1].ipv4[1]", "broadcast address"), "{e:#?}");
}

#[test]
fn a_second_document_is_refused_at_its_marker() {
    let e = one_error("refused/39-second-document-ignored.yaml", 12, 1, "document");
    assert!(e.message.contains("second YAML document"), "{e}");
}

#[test]
fn one_prefix_with_two_targets_is_refused() {
    let e = one_error(
        "refused/40-duplicate-route-different-target.yaml",
        12,
        5,
        "routes[1]",
    );
    assert!(e.message.contains("already configured at line 11"), "{e}");
    assert!(
        e.message.contains("via 198.51.100.2; here blackhole"),
        "{e}"
    );
}

#[test]
fn a_buffer_pool_larger_than_the_machine_is_refused() {
    let e = one_error("refused/41-huge-buffers.yaml", 1, 32, "router.buffers");
    assert!(
        e.message.contains("100000000 buffers") && e.message.contains("MemTotal"),
        "{e}"
    );
}

#[test]
fn the_same_subnet_twice_on_one_interface_is_refused() {
    let e = one_error(
        "refused/45-same-subnet-twice-one-interface.yaml",
        7,
        77,
        "interfaces[1].ipv4[1]",
    );
    assert!(
        e.message.contains("same subnet as `198.51.100.1/24`"),
        "{e}"
    );
}

#[test]
fn huge_numbers_are_echoed_as_written() {
    let e = config_errors("refused/12-huge-numbers.yaml");
    let text: Vec<String> = e.iter().map(|x| x.to_string()).collect();
    let has = |s: &str| text.iter().any(|t| t.contains(s));
    assert!(
        has("router.workers: `99999999999999999999999999`"),
        "{text:#?}"
    );
    assert!(
        has("router.buffers: 18446744073709551615 buffers"),
        "{text:#?}"
    );
    assert!(has("limits.ipv4-routes: `1e30`"), "{text:#?}");
    assert!(has("interfaces[1].mtu: `4294967296`"), "{text:#?}");
    assert!(!has("18446744073709552000") && !has("100000000000000000000000000`"));
    assert_eq!(e.len(), 6, "{text:#?}");
}

#[test]
fn binary_junk_is_refused_at_its_first_bad_byte() {
    let e = one_error("refused/14-binary-junk.yaml", 1, 1, "document");
    assert!(e.message.contains("byte 0x82 is not UTF-8"), "{e}");
}

#[test]
fn a_non_utf8_byte_is_reported_with_its_position_and_field() {
    // Line 4 is `  - { name: p\xE91, ...`: the byte is the 14th character.
    let e = one_error("refused/22-non-utf8.yaml", 4, 14, "ports[1].name");
    assert!(e.message.contains("byte 0xE9 is not UTF-8"), "{e}");
}

#[test]
fn every_bad_route_file_line_is_reported_with_its_column_and_a_count() {
    let e = check("refused/31-bad-route-file-lines.yaml").unwrap_err();
    let lines: Vec<&str> = e.lines().collect();
    assert_eq!(lines.len(), 4, "{e}");
    assert!(
        lines[0].ends_with(
            "bad.routes:2:1: prefix: `10.2.0.1/16` has host bits set; did you mean 10.2.0.0/16?"
        ),
        "{e}"
    );
    assert!(
        lines[1].ends_with("bad.routes:3:1: prefix: `banana` is not an IPv4 or IPv6 prefix"),
        "{e}"
    );
    assert!(lines[2].ends_with("bad.routes:4:17: via: next hop 9.9.9.9 is not a neighbor nor on a connected subnet in VRF `default`"), "{e}");
    assert_eq!(lines[3], "3 errors; nothing was applied");
}

#[test]
fn a_neighbor_at_the_interfaces_own_address_is_called_that() {
    let e = config_errors("refused/46-interface-ip-is-neighbor-ip.yaml");
    assert_eq!(
        (e[0].line, e[0].col, e[0].field.as_str()),
        (9, 5, "neighbors[0]")
    );
    assert!(
        e[0].message
            .contains("198.51.100.1 is the address of interface `p1` itself"),
        "{e:#?}"
    );
    assert!(!e[0].message.contains("not on a subnet"), "{e:#?}");
}

#[test]
fn a_huge_scalar_is_echoed_as_an_excerpt() {
    let base = std::fs::read_to_string(fixture("base.yaml")).unwrap();
    let big = "x".repeat(5_000_000);
    let text = base.replace("workers: 1", &format!("workers: \"{big}\""));
    let e = config::parse(&text, Path::new("big.yaml")).unwrap_err();
    let shown = e.to_string();
    assert!(shown.len() < 300, "{} bytes of error", shown.len());
    assert!(shown.contains("…(5000000 bytes)"), "{shown}");
    assert!(
        shown.starts_with("big.yaml:1:20: router.workers: `xxxx"),
        "{shown}"
    );
}

#[test]
fn route_file_errors_are_capped_with_a_count() {
    let dir = std::env::temp_dir().join(format!("linerate-rf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let lines: String = (0..100)
        .map(|i| format!("10.{i}.0.1/16 via 198.51.100.2\n"))
        .collect();
    std::fs::write(dir.join("many.routes"), lines).unwrap();
    let base = std::fs::read_to_string(fixture("base.yaml")).unwrap();
    std::fs::write(
        dir.join("r.yaml"),
        format!("{base}route-files:\n  - {{ path: many.routes }}\n"),
    )
    .unwrap();
    let cfg = config::load(&dir.join("r.yaml")).unwrap();
    let e = Router::build(cfg)
        .err()
        .expect("bad route file")
        .to_string();
    let lines: Vec<&str> = e.lines().collect();
    assert_eq!(lines.len(), config::MAX_PRINTED + 2, "{e}");
    assert_eq!(lines[config::MAX_PRINTED], "... and 80 more");
    assert_eq!(
        lines[config::MAX_PRINTED + 1],
        "100 errors; nothing was applied"
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_prefix_configured_twice_through_route_files_is_refused_with_where_it_was_first() {
    let dir = std::env::temp_dir().join(format!("linerate-rf-dup-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // Line 3 repeats line 1 with another target, line 4 repeats line 2 alike, line 5 is p1's
    // connected subnet; b.routes repeats a.routes' first line.
    std::fs::write(
        dir.join("a.routes"),
        "10.1.0.0/16 via 198.51.100.2\n10.2.0.0/16 blackhole\n10.1.0.0/16 reject\n  10.2.0.0/16 blackhole\n198.51.100.0/24 via 198.51.100.2\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("b.routes"),
        "10.3.0.0/16 reject\n10.1.0.0/16 reject\n",
    )
    .unwrap();
    let base = std::fs::read_to_string(fixture("base.yaml")).unwrap();
    std::fs::write(
        dir.join("r.yaml"),
        format!("{base}route-files:\n  - {{ path: a.routes }}\n  - {{ path: b.routes }}\n"),
    )
    .unwrap();
    let cfg = config::load(&dir.join("r.yaml")).unwrap();
    let e = Router::build(cfg).err().expect("duplicates").to_string();
    let lines: Vec<&str> = e.lines().collect();
    assert_eq!(lines.len(), 5, "{e}");
    assert!(
        lines[0].ends_with("a.routes:3:1: prefix: 10.1.0.0/16 in VRF `default` is already configured at line 1: a prefix is configured once (ECMP: list every next hop after one `via`)"),
        "{e}"
    );
    assert!(
        lines[1].ends_with("a.routes:4:3: prefix: 10.2.0.0/16 in VRF `default` is already configured at line 2: a prefix is configured once (ECMP: list every next hop after one `via`)"),
        "{e}"
    );
    assert!(
        lines[2].contains("a.routes:5:1: prefix: 198.51.100.0/24 in VRF `default` is already configured by the config (a connected subnet"),
        "{e}"
    );
    assert!(
        lines[3].ends_with(&format!(
            "b.routes:2:1: prefix: 10.1.0.0/16 in VRF `default` is already configured in {}:1: a prefix is configured once (ECMP: list every next hop after one `via`)",
            dir.join("a.routes").display()
        )),
        "{e}"
    );
    assert_eq!(lines[4], "4 errors; nothing was applied");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_pool_that_cannot_be_allocated_fails_the_start_without_a_panic() {
    // Past `check` (set in code), as a config checked on a larger machine would be.
    let mode = std::fs::read_to_string("/proc/sys/vm/overcommit_memory").unwrap_or_default();
    if !matches!(mode.trim(), "0" | "2") {
        return; // the kernel would grant ~1 TB and the pool would touch it all
    }
    let mut cfg = config::load(&fixture("base.yaml")).unwrap();
    cfg.buffers = 100_000_000;
    let router = Router::build(cfg).unwrap();
    let e = router.start(Default::default()).err().expect("no pool");
    assert!(e.to_string().contains("out of memory"), "{e}");
}

#[test]
fn an_af_packet_port_chooses_its_receive_ring_and_nothing_else_may() {
    let ok = "ports:\n  - { name: p0, driver: af_packet, device: d0, rx-ring: blocks }\n  - { name: p1, driver: af_packet, device: d1 }\n";
    let cfg = config::parse(ok, Path::new("r.yaml")).unwrap();
    assert!(matches!(
        cfg.ports[0].driver,
        config::Driver::AfPacket { frames: false, .. }
    ));
    assert!(matches!(
        cfg.ports[1].driver,
        config::Driver::AfPacket { frames: true, .. }
    ));
    let bad = "ports:\n  - { name: p0, driver: af_packet, device: d0, rx-ring: rings }\n  - { name: p1, driver: mem, rx-ring: frames }\n";
    let e = config::parse(bad, Path::new("r.yaml")).unwrap_err().0;
    assert_eq!(e.len(), 2, "{e:#?}");
    assert_eq!((e[0].line, e[0].field.as_str()), (2, "ports[0].rx-ring"));
    assert!(
        e[0].message
            .contains("frames (TPACKET_V2, the default) or blocks"),
        "{e:#?}"
    );
    assert_eq!((e[1].line, e[1].field.as_str()), (3, "ports[1].rx-ring"));
    assert!(e[1].message.contains("only an af_packet port"), "{e:#?}");
}

#[test]
fn a_punt_table_with_an_unknown_class_or_a_zero_rate_is_refused() {
    let e = config_errors("refused/47-punt-table.yaml");
    let at: Vec<_> = e
        .iter()
        .map(|e| (e.line, e.field.as_str(), e.message.as_str()))
        .collect();
    assert_eq!(e.len(), 3, "{e:#?}");
    assert_eq!((at[0].0, at[0].1), (9, "control-plane.punt.bgpp"), "{at:?}");
    assert!(at[0].2.contains("`bgpp` is not a punt class") && at[0].2.contains("bgp,"));
    assert_eq!(
        (at[1].0, at[1].1),
        (10, "control-plane.punt.ospf.rate"),
        "{at:?}"
    );
    assert_eq!(
        (at[2].0, at[2].1),
        (11, "control-plane.punt.lldp.rate"),
        "{at:?}"
    );
    assert!(at[2].2.contains("`rate` is required"));
}

#[test]
fn the_old_punt_rate_names_its_replacement() {
    let text = std::fs::read_to_string(fixture("base.yaml")).unwrap()
        + "control-plane:\n  punt-rate: { neighbor: 200 }\n";
    let e = config::parse(&text, Path::new("x.yaml"))
        .expect_err("refused")
        .0;
    assert_eq!(e.len(), 1, "{e:#?}");
    assert_eq!(e[0].field, "control-plane.punt-rate");
    assert!(e[0].message.contains("is now `punt`"), "{}", e[0]);
}

#[test]
fn an_shm_port_takes_its_file_role_and_rings_and_nothing_else_may() {
    let ok = "ports:\n  - { name: p0, driver: shm, path: /dev/shm/lr-link, role: server, slots: 256, max-frame: 2048 }\n  - { name: p1, driver: shm, path: link2 }\n";
    let cfg = config::parse(ok, Path::new("/etc/lr/r.yaml")).unwrap();
    assert_eq!(
        cfg.ports[0].driver,
        config::Driver::Shm {
            path: "/dev/shm/lr-link".into(),
            server: true,
            queues: 0,
            slots: 256,
            max_frame: 2048,
        }
    );
    assert!(matches!(
        &cfg.ports[1].driver,
        config::Driver::Shm { path, server: false, slots: 1024, max_frame: 9216, .. }
            if path == Path::new("/etc/lr/link2")
    ));
    let bad = "ports:\n  - { name: p0, driver: shm, role: master, slots: 100, max-frame: 10000 }\n  - { name: p1, driver: mem, role: server }\n";
    let e = config::parse(bad, Path::new("r.yaml")).unwrap_err().0;
    let got: Vec<(usize, &str)> = e.iter().map(|x| (x.line, x.field.as_str())).collect();
    assert_eq!(
        got,
        [
            (2, "ports[0]"),
            (2, "ports[0].role"),
            (2, "ports[0].slots"),
            (2, "ports[0].max-frame"),
            (3, "ports[1].role"),
        ],
        "{e:#?}"
    );
    assert!(e[0].message.contains("needs `path`"));
    assert!(e[1].message.contains("server (makes the file) or client"));
    assert!(e[4].message.contains("only an shm port takes `role`"));
}
