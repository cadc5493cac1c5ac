"""LDP basic discovery and prefix labels between Linerate and FRR's ldpd (RFC 5036): link
hellos on the core link, the session, labels for routes both ways, and what the data plane
does with them.

    host (kernel)          pe1 (linerate daemon)                  pe2 (FRR zebra + ldpd)
      eth0 10.0.1.2 ==== edge 10.0.1.1   core 10.0.12.1 ==== core 10.0.12.2, lo 10.255.0.2
      eth1 ============= ac (a pseudowire's port)            stub 10.3.0.1 (10.77.0.0/24 and
                                                               the far PE 10.255.0.3 behind)

Linerate's routes: 10.77.0.0/24 and 10.255.0.2/32 via pe2 (ldpd labels the first, pops the
second: it is its own address), 10.88.0.0/24 via the host (outside the MPLS domain: Linerate
is the egress).

What is checked, as outcomes:
- the session comes up from link hellos alone (no targeted neighbour configured on either
  side); both list the link adjacency;
- bindings both ways: ldpd holds Linerate's labels for 10.77.0.0/24 and 10.88.0.0/24 (ordered
  control: 10.77 only once ldpd's own label came), Linerate holds ldpd's, marked in use;
- the data plane, decoded by tshark: an IP packet to 10.77.0.5 leaves the core under ldpd's
  label (a labelled route); Linerate's label for 10.77 is swapped to ldpd's; its label for
  10.88 pops towards the host; its label for 10.255.0.2 pops (ldpd's implicit null);
- ldpd's route going takes the labels with it: ldpd withdraws, Linerate withdraws its own
  (ordered control) and packets to 10.77.0.5 leave unlabelled;
- a pseudowire to the far PE 10.255.0.3 that names no next hop takes the route to it: its
  frames leave under ldpd's label for 10.255.0.3/32 over the pseudowire's label, and under
  the pseudowire's label alone once ldpd's label for it is withdrawn.
"""

from __future__ import annotations

import json
import time

import pytest

from test_real_ports import Router
from testbed import require_tools, wait_until
from testbed.capture import read_fields
from testbed.frames import mac, mpls_entry, send

pytestmark = pytest.mark.usefixtures("testbed_session")

PE1_EDGE_MAC = "02:00:00:00:21:01"
PE1_CORE_MAC = "02:00:00:00:21:02"
HOST_MAC = "02:00:00:00:21:0a"
FAR_MAC = "02:00:00:00:21:0b"

ROUTER_YAML = f"""\
router: {{ workers: 1, idle-sleep-us: 50 }}
ports:
  - {{ name: edge, driver: af_packet, device: edge }}
  - {{ name: core, driver: af_packet, device: core }}
  - {{ name: ac, driver: af_packet, device: ac }}
interfaces:
  - {{ name: edge, port: edge, mac: "{PE1_EDGE_MAC}", ipv4: [10.0.1.1/24] }}
  - {{ name: core, port: core, mac: "{PE1_CORE_MAC}", ipv4: [10.0.12.1/24] }}
  - {{ name: ac, port: ac, mac: "02:00:00:00:21:03" }}
routes:
  - {{ prefix: 10.77.0.0/24, via: 10.0.12.2 }}
  - {{ prefix: 10.255.0.2/32, via: 10.0.12.2 }}
  - {{ prefix: 10.255.0.3/32, via: 10.0.12.2 }}
  - {{ prefix: 10.88.0.0/24, via: 10.0.1.2 }}
mpls:
  interfaces: [core]
  ldp: {{ router-id: 10.0.12.1, interfaces: [core], link-hello-interval-ms: 1000,
          link-hold-time: 5, keepalive: 15 }}
  pseudowires:
    - {{ name: pw-far, interface: ac, peer: 10.255.0.3, vc-id: 7, local-label: 900,
        remote-label: 901 }}
control-plane: {{ taps: true }}
"""

LDPD_CONF = """\
frr defaults traditional
!
mpls ldp
 router-id 10.255.0.2
 !
 address-family ipv4
  discovery transport-address 10.0.12.2
  discovery hello holdtime 5
  discovery hello interval 1
  !
  interface core
  exit
  !
  interface stub
  exit
 exit-address-family
 !
exit
!
"""


