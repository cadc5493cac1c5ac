"""Interfaces added and removed by config commit while FRR runs on the TAP twins.

Linerate runs on real ports (AF_PACKET on veths) with a TAP twin per interface and FRR ospfd
beside it. A commit adds an interface and a VLAN sub-interface on a third port: their twins
appear with the interfaces' MAC and addresses, OSPF comes up over both with a third router,
and the routes it learns reach Linerate's FIB over FPM and carry traffic. (The third router's
VLAN is a user-space shim: this kernel has no 802.1Q devices.) A second commit
changes the sub-interface in place (MAC, address: its twin follows), and a third
removes them: the twins go, the far router's adjacencies fall, the routes are withdrawn. All
the while a stream between the two other ports loses nothing.
"""

from __future__ import annotations

import time

import pytest

from testbed import frr as frrmod
from testbed.netns import wait_until
from testbed.vlan import VlanShim
from test_real_ports import Router, UdpStream, topology

pytestmark = pytest.mark.usefixtures("testbed_session")

P2_MAC = "02:00:00:00:0c:01"
P27_MAC = "02:00:00:00:0c:07"
P27_MAC2 = "02:00:00:00:0d:07"

NEW_INTERFACES = f"""\
  - {{ name: p2, port: p2, mac: "{P2_MAC}", ipv4: [203.0.113.1/24] }}
  - {{ name: p2.7, port: p2, vlan: 7, mac: "{P27_MAC}", ipv4: [10.7.0.1/24] }}
"""


def link(ns, dev: str) -> dict | None:
    """`ip -j addr show dev` in `ns`, or None if there is no such device."""
    import json
    r = ns.ip("-j", "addr", "show", "dev", dev, check=False)
    if r.returncode != 0:
        return None
    # A device going away as it is asked about is listed as nothing at all.
    rows = json.loads(r.stdout or "[]")
    return rows[0] if rows else None


