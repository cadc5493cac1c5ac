"""Tests of the test bed itself (tests/system/testbed/): namespaces and veths, BIRD feeding FRR
over eBGP, OSPF and OSPFv3 between two FRRs, zebra's FPM output, and a graceful restart of FRR.

Needs root and Debian's frr, bird2, tshark, iproute2 (installed on demand when root); not the
linerate binary. Topology of every test: namespace A (a0) <-veth-> (b0) namespace B, with
192.0.2.0/30 and 2001:db8::/64 on the link (A .1/::1, B .2/::2).
"""

from __future__ import annotations

import ipaddress
import os
import signal
import socket
import struct
import subprocess
import time
from pathlib import Path

import pytest

from testbed import (
    BgpSession,
    BirdConfig,
    FpmListener,
    Testbed,
    bgp_config,
    ensure_packages,
    list_netns,
    ospf6_config,
    ospf_config,
    parse_route_event,
    prefixes,
    static_config,
    sweep_stale,
    wait_until,
    zebra_config,
)
from testbed.fpm import (
    FPM_MSG_NETLINK,
    FPM_VERSION,
    RTM_NEWROUTE,
    RTPROT_BGP,
    decode_route,
    netlink_messages,
    split_frames,
)
from testbed.install import PACKAGES, missing_packages, skip_or_fail
from testbed.netns import _pid_alive

A4, B4, A6, B6 = "192.0.2.1", "192.0.2.2", "2001:db8::1", "2001:db8::2"
AS_A, AS_B = 65001, 65002
REPO = Path(__file__).resolve().parents[2]


def two_namespaces(tb: Testbed):
    a, b = tb.netns("a"), tb.netns("b")
    tb.veth(a, "a0", b, "b0")
    a.addr("a0", f"{A4}/30", f"{A6}/64")
    b.addr("b0", f"{B4}/30", f"{B6}/64")
    return a, b


def bird_feed(n4: int, n6: int, *, graceful_restart: bool = False) -> BirdConfig:
    """BIRD in A: n4 IPv4 /26s and n6 IPv6 /48s over an IPv4 and an IPv6 eBGP session to B."""
    return BirdConfig(
        A4, AS_A,
        sessions=[BgpSession(A4, B4, AS_B, name="to_b4"), BgpSession(A6, B6, AS_B, name="to_b6")],
        routes4=prefixes("198.18.0.0/15", n4, 26),
        routes6=prefixes("2001:db8:1000::/36", n6, 48),
        graceful_restart=graceful_restart,
    )


def frr_bgp(graceful_restart: bool = False) -> str:
    return bgp_config(AS_B, B4, [(A4, AS_A), (A6, AS_A)], graceful_restart=graceful_restart)


# -- pieces that need no root -------------------------------------------------------------------


def test_fpm_decoding_golden_bytes() -> None:
    """A hand-built FPM frame (two RTM_NEWROUTE messages: 198.51.100.0/24 with RTA_TABLE and
    RTA_DST, and 2001:db8:f00::/48) decodes to those prefixes, protocol and table; a partial
    frame waits in the buffer."""
    def route(family: int, dst: bytes, plen: int, table_attr: bool) -> bytes:
        attrs = struct.pack("=HH", 4 + len(dst), 1) + dst
        if table_attr:
            attrs += struct.pack("=HHI", 8, 15, 254)
        rtm = struct.pack("=BBBBBBBBI", family, plen, 0, 0, 254, RTPROT_BGP, 0, 1, 0)
        body = rtm + attrs
        return struct.pack("=IHHII", 16 + len(body), RTM_NEWROUTE, 0x501, 7, 0) + body

    msgs = route(socket.AF_INET, bytes([198, 51, 100, 0]), 24, True)
    msgs += route(socket.AF_INET6, ipaddress.IPv6Address("2001:db8:f00::").packed, 48, False)
    frame = struct.pack("!BBH", 1, 1, 4 + len(msgs)) + msgs
    buf = bytearray(frame + frame[:3])
    frames = list(split_frames(buf))
    assert buf == bytearray(frame[:3])
    assert [(v, t) for v, t, _ in frames] == [(1, 1)]
    routes = [decode_route(m) for t, m in netlink_messages(frames[0][2]) if t == RTM_NEWROUTE]
    assert [(r.prefix, r.protocol, r.table, r.is_add) for r in routes] == [
        ("198.51.100.0/24", RTPROT_BGP, 254, True),
        ("2001:db8:f00::/48", RTPROT_BGP, 254, True),
    ]