def ip_packet(dst: str, ttl: int = 64) -> bytes:
    """An IPv4/UDP packet from 10.0.1.2 to `dst` (checksum correct, 26 bytes of payload)."""
    total = 20 + 8 + 26
    h = bytearray([0x45, 0, total >> 8, total & 0xFF, 0x12, 0x34, 0, 0, ttl, 17, 0, 0,
                   10, 0, 1, 2, *map(int, dst.split("."))])
    s = sum(int.from_bytes(h[i:i + 2], "big") for i in range(0, 20, 2))
    s = (s & 0xFFFF) + (s >> 16)
    s = (s & 0xFFFF) + (s >> 16)
    h[10:12] = (~s & 0xFFFF).to_bytes(2, "big")
    # Ports no dissector claims (5000 reads as TAPA and fails on zeros).
    udp = (40000).to_bytes(2, "big") + (40001).to_bytes(2, "big") + (8 + 26).to_bytes(2, "big") + b"\0\0"
    return bytes(h) + udp + bytes(26)


def ldpd_bindings(frr) -> list[dict]:
    """ldpd's `show mpls ldp binding json` as a flat list of the entries that name a prefix."""
    out: list[dict] = []

    def walk(x):
        if isinstance(x, dict):
            if "prefix" in x:
                out.append(x)
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    walk(frr.show_json("show mpls ldp binding json", daemon="ldpd"))
    return out