@pytest.mark.usefixtures("frr_tools")
def test_an_interface_and_a_vlan_sub_interface_come_and_go_by_commit(
        linerate_bin, testbed, tmp_path):
    dut, h1, h2, cfg = topology(testbed)
    h3 = testbed.netns("h3")
    testbed.veth(h3, "eth0", dut, "d2")
    dut.sysctl({"net.ipv6.conf.d2.disable_ipv6": 1})
    dut.up("d2")
    h3.addr("eth0", "203.0.113.2/24")
    # h3's VLAN 7 on eth0: the kernel here has no 802.1Q devices, so a shim tags and untags
    # between eth0 and a veth whose other end (v7) holds h3's address on the VLAN.
    h3.ip("link", "add", "v7", "type", "veth", "peer", "name", "v7-shim")
    h3.ip("link", "set", "v7-shim", "up")
    h3.addr("v7", "10.7.0.2/24")
    testbed.add(VlanShim(h3, "eth0", "v7-shim", 7, tmp_path / "vlan-shim.log")).start()
    h3.addr("lo", "10.9.3.1/32")
    h3.set_forwarding(True)
    h2.addr("lo", "10.0.0.1/32")
    # Port p2 is there from the start, with no interface on it yet; the stream's destination
    # is a static route.
    cfg = cfg.replace("interfaces:\n",
                      "  - { name: p2, driver: af_packet, device: d2 }\ninterfaces:\n")
    cfg = cfg.replace("control-plane:\n",
                      "routes:\n  - { prefix: 10.0.0.0/24, via: 198.51.100.2 }\ncontrol-plane:\n")
    r = Router(linerate_bin, dut, tmp_path / "dut", cfg)
    try:
        dut_frr = testbed.frr(dut, {
            "zebra": frrmod.zebra_config(fpm=True),
            "ospfd": frrmod.ospf_config("192.0.2.1", ["lr-p2", "lr-p2.7"],
                                        extra="router ospf\n redistribute connected\n!"),
        }, fpm=True)
        peer = testbed.frr(h3, {
            "zebra": frrmod.zebra_config(),
            "ospfd": frrmod.ospf_config("203.0.113.2", ["eth0", "v7"],
                                        extra="router ospf\n redistribute connected\n!"),
        })
        assert link(dut, "lr-p2") is None
        assert h1.ping("10.0.0.1", count=1, timeout=3), r.log.read_text()

        # A stream h1 -> h2 through both commits.
        stream = UdpStream(h1, h2, "10.0.0.1", 1000, 50, tmp_path)
        time.sleep(1.0)

        # Commit 1: the interface and the sub-interface.
        added = r.dir / "added.yaml"
        added.write_text(cfg.replace("routes:\n", NEW_INTERFACES + "routes:\n"))
        out = r.json("config", "apply", str(added))
        assert out["changed"] and out["commit"], out
        assert not out.get("warnings"), out
        for dev, mac, addr in (("lr-p2", P2_MAC, "203.0.113.1"),
                               ("lr-p2.7", P27_MAC, "10.7.0.1")):
            ln = wait_until(lambda: link(dut, dev), 5, what=f"twin {dev}")
            assert ln["address"] == mac, ln
            assert addr in [a["local"] for a in ln["addr_info"]], ln
            assert "UP" in ln["flags"], ln
        # FRR sees them as it would a real box's new interfaces: with their addresses.
        wait_until(lambda: all(a in dut_frr.vtysh("show interface brief")
                               for a in ("203.0.113.1/24", "10.7.0.1/24")), 10,
                   what="zebra knowing the new twins' addresses")
        try:
            peer.wait_ospf_full(2, timeout=60)
        except TimeoutError:
            # What Linerate's side saw: FRR's own view of the twins, and the punt path's.
            print(dut_frr.diagnostics())
            print(dut_frr.vtysh("show interface brief", "show ip ospf neighbor", check=False))
            print(r.cli("show", "punt"))
            raise
        wait_until(lambda: r.json("show", "ip", "route", "10.9.3.1/32").get("routes"), 60,
                   what="10.9.3.1/32 (OSPF, over the new interface) in Linerate's FIB")
        assert h1.ping("10.9.3.1", count=3), r.log.read_text()
        assert h1.ping("10.7.0.2", count=3), "across the VLAN sub-interface"
        taps = {t["interface"]: t for t in r.json("show", "punt")["taps"]}
        assert {"p0", "p1", "p2", "p2.7"} <= set(taps), taps
        assert taps["p2.7"]["to_kernel"] > 0 and taps["p2.7"]["from_kernel"] > 0, taps

        # Commit 2: the sub-interface changes in place (another MAC and address): its twin
        # follows without being made again, and FRR sees the new address.
        ifindex = link(dut, "lr-p2.7")["ifindex"]
        changed = r.dir / "changed.yaml"
        changed.write_text(added.read_text().replace(P27_MAC, P27_MAC2)
                           .replace("10.7.0.1/24", "10.7.0.5/24"))
        out = r.json("config", "apply", str(changed))
        assert out["changed"] and out["commit"] and not out.get("warnings"), out
        ln = link(dut, "lr-p2.7")
        assert ln["ifindex"] == ifindex, "the same device, changed in place"
        assert ln["address"] == P27_MAC2, ln
        assert [a["local"] for a in ln["addr_info"] if a["family"] == "inet"] == ["10.7.0.5"], ln
        wait_until(lambda: "10.7.0.5/24" in dut_frr.vtysh("show interface brief"), 10,
                   what="zebra seeing the changed address")
        # h3 has the old MAC in its ARP cache for a while: a ping from it re-resolves on failure.
        wait_until(lambda: h3.ping("10.7.0.5", count=1, timeout=1), 20,
                   what="h3 reaching the sub-interface's new address (its twin answers)")

        # Commit 3: both go again (the stream still running).
        assert stream.tx.running
        out = r.json("config", "apply", str(r.config))
        assert out["changed"] and out["commit"], out
        wait_until(lambda: link(dut, "lr-p2") is None and link(dut, "lr-p2.7") is None, 5,
                   what="the twins removed")
        wait_until(lambda: "lr-p2" not in dut_frr.vtysh("show interface brief"), 10,
                   what="zebra forgetting the removed twins")
        wait_until(lambda: not [n for n in peer.ospf_neighbors() if n["state"] == "Full"], 30,
                   what="the far router's adjacencies down")
        wait_until(lambda: not r.json("show", "ip", "route", "10.9.3.1/32").get("routes"), 30,
                   what="10.9.3.1/32 withdrawn")
        assert not h1.ping("10.9.3.1", count=1, timeout=1)
        taps = {t["interface"] for t in r.json("show", "punt")["taps"]}
        assert taps == {"p0", "p1"}, taps

        sent, got = stream.result(60)
        assert sent >= 40_000
        assert got == sent, f"lost {sent - got} of {sent} frames across the two commits"
    finally:
        r.stop()