def test_route_monitor_lines_and_prefix_generator() -> None:
    assert parse_route_event("[2026-11-21T22:51:29.497014] Deleted 2001:db8:1000::/48 nhid 9 "
                             "via fe80::1 dev b0 proto bgp metric 20 pref medium") == (
        True, "2001:db8:1000::/48")
    assert parse_route_event("198.18.0.0/26 nhid 15 via 192.0.2.1 dev b0 proto bgp") == (
        False, "198.18.0.0/26")
    assert parse_route_event("Deleted blackhole 198.51.100.0/28 proto static") == (
        True, "198.51.100.0/28")
    assert parse_route_event("192.0.2.5 via 192.0.2.1 dev b0") == (False, "192.0.2.5/32")
    assert prefixes("198.18.0.0/15", 3, 26) == ["198.18.0.0/26", "198.18.0.64/26",
                                                 "198.18.0.128/26"]
    with pytest.raises(ValueError):
        prefixes("198.18.0.0/15", 513, 24)


def test_missing_tool_skips_or_fails_by_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("CI", "LINERATE_REQUIRE_BIN"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(pytest.skip.Exception, match="no frobnicator"):
        skip_or_fail("no frobnicator")
    for var in ("CI", "LINERATE_REQUIRE_BIN"):
        monkeypatch.setenv(var, "1")
        with pytest.raises(pytest.fail.Exception, match="no frobnicator.*is a failure"):
            skip_or_fail("no frobnicator")
        monkeypatch.delenv(var)


# -- installation ------------------------------------------------------------------------------


def test_packages_installed_fast_and_listed_in_test_sh(testbed_session: None) -> None:
    """ensure_packages() is a no-op (one dpkg-query) when everything is installed, and
    scripts/test.sh installs the same packages for CI."""
    ensure_packages()
    t = time.monotonic()
    assert ensure_packages() == []
    assert time.monotonic() - t < 2.0
    assert missing_packages(list(PACKAGES)) == []
    script = (REPO / "scripts/test.sh").read_text().replace("\\\n", " ")
    apt_line = next(line for line in script.splitlines() if line.startswith("apt_install "))
    for pkg in PACKAGES:
        if pkg != "util-linux":  # essential: always there
            assert pkg in apt_line.split(), f"{pkg} missing from test.sh's apt_install"


# -- (1) namespaces, veth, cleanup ------------------------------------------------------------


def test_veth_ping_capture_and_cleanup(tmp_path: Path, testbed_session: None) -> None:
    """Two namespaces joined by a 2-queue veth ping each other over IPv4 and IPv6 (seen by a
    tshark capture in B); after the test bed closes, even on an exception, the namespaces, the
    processes started in them, the veth end left in the root namespace and the run directory
    are all gone."""
    with pytest.raises(RuntimeError, match="test body failed"):
        with Testbed(tmp_path) as tb:
            a, b = two_namespaces(tb)
            names = [a.name, b.name]
            for ns in (a, b):
                assert ns.name.startswith(f"lrt-{os.getpid()}-")
            assert set(names) <= set(list_netns())
            # nsenter (for XDP loaders, PEERS.md) enters the same namespace as ip netns exec.
            assert "a0" in a.run(["ip", "-br", "link"], nsenter=True).stdout
            assert "b0" not in a.run(["ip", "-br", "link"]).stdout
            link = a.ip_json("-d", "link", "show", "a0")[0]
            assert (link["num_tx_queues"], link["num_rx_queues"]) == (2, 2)
            dut = tb.veth(a, "a1", None, f"lrt{os.getpid() % 100000}d")
            assert subprocess.run(["ip", "link", "show", dut.b],
                                  capture_output=True).returncode == 0

            cap = tb.capture(b, "b0", bpf="icmp or icmp6")
            assert a.ping(B4, count=2) and a.ping(B6, count=2)
            assert b.ping(A4) and b.ping(A6)
            assert not a.ping("198.51.100.1", timeout=1)  # no route: the namespace is isolated
            cap.stop()
            v4 = {tuple(r) for r in cap.fields(["ip.src", "ip.dst"], "icmp.type == 8")}
            v6 = {tuple(r) for r in cap.fields(["ipv6.src", "ipv6.dst"], "icmpv6.type == 128")}
            assert (A4, B4) in v4 and (B4, A4) in v4
            assert (A6, B6) in v6 and (B6, A6) in v6

            sleeper = a.popen(["sleep", "300"], name="sleeper")
            # `ip netns exec` enters the namespace after the process exists: a moment later.
            wait_until(lambda: sleeper.pid in a.pids(), 5, what="the sleeper in the namespace")
            # A child that is not the test bed's own Popen: killed by `ip netns pids` anyway.
            a.run("sleep 300 >/dev/null 2>&1 &")
            assert len(a.pids()) == 2
            root = tb.root
            raise RuntimeError("test body failed")
    assert not set(names) & set(list_netns())
    assert not sleeper.running
    assert subprocess.run(["ip", "link", "show", dut.b], capture_output=True).returncode != 0
    assert not root.exists()
    assert (tmp_path / "testbed" / "pcap" / "b-b0.pcap").is_file()  # kept for post-mortems


def test_sweeper_removes_only_dead_runs(testbed_session: None) -> None:
    """sweep_stale() deletes an `lrt-<pid>-*` namespace (killing what runs in it) and run
    directory whose pid is dead, and leaves those of a live pid alone. A killed run whose
    process is still a zombie (not reaped yet) counts as dead."""
    dead = subprocess.Popen(["true"])
    wait_until(lambda: not _pid_alive(dead.pid), 5, what="a zombie counts as dead")
    dead.wait()
    stale, live = f"lrt-{dead.pid}-1-stale", f"lrt-{os.getpid()}-999999-live"
    stale_dir = Path(f"/tmp/lrt-{dead.pid}-sweeptest")
    try:
        for n in (stale, live):
            subprocess.run(["ip", "netns", "add", n], check=True)
        stale_dir.mkdir()
        orphan = subprocess.Popen(["ip", "netns", "exec", stale, "sleep", "300"],
                                  start_new_session=True)
        time.sleep(0.1)
        removed = sweep_stale()
        assert stale in removed and str(stale_dir) in removed
        assert live not in removed
        names = list_netns()
        assert stale not in names and live in names
        assert not stale_dir.exists()
        assert orphan.wait(timeout=5) == -signal.SIGKILL
    finally:
        for n in (stale, live):
            subprocess.run(["ip", "netns", "del", n], capture_output=True)
        if stale_dir.exists():
            stale_dir.rmdir()


# -- (2) BIRD -> FRR over eBGP -----------------------------------------------------------------


def test_bird_feeds_frr_over_ebgp_v4_and_v6(testbed: Testbed, frr_tools, bird_tools) -> None:
    """BIRD in A announces 1,000 IPv4 and 1,000 IPv6 prefixes over an IPv4 and an IPv6 eBGP
    session; FRR in B has all of them in bgpd's table and zebra's RIB, and zebra installs them
    in B's kernel. Withdrawing 100 of each (BIRD reconfigured) removes exactly those from B."""
    a, b = two_namespaces(testbed)
    cfg = bird_feed(1000, 1000)
    bird = testbed.bird(a, cfg)
    frr = testbed.frr(b, {"bgpd": frr_bgp()})
    frr.wait_bgp_established(A4)
    frr.wait_bgp_established(A6)
    bird.wait_established()
    want4, want6 = set(cfg.routes4), set(cfg.routes6)
    assert len(want4) == len(want6) == 1000

    frr.wait_routes(1000, family=4)
    frr.wait_routes(1000, family=6)
    assert frr.bgp_prefixes(4) == want4
    assert frr.bgp_prefixes(6) == want6
    assert frr.rib_prefixes(4) == want4
    assert frr.rib_prefixes(6) == want6
    assert b.route_prefixes(4, proto="bgp") == want4
    assert b.route_prefixes(6, proto="bgp") == want6
    # The IPv4 routes point at A's address on the link, the IPv6 ones at its link-local.
    r4 = b.routes(4, proto="bgp")
    assert {r.get("gateway") for r in r4} == {A4}
    assert all(ipaddress.ip_address(r["gateway"]).is_link_local for r in b.routes(6, proto="bgp"))

    gone4, gone6 = set(cfg.routes4[:100]), set(cfg.routes6[:100])
    bird.set_routes(routes4=cfg.routes4[100:], routes6=cfg.routes6[100:])
    frr.wait_routes(900, family=4)
    frr.wait_routes(900, family=6)
    assert frr.rib_prefixes(4) == want4 - gone4
    assert frr.rib_prefixes(6) == want6 - gone6
    kernel4, kernel6 = b.route_prefixes(4, proto="bgp"), b.route_prefixes(6, proto="bgp")
    assert kernel4 == want4 - gone4 and not kernel4 & gone4
    assert kernel6 == want6 - gone6 and not kernel6 & gone6


# -- (3) OSPF and OSPFv3 -----------------------------------------------------------------------


def test_ospf_and_ospf6_full_and_externals(testbed: Testbed, frr_tools) -> None:
    """FRR ospfd and ospf6d in A (redistributing a few static routes) and in B, over a
    point-to-point veth, reach Full, and B learns A's externals into its RIB and kernel."""
    a, b = two_namespaces(testbed)
    ext4 = ["198.51.100.0/28", "198.51.100.16/28", "203.0.113.0/24"]
    ext6 = ["2001:db8:f00::/48", "2001:db8:f01::/48"]
    testbed.frr(a, {
        "staticd": static_config(ext4 + ext6),
        "ospfd": ospf_config(A4, ["a0"], redistribute_static=True),
        "ospf6d": ospf6_config(A4, ["a0"], redistribute_static=True),
    })
    fb = testbed.frr(b, {"ospfd": ospf_config(B4, ["b0"]), "ospf6d": ospf6_config(B4, ["b0"])})

    n4 = fb.wait_ospf_full(neighbor=A4)
    n6 = fb.wait_ospf_full(neighbor=A4, v6=True)
    assert [n["neighborId"] for n in n4] == [A4]
    assert [n["neighborId"] for n in n6] == [A4]
    # The link's own prefix is in OSPF too, but connected wins in the FIB: count externals.
    fb.wait_routes(len(ext4), family=4, protocol="ospf")
    fb.wait_routes(len(ext6), family=6, protocol="ospf6")
    assert set(ext4) <= fb.rib_prefixes(4, protocol="ospf")
    assert set(ext6) <= fb.rib_prefixes(6, protocol="ospf6")
    assert b.route_prefixes(4, proto="ospf") == set(ext4)
    assert b.route_prefixes(6, proto="ospf") == set(ext6)
    ext_lsas = fb.show_json("show ip ospf database external json")
    assert ext_lsas, "B has no AS-external LSAs"
    routes = b.routes(4, proto="ospf")
    assert {r.get("gateway") for r in routes} == {A4}


# -- (4) FPM -----------------------------------------------------------------------------------


def test_zebra_fpm_frames_carry_bgp_routes(testbed: Testbed, frr_tools, bird_tools) -> None:
    """zebra in B, with dplane_fpm_nl, connects to a Python listener on 127.0.0.1:2620 in B;
    every frame is FPM version 1 type 1 (netlink), and the RTM_NEWROUTE messages of protocol
    BGP carry exactly the prefixes BIRD announced."""
    a, b = two_namespaces(testbed)
    cfg = bird_feed(300, 300)
    want = set(cfg.routes4) | set(cfg.routes6)
    fpm = testbed.add(FpmListener(b))  # before zebra: it connects at start
    testbed.bird(a, cfg)
    frr = testbed.frr(b, {"zebra": zebra_config(fpm=True), "bgpd": frr_bgp()}, fpm=True)
    frr.wait_bgp_established(A4)
    frr.wait_bgp_established(A6)
    fpm.wait_for(lambda f: want <= f.prefixes(), timeout=30, what="every BGP prefix over FPM")
    time.sleep(0.5)  # anything after the last wanted prefix

    assert fpm.connections == 1 and not fpm.errors
    assert fpm.frame_kinds() == {(FPM_VERSION, FPM_MSG_NETLINK)}
    assert fpm.prefixes(protocol=RTPROT_BGP) == want
    assert fpm.prefixes(protocol=RTPROT_BGP, family=4) == set(cfg.routes4)
    # Next-hop groups are on by default: RTM_NEWNEXTHOP messages come before the routes.
    assert fpm.msg_types.get(104, 0) >= 1
    assert "Connection errors: 0" in frr.vtysh("show fpm counters", daemon="zebra")


# -- (5) graceful restart ----------------------------------------------------------------------


def test_frr_restart_keeps_bird_routes_in_kernel(testbed: Testbed, frr_tools,
                                                 bird_tools) -> None:
    """With graceful restart on both sides (bgpd `bgp graceful-restart`, BIRD `graceful
    restart on;`) and zebra run with `-r -K 60`, restarting the whole FRR instance in B keeps
    BIRD's routes in B's kernel throughout: no route is deleted (an IPv6 replace, reported as
    delete + add of the same prefix, is not a deletion), every route is re-installed by the
    new zebra, and bgpd learns them all again."""
    a, b = two_namespaces(testbed)
    cfg = bird_feed(500, 500, graceful_restart=True)
    want4, want6 = set(cfg.routes4), set(cfg.routes6)
    bird = testbed.bird(a, cfg)
    frr = testbed.frr(b, {"bgpd": frr_bgp(graceful_restart=True)}, graceful_restart=60)
    frr.wait_bgp_established(A4)
    frr.wait_bgp_established(A6)
    frr.wait_routes(500, family=4)
    frr.wait_routes(500, family=6)
    assert "Graceful restart" in bird.birdc("show protocols all to_b4")
    assert b.route_prefixes(4, proto="bgp") == want4

    mon = testbed.route_monitor(b)
    frr.stop()
    assert not frr.running
    assert b.route_prefixes(4, proto="bgp") == want4, "routes lost when FRR stopped"
    assert b.route_prefixes(6, proto="bgp") == want6, "routes lost when FRR stopped"
    frr.start()
    frr.wait_bgp_established(A4)
    frr.wait_bgp_established(A6)

    # zebra -K reads the kernel's routes back as stale ones, so its RIB count is no sign of
    # bgpd having re-learned them: wait for the kernel to see every route installed again.
    def reinstalled() -> bool:
        return mon.added(want4 | want6) == want4 | want6

    wait_until(reinstalled, 30, what="every route re-installed by the restarted zebra",
               diagnostics=frr.diagnostics)
    mon.stop()
    assert mon.removals(want4 | want6) == []
    assert frr.bgp_prefixes(4) == want4 and frr.bgp_prefixes(6) == want6
    assert b.route_prefixes(4, proto="bgp") == want4
    assert b.route_prefixes(6, proto="bgp") == want6


def test_frr_restart_without_graceful_restart_loses_routes(testbed: Testbed, frr_tools,
                                                           bird_tools) -> None:
    """The control for the test above: without graceful restart (zebra without -r/-K, daemons
    stopped in the usual order) a restart deletes BIRD's routes from B's kernel (bgpd withdraws
    them all on SIGTERM), and they come back once bgpd has re-learned them. So the route
    monitor does see removals when there are any."""
    a, b = two_namespaces(testbed)
    cfg = bird_feed(100, 100)
    want = set(cfg.routes4) | set(cfg.routes6)
    testbed.bird(a, cfg)
    frr = testbed.frr(b, {"bgpd": frr_bgp()})
    frr.wait_routes(100, family=4)
    frr.wait_routes(100, family=6)
    mon = testbed.route_monitor(b)
    frr.restart()
    frr.wait_bgp_established(A4)
    frr.wait_bgp_established(A6)
    frr.wait_routes(100, family=4)
    frr.wait_routes(100, family=6)
    wait_until(lambda: b.route_prefixes(4, proto="bgp") | b.route_prefixes(6, proto="bgp")
               == want, 30, what="routes back in the kernel")
    mon.stop()
    assert set(mon.removals(want)) == want


# -- scale (slow) ------------------------------------------------------------------------------


@pytest.mark.slow
def test_bird_scale_100k_routes_to_kernel_and_fpm(testbed: Testbed, frr_tools,
                                                  bird_tools) -> None:
    """100,000 IPv4 /32s and 20,000 IPv6 /56s from BIRD reach FRR's bgpd, B's kernel and the
    FPM listener (timings printed; see the README)."""
    a, b = two_namespaces(testbed)
    cfg = BirdConfig(
        A4, AS_A,
        sessions=[BgpSession(A4, B4, AS_B, name="to_b4"), BgpSession(A6, B6, AS_B, name="to_b6")],
        routes4=prefixes("198.18.0.0/15", 100_000, 32),
        routes6=prefixes("2001:db8:1000::/36", 20_000, 56),
    )
    want = set(cfg.routes4) | set(cfg.routes6)
    fpm = testbed.add(FpmListener(b))
    t0 = time.monotonic()
    testbed.bird(a, cfg)
    frr = testbed.frr(b, {"zebra": zebra_config(fpm=True), "bgpd": frr_bgp()}, fpm=True)
    frr.wait_bgp_established(A4, timeout=60)
    t_est = time.monotonic() - t0
    frr.wait_routes(100_000, family=4, timeout=180)
    frr.wait_routes(20_000, family=6, timeout=180)
    t_fib = time.monotonic() - t0
    fpm.wait_for(lambda f: want <= f.prefixes(), timeout=180, what="every prefix over FPM")
    t_fpm = time.monotonic() - t0
    assert len(b.routes(4, proto="bgp")) == 100_000
    assert len(b.routes(6, proto="bgp")) == 20_000
    print(f"\nscale: established {t_est:.1f} s, 120k routes in B's kernel {t_fib:.1f} s, "
          f"all over FPM {t_fpm:.1f} s")
