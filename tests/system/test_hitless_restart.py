"""Hitless restart: a new `linerate daemon --take-over` replaces the running one while traffic
flows, and not one frame is lost (issue: logical routers as processes, item 3; XR-2A's process
restart).

The router is in a namespace of its own with AF_PACKET ports on veths to two hosts and TAP
twins. What is checked: a counted UDP stream through the router across the hand-over arrives
whole; the old process exits 0 after the new one forwards; the twins are the same kernel
devices (same ifindex: FRR never sees an interface go); the API's routes and the learned
neighbours are in the new process without a new resolution; with FRR over FPM, BGP's routes are
in the new process's FIB from its first frame, the BGP session never drops, and zebra's
reconnection changes nothing.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from testbed import bird as birdmod
from testbed import frr as frrmod
from testbed.netns import wait_until
from testbed.routed import Router, UdpStream, topology

pytestmark = pytest.mark.usefixtures("testbed_session")


def take_over(r: Router, bin_: Path, log: Path):
    """Starts the process that takes over `r`'s router (same config, state and socket); waits
    for the old one to exit and the new one to answer; returns the new process."""
    old = r.proc
    new = r.ns.popen(
        [str(bin_), "daemon", "--config", str(r.config), "--state", str(r.dir / "state"),
         "--socket", str(r.sock), "--take-over"],
        log=log, name="linerate-new")
    wait_until(lambda: not old.running or not new.running, 30, what="the old process to exit")
    assert new.running, log.read_text() + r.log.read_text()
    assert old.popen.wait(5) == 0, r.log.read_text()
    r.proc, r.log = new, log
    wait_until(lambda: _answers(r), 20, what="the new process's API")
    return new


def _answers(r: Router) -> bool:
    try:
        r.json("show", "interfaces")
        return True
    except AssertionError:
        return False


def ifindexes(ns) -> dict[str, int]:
    return {l["ifname"]: l["ifindex"] for l in ns.ip_json("link", "show")
            if l["ifname"].startswith("lr-")}


def test_take_over_loses_no_frame_and_keeps_twins_routes_and_neighbours(
        linerate_bin, testbed, tmp_path):
    dut, h1, h2, cfg = topology(testbed)
    h2.addr("lo", "10.9.0.1/32")
    r = Router(linerate_bin, dut, tmp_path / "dut", cfg)
    try:
        r.cli("route", "add", "10.9.0.0/24", "via", "198.51.100.2")
        assert h1.ping("10.9.0.1", count=2, timeout=3), r.log.read_text()
        twins = ifindexes(dut)
        assert set(twins) == {"lr-p0", "lr-p1"}
        learned = {(n["interface"], n["ip"]) for n in r.json("show", "neighbors")
                   if n["state"] != "static"}
        assert ("p1", "198.51.100.2") in learned
        old_pid = r.proc.pid
        # 6 s of 5,000 frames/s through the API's route; the new process takes over 1.5 s in.
        stream = UdpStream(h1, h2, "10.9.0.1", 5000, 6, tmp_path)
        time.sleep(1.5)
        new = take_over(r, linerate_bin, tmp_path / "dut" / "daemon-new.log")
        sent, got = stream.result(30)
        assert sent >= 25_000
        assert got == sent, f"lost {sent - got} of {sent} frames across the hand-over"
        assert new.pid != old_pid
        log = r.log.read_text()
        assert "took over the data plane" in log, log
        # The same kernel devices, the API's route, the learned neighbours (not re-resolved:
        # the punt plane's resolution counters of the new process saw no request go out).
        assert ifindexes(dut) == twins
        assert r.json("show", "ip", "route", "10.9.0.0/24")["routes"], log
        now = {(n["interface"], n["ip"]) for n in r.json("show", "neighbors")}
        assert learned <= now, (learned, now)
        assert r.json("show", "punt")["neighbor_stats"]["requests_sent"] == 0
        # The new process ends as any does: SIGTERM, exit 0, its twins gone with it.
        assert new.stop() == 0, log
        assert not ifindexes(dut)
    finally:
        r.stop()


def test_a_second_process_refused_or_gone_changes_nothing(linerate_bin, testbed, tmp_path):
    """Without a router to take over, --take-over fails and says why; a take-over of a router
    with a service that is not handed over yet (AF_XDP ports here) is refused by the running
    router, which forwards on."""
    dut, h1, h2, cfg = topology(testbed)
    lone = dut.run([str(linerate_bin), "daemon", "--config", "/dev/null", "--no-state",
                    "--socket", str(tmp_path / "none.sock"), "--take-over"], check=False)
    assert lone.returncode != 0 and "is a linerate daemon running" in lone.stderr, lone.stderr
    r = Router(linerate_bin, dut, tmp_path / "dut", cfg.replace("af_packet", "af_xdp"))
    try:
        new = dut.run([str(linerate_bin), "daemon", "--config", str(r.config), "--state",
                       str(r.dir / "state"), "--socket", str(r.sock), "--take-over"],
                      check=False, timeout=60)
        assert new.returncode != 0 and "af_xdp" in new.stderr, new.stderr
        assert r.proc.running
        assert h1.ping("198.51.100.2", count=3, timeout=3), r.log.read_text()
    finally:
        r.stop()


@pytest.mark.usefixtures("frr_tools", "bird_tools")
def test_xr2a_process_restart_under_bgp_loses_no_frame_and_no_route(
        linerate_bin, testbed, tmp_path):
    """XR-2A's second half: the router's own process replaced under traffic through BGP routes
    (FRR + BIRD over FPM): no frame lost, every route in the new process's FIB before it
    forwards, BIRD's session up throughout, zebra's reconnection sweeps nothing."""
    dut, h1, h2, cfg = topology(testbed)
    cfg = cfg.replace("stale-time: 60", "stale-time: 10")
    h2.addr("lo", "10.0.0.1/32")
    r = Router(linerate_bin, dut, tmp_path / "dut", cfg)
    try:
        testbed.frr(dut, {
            "zebra": frrmod.zebra_config(fpm=True),
            "bgpd": frrmod.bgp_config(65001, "192.0.2.1", [("198.51.100.2", 65002)]),
        }, fpm=True)
        v4 = ["10.0.0.0/24"] + birdmod.prefixes("10.4.0.0/14", 199, 24)
        conf = birdmod.BirdConfig(
            router_id="198.51.100.2", local_as=65002,
            sessions=[birdmod.BgpSession("198.51.100.2", "198.51.100.1", 65001, name="r4")],
            routes4=v4)
        bird = testbed.bird(h2, conf)
        bird.wait_established("r4", timeout=40)
        wait_until(lambda: r.json("show", "fpm")["routes_installed"] >= 200, 60,
                   what="200 BGP routes in Linerate's FIB")
        assert h1.ping("10.0.0.1", count=1, timeout=3)
        stream = UdpStream(h1, h2, "10.0.0.1", 2000, 8, tmp_path)
        time.sleep(1.0)
        take_over(r, linerate_bin, tmp_path / "dut" / "daemon-new.log")
        # Before zebra has reconnected, every route is there: handed over, not replayed.
        st = r.json("show", "fpm")
        assert st["routes"] >= 200, st
        sent, got = stream.result(30)
        assert sent >= 15_000
        assert got == sent, f"lost {sent - got} of {sent} frames across the hand-over"
        assert bird.protocol_state("r4") == "Established", bird.birdc("show protocols")
        wait_until(lambda: r.json("show", "fpm")["connections"] >= 1, 30,
                   what="zebra reconnecting to the new process")
        wait_until(lambda: r.json("show", "fpm")["stale_sweeps"] >= 1, 30,
                   what="the stale sweep after zebra's reconnection")
        st = r.json("show", "fpm")
        assert st["swept"] == 0, st
        for p in v4:
            assert r.json("show", "ip", "route", p)["routes"], p
    finally:
        r.stop()
