"""A bridge and the L3 path meeting at a routed interface (BVI): integrated routing and bridging.

h1 and h2 are untagged members (p1, p2) of bridge `lan`, whose routed interface `bvi10` holds
10.10.0.1/24 and 2001:db8:10::1/64 and is their gateway; h3 is on a routed port (p3, 10.20.0.0/24).
The hosts' kernels speak ARP, ND and ICMP; the router answers ARP and ND for the BVI from its
neighbour manager, and its TAP twin of the BVI lets the kernel answer pings. What is checked:

- h1 and h2 reach each other switched (the bridge still bridges) and the BVI itself;
- h1 and h2 reach h3 routed through the BVI, IPv4 and IPv6, and h3 reaches them back: the
  router resolves h1's address by flooding its ARP request and ND solicitation into the bridge;
- what h1 receives from h3 carries the BVI's MAC and a decremented TTL (tshark), nothing
  malformed;
- `show interfaces`, `show bridge` and `show mac address-table` show the BVI as what it is.
"""

from __future__ import annotations

import pytest

from test_real_ports import Router
from testbed.capture import read_fields

pytestmark = pytest.mark.usefixtures("testbed_session")

BVI_MAC = "02:00:00:00:0b:10"
HOSTS = {"h1": ("10.10.0.11", "2001:db8:10::11"), "h2": ("10.10.0.12", "2001:db8:10::12"),
         "h3": ("10.20.0.2", "2001:db8:20::2")}

CONFIG = f"""\
router: {{ workers: 1 }}
ports:
  - {{ name: p1, driver: af_packet, device: d1 }}
  - {{ name: p2, driver: af_packet, device: d2 }}
  - {{ name: p3, driver: af_packet, device: d3 }}
interfaces:
  - {{ name: p1, port: p1, mac: "02:00:00:00:0c:01" }}
  - {{ name: p2, port: p2, mac: "02:00:00:00:0c:02" }}
  - {{ name: bvi10, bridge: lan, mac: "{BVI_MAC}", ipv4: [10.10.0.1/24], ipv6: ["2001:db8:10::1/64"] }}
  - {{ name: p3, port: p3, mac: "02:00:00:00:0c:03", ipv4: [10.20.0.1/24], ipv6: ["2001:db8:20::1/64"] }}
bridges:
  - {{ name: lan, id: 10, members: [p1, p2] }}
control-plane:
  taps: true
  neighbor: {{ reachable-time: 30, retransmit-ms: 200, retries: 5, hold: 8 }}
"""


def topology(testbed):
    dut = testbed.netns("dut")
    dut.up("lo")
    hosts = {}
    for i, name in enumerate(HOSTS, start=1):
        h = testbed.netns(name)
        testbed.veth(h, "eth0", dut, f"d{i}")
        dut.sysctl({f"net.ipv6.conf.d{i}.disable_ipv6": 1})
        dut.up(f"d{i}")
        v4, v6 = HOSTS[name]
        h.addr("eth0", f"{v4}/24", f"{v6}/64")
        gw = ("10.20.0.1", "2001:db8:20::1") if name == "h3" else ("10.10.0.1", "2001:db8:10::1")
        h.route("default", "via", gw[0])
        h.ip("-6", "route", "add", "default", "via", gw[1])
        hosts[name] = h
    return dut, hosts


def test_hosts_of_a_bridge_route_through_its_bvi(linerate_bin, testbed, tmp_path):
    dut, hosts = topology(testbed)
    cap = testbed.capture(hosts["h1"], "eth0", "irb-h1.pcap")
    r = Router(linerate_bin, dut, tmp_path / "dut", CONFIG)
    try:
        h1, h2, h3 = hosts["h1"], hosts["h2"], hosts["h3"]
        # Switched, and the gateway itself (its kernel twin answers the echo).
        assert h1.ping(HOSTS["h2"][0], count=2, timeout=3), r.log.read_text()
        assert h1.ping("10.10.0.1", count=2, timeout=3), r.log.read_text()
        # From the routed side first: the router must find h1 by ARP into the bridge.
        assert h3.ping(HOSTS["h1"][0], count=3, timeout=5), r.log.read_text()
        for name in ("h1", "h2"):
            for fam in (0, 1):
                assert hosts[name].ping(HOSTS["h3"][fam], count=2, timeout=5), (name, fam)
        assert h3.ping(HOSTS["h2"][1], count=2, timeout=5), r.log.read_text()

        ifs = {i["name"]: i for i in r.json("show", "interfaces")}
        bvi = ifs["bvi10"]
        assert (bvi["port"], bvi["bvi"], bvi["bridge"]) == ("-", "lan", None), bvi
        assert bvi["admin_up"] and bvi["oper_up"], bvi
        assert "routes bridge lan" in r.cli("show", "interfaces")
        (b,) = r.json("show", "bridge")
        assert b["routed_interface"] == "bvi10", b
        assert "routed interface: bvi10" in r.cli("show", "bridge")
        macs = {e["mac"]: e for e in r.json("show", "mac", "address-table")["entries"]}
        assert macs[BVI_MAC]["interface"] == "bvi10" and macs[BVI_MAC]["static"], macs
        h1_mac = h1.ip_json("link", "show", "eth0")[0]["address"]
        assert macs[h1_mac]["interface"] == "p1", macs
        neighbors = {(n["interface"], n["ip"]) for n in r.json("show", "neighbors")}
        assert ("bvi10", HOSTS["h1"][0]) in neighbors and ("bvi10", HOSTS["h1"][1]) in neighbors
        taps = {t["interface"]: t for t in r.json("show", "punt")["taps"]}
        assert taps["bvi10"]["to_kernel"] > 0 and taps["bvi10"]["from_kernel"] > 0, taps
    finally:
        r.stop()
    cap.stop()
    # What h1 got from h3 was routed by the BVI: its MAC, TTL 63 (h3's 64, once decremented).
    rows = read_fields(cap.pcap, ["eth.src", "ip.ttl"],
                       f"icmp.type == 0 && ip.src == {HOSTS['h3'][0]}")
    assert rows and all(row == [BVI_MAC, "63"] for row in rows), rows
    rows = read_fields(cap.pcap, ["eth.src", "ipv6.hlim"],
                       f"icmpv6.type == 129 && ipv6.src == {HOSTS['h3'][1]}")
    assert rows and all(row == [BVI_MAC, "63"] for row in rows), rows
    # The router's ARP and ND answers for the BVI, from its MAC.
    arp = read_fields(cap.pcap, ["arp.src.hw_mac"], "arp.opcode == 2 && arp.src.proto_ipv4 == 10.10.0.1")
    assert arp and all(row == [BVI_MAC] for row in arp), arp
    bad = read_fields(cap.pcap, ["frame.number"], "_ws.malformed || _ws.expert.severity >= warning")
    assert bad == [], bad