def test_prefix_labels_with_frr_ldpd_over_basic_discovery(linerate_bin, testbed, tmp_path):
    require_tools("tshark", "/usr/lib/frr/ldpd")
    host, pe1, pe2 = testbed.netns("ldh"), testbed.netns("ldpe1"), testbed.netns("ldpe2")
    testbed.veth(host, "eth0", pe1, "edge")
    testbed.veth(pe1, "core", pe2, "core")
    testbed.veth(host, "eth1", pe1, "ac")
    for ns, devs in ((host, ("eth0", "eth1")), (pe1, ("edge", "core", "ac")), (pe2, ("core",))):
        for d in devs:
            ns.sysctl({f"net.ipv6.conf.{d}.disable_ipv6": 1})
            ns.up(d)
    pe1.up("lo")
    host.ip("link", "set", "eth0", "address", HOST_MAC)
    host.addr("eth0", "10.0.1.2/24")
    pe2.ip("link", "set", "core", "address", FAR_MAC)
    pe2.addr("core", "10.0.12.2/24")
    pe2.up("lo")
    pe2.addr("lo", "10.255.0.2/32")
    # A route in pe2 that is not connected, so ldpd gives it a label of its own: 10.77.0.0/24
    # behind a stub link, with LDP on (ldpd maps a route whose next hops are all on interfaces
    # without LDP to implicit null: it takes itself for the egress).
    pe2.ip("link", "add", "stub", "type", "veth", "peer", "name", "stubp")
    pe2.up("stub", "stubp")
    pe2.addr("stub", "10.3.0.1/24")
    pe2.ip("route", "add", "10.77.0.0/24", "via", "10.3.0.2", "dev", "stub")
    pe2.ip("route", "add", "10.255.0.3/32", "via", "10.3.0.2", "dev", "stub")
    # zebra made to believe the kernel has MPLS: else its label manager hands ldpd no labels
    # and ldpd maps every route to implicit null (testbed/frr.py, docs/mpls.md).
    frr = testbed.frr(pe2, {"ldpd": LDPD_CONF}, fake_kernel_mpls=True)
    core_cap = testbed.capture(pe2, "core", "ldp-prefix-core.pcap")
    host_cap = testbed.capture(host, "eth0", "ldp-prefix-host.pcap")
    r = Router(linerate_bin, pe1, tmp_path / "pe1", ROUTER_YAML)
    try:
        def session_up() -> bool:
            mine = r.json("show", "mpls", "ldp", "neighbor")["neighbors"]
            theirs = frr.show_json("show mpls ldp neighbor json", daemon="ldpd")
            return (any(n["peer"] == "10.255.0.2" and n["state"] == "operational" for n in mine)
                    and "OPERATIONAL" in json.dumps(theirs).upper())

        wait_until(session_up, 30, what="the LDP session with ldpd (link hellos)")
        disc = r.json("show", "mpls", "ldp", "discovery")
        assert [(a["peer"], a["kind"]) for a in disc["adjacencies"]] == [
            ("10.255.0.2", "link core")], disc
        assert "core" in json.dumps(frr.show_json("show mpls ldp discovery json",
                                                  daemon="ldpd")), "ldpd's link adjacency"

        def mine(prefix: str) -> dict:
            rows = r.json("show", "mpls", "ldp", "binding")["prefixes"]
            return {row["from"]: row for row in rows if row["prefix"] == prefix}

        def labelled() -> bool:
            m = mine("10.77.0.0/24")
            far = mine("10.255.0.3/32").get("10.255.0.2", {})
            return ("local" in m and m.get("10.255.0.2", {}).get("in_use")
                    and far.get("in_use") and far.get("label") not in (None, 0, 3)
                    and m["10.255.0.2"]["label"] not in (0, 3)
                    and mine("10.88.0.0/24").get("local") is not None
                    and mine("10.255.0.2/32").get("10.255.0.2", {}).get("label") == 3)

        try:
            wait_until(labelled, 30, what="labels for 10.77.0.0/24 both ways")
        except TimeoutError as e:
            raise AssertionError(f"{e}\nLinerate: {r.cli('show', 'mpls', 'ldp', 'binding')}"
                                 f"ldpd: {frr.vtysh('show mpls ldp binding', daemon='ldpd')}") from e
        m77 = mine("10.77.0.0/24")
        local77, theirs77 = m77["local"]["label"], m77["10.255.0.2"]["label"]
        local88 = mine("10.88.0.0/24")["local"]["label"]
        local_pe2 = mine("10.255.0.2/32")["local"]["label"]
        assert 16000 <= min(local77, local88, local_pe2) and theirs77 not in (0, 3), m77

        # ldpd holds Linerate's labels (its binding table names Linerate's as the remote label).
        def ldpd_has(prefix: str, label: int) -> bool:
            return any(b.get("prefix") == prefix and str(label) in json.dumps(b)
                       for b in ldpd_bindings(frr))

        wait_until(lambda: ldpd_has("10.77.0.0/24", local77) and ldpd_has("10.88.0.0/24", local88),
                   15, what="ldpd holding Linerate's labels")
        # The speaker hands its labels to the router at most every 250 ms.
        wait_until(lambda: str(local77) in r.cli("show", "mpls", "forwarding-table"), 5,
                   what=f"label {local77} in the forwarding table")
        fwd = r.cli("show", "mpls", "forwarding-table")
        assert "swap" in fwd, fwd

        # The data plane: an IP packet to 10.77.0.5 (labelled route), Linerate's labels for
        # 10.77 (swap), 10.88 (pop to the host) and 10.255.0.2 (pop: ldpd's implicit null).
        send(host, "eth0", mac(PE1_EDGE_MAC) + mac(HOST_MAC) + b"\x08\x00" + ip_packet("10.77.0.5"), 10)
        core_in = mac(PE1_CORE_MAC) + mac(FAR_MAC) + b"\x88\x47"
        send(pe2, "core", core_in + mpls_entry(local77) + ip_packet("10.77.0.6"), 10)
        send(pe2, "core", core_in + mpls_entry(local88) + ip_packet("10.88.0.7"), 10)
        send(pe2, "core", core_in + mpls_entry(local_pe2) + ip_packet("10.255.0.2"), 10)
        # The pseudowire to 10.255.0.3 rides ldpd's label for it (within a second of the
        # route being labelled: the router's next publish).
        far_label = mine("10.255.0.3/32")["10.255.0.2"]["label"]

        def pw_transport() -> str:
            pws = r.json("show", "l2vpn")["pseudowires"]
            return next(p["transport"] for p in pws if p["name"] == "pw-far")

        wait_until(lambda: pw_transport() == str(far_label), 5,
                   what=f"pw-far's transport label {far_label}")
        pw = next(p for p in r.json("show", "l2vpn")["pseudowires"] if p["name"] == "pw-far")
        assert pw["state"] == "up" and pw["next_hop"].startswith("10.0.12.2"), pw
        cust = bytes.fromhex("02000000aa01" "02000000bb02" "0800") + ip_packet("10.200.0.1")
        send(host, "eth1", cust, 10)
        time.sleep(1.0)
        pe2.ip("route", "del", "10.255.0.3/32")
        wait_until(lambda: pw_transport() == "", 20, what="pw-far's transport label withdrawn")
        send(host, "eth1", cust, 10)
        time.sleep(1.0)

        # ldpd's route goes: it withdraws, Linerate withdraws its own, the route is unlabelled.
        pe2.ip("route", "del", "10.77.0.0/24")
        wait_until(lambda: "local" not in mine("10.77.0.0/24")
                   and "10.255.0.2" not in mine("10.77.0.0/24"), 20,
                   what="10.77.0.0/24's labels withdrawn")
        wait_until(lambda: not ldpd_has("10.77.0.0/24", local77), 15,
                   what="ldpd dropping Linerate's label for 10.77.0.0/24")
        time.sleep(1.5)  # the router's next look at its routes puts the route back
        send(host, "eth0", mac(PE1_EDGE_MAC) + mac(HOST_MAC) + b"\x08\x00" + ip_packet("10.77.0.9"), 10)
        time.sleep(1.0)
    finally:
        core_cap.stop(settle=0.5)
        host_cap.stop(settle=0.5)

    out = "eth.src == " + PE1_CORE_MAC
    pushed = read_fields(core_cap.pcap, ["mpls.label", "mpls.bottom", "ip.ttl"],
                         f"{out} && mpls && ip.dst == 10.77.0.5")
    assert pushed == [[str(theirs77), "1", "63"]] * 10, pushed
    swapped = read_fields(core_cap.pcap, ["mpls.label", "mpls.ttl"], f"{out} && ip.dst == 10.77.0.6")
    assert swapped == [[str(theirs77), "63"]] * 10, swapped
    php = read_fields(core_cap.pcap, ["eth.type", "ip.ttl"], f"{out} && ip.dst == 10.255.0.2")
    assert php == [["0x0800", "63"]] * 10, php
    popped = read_fields(host_cap.pcap, ["eth.type", "ip.ttl"], "ip.dst == 10.88.0.7")
    assert popped == [["0x0800", "63"]] * 10, popped
    after = read_fields(core_cap.pcap, ["eth.type"], f"{out} && ip.dst == 10.77.0.9")
    assert after == [["0x0800"]] * 10, after
    ldp_rows = read_fields(core_cap.pcap, ["ldp.msg.type"], "ldp && ip.src == 10.0.12.1")
    types = {t for (row,) in ldp_rows for t in row.split(",")}
    # Link hellos, initialization, keepalives, address, mapping and withdraw, decoded.
    assert {"0x0100", "0x0200", "0x0201", "0x0300", "0x0400", "0x0402"} <= types, types
    hellos = read_fields(core_cap.pcap, ["ip.dst", "ip.ttl"], "ldp.msg.type == 0x0100 && ip.src == 10.0.12.1")
    assert hellos and all(h == ["224.0.0.2", "1"] for h in hellos), hellos
    # The pseudowire's frames (no control word: decoded as such), the customer's frame whole.
    pw = ["mpls.label==901,pwethnocw"]
    pw_frames = read_fields(core_cap.pcap, ["mpls.label", "mpls.bottom", "ip.dst"],
                            f"{out} && mpls.label == 901", decode_as=pw)
    assert pw_frames == ([[f"{far_label},901", "0,1", "10.200.0.1"]] * 10
                         + [["901", "1", "10.200.0.1"]] * 10), pw_frames
    bad = read_fields(core_cap.pcap, ["frame.number", "_ws.expert.message", "_ws.col.Info"],
                      "_ws.malformed || _ws.expert.severity >= error && ldp", decode_as=pw)
    assert bad == [], bad
    r.stop()
