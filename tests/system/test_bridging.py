"""Linerate as a switch: one bridge domain over real ports, three hosts' kernels on it.

h1 and h2 are untagged members (p1, p2); h3 is a member through VLAN 100 on p3 (p3.100): its
frames arrive tagged and leave tagged, while h1 and h2 see them untagged. The hosts' own
kernels speak ARP and ICMP across the bridge. What is checked:

- ping between every pair of hosts: broadcasts (ARP) flood, replies and echoes are switched to
  the learned member alone;
- `show mac address-table` lists each host's MAC on its member; `show bridge` counts;
  `clear mac address-table` empties it and traffic learns it again;
- tshark decodes what left by the tagged member: 802.1Q with VID 100, no malformed frames;
- the metrics carry the table's and the bridge's counters;
- a Flexlink pair fails over to its backup when the primary's cable is pulled.
"""

from __future__ import annotations

import re
import subprocess
import time

import pytest

from test_real_ports import Router
from testbed.netns import wait_until
from testbed.vlan import VlanShim

pytestmark = pytest.mark.usefixtures("testbed_session")

HOSTS = {"h1": "192.0.2.11", "h2": "192.0.2.12", "h3": "192.0.2.13"}


def topology(testbed, tmp_path):
    dut = testbed.netns("dut")
    hosts = {}
    for i, name in enumerate(HOSTS, start=1):
        h = testbed.netns(name)
        testbed.veth(h, "eth0", dut, f"d{i}")
        dut.sysctl({f"net.ipv6.conf.d{i}.disable_ipv6": 1})
        dut.up(f"d{i}")
        hosts[name] = h
    # h3 is on VLAN 100: the kernel here has no 802.1Q devices, so a shim tags and untags
    # between eth0 and a veth whose other end (v100) holds h3's address.
    h3 = hosts["h3"]
    h3.ip("link", "add", "v100", "type", "veth", "peer", "name", "v100-shim")
    h3.ip("link", "set", "v100-shim", "up")
    h3.sysctl({"net.ipv6.conf.v100.disable_ipv6": 1, "net.ipv6.conf.eth0.disable_ipv6": 1})
    testbed.add(VlanShim(h3, "eth0", "v100-shim", 100, tmp_path / "vlan-shim.log")).start()
    for name, h in hosts.items():
        h.sysctl({"net.ipv6.conf.eth0.disable_ipv6": 1})
        h.addr("v100" if name == "h3" else "eth0", f"{HOSTS[name]}/24")
    cfg = """\
router: { workers: 1 }
ports:
  - { name: p1, driver: af_packet, device: d1 }
  - { name: p2, driver: af_packet, device: d2 }
  - { name: p3, driver: af_packet, device: d3 }
interfaces:
  - { name: p1, port: p1, mac: "02:00:00:00:0c:01" }
  - { name: p2, port: p2, mac: "02:00:00:00:0c:02" }
  - { name: p3.100, port: p3, vlan: 100, mac: "02:00:00:00:0c:03" }
bridges:
  - { name: lan, id: 100, members: [p1, p2, p3.100], aging: 300 }
"""
    return dut, hosts, cfg


# Sends one broadcast frame from each of N source MACs (02:00:00:aa:HH:LL) out of a device.
SEND_FROM_MANY = """
import socket, sys
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind((sys.argv[1], 0))
for i in range(int(sys.argv[2])):
    src = bytes([2, 0, 0, 0xaa, i >> 8, i & 0xff])
    s.send(b"\\xff" * 6 + src + b"\\x88\\xb5" + bytes(46))
"""


def mac_of(h, dev="eth0") -> str:
    return h.ip_json("link", "show", dev)[0]["address"]


def test_three_hosts_switched_tagged_and_untagged(linerate_bin, testbed, tmp_path):
    dut, hosts, cfg = topology(testbed, tmp_path)
    # On h3's side of the wire: the router's own packet socket bypasses the taps of its end.
    cap = testbed.capture(hosts["h3"], "eth0", "bridge-h3.pcap")
    r = Router(linerate_bin, dut, tmp_path / "dut", cfg)
    try:
        for a in HOSTS:
            for b, ip in HOSTS.items():
                if a != b:
                    assert hosts[a].ping(ip, count=2, timeout=3), (a, b, r.log.read_text())
        macs = {e["mac"]: e for e in r.json("show", "mac", "address-table")["entries"]}
        want = {mac_of(hosts["h1"]): "p1", mac_of(hosts["h2"]): "p2",
                mac_of(hosts["h3"], "v100"): "p3.100"}
        for mac, member in want.items():
            assert macs[mac]["interface"] == member and macs[mac]["bridge"] == "lan", macs
            assert not macs[mac]["static"] and macs[mac]["age_s"] < 30
        (b,) = r.json("show", "bridge")
        assert b["macs"] >= 3 and b["learned"] >= 3, b
        # The ARP requests flooded; every echo and reply went to its host alone.
        assert b["flooded"] >= 3 and b["forwarded"] >= 2 * 6 * 2 - 6, b
        assert {m["interface"]: m["macs"] for m in b["members"]}["p2"] >= 1
        text = r.cli("show", "bridge")
        assert "spanning tree not run" in text, text
        # One member's entries, then cleared: traffic learns them again.
        only = r.json("show", "mac", "address-table", "--interface", "p2")["entries"]
        assert [e["mac"] for e in only] == [mac_of(hosts["h2"])], only
        out = r.cli("clear", "mac", "address-table", "--bridge", "lan")
        assert re.search(r"^[3-9]\d* address\(es\) removed", out), out
        assert r.json("show", "mac", "address-table")["table"]["entries"] == 0
        assert hosts["h1"].ping(HOSTS["h3"], count=1, timeout=3)
        assert r.json("show", "mac", "address-table")["table"]["entries"] >= 2
        metrics = r.cli("show", "metrics")
        assert re.search(r'^linerate_bridge_frames_total\{bridge="lan",kind="flooded"\} [1-9]',
                         metrics, re.M), metrics
        assert re.search(r'^linerate_mac_table_events_total\{event="cleared"\} [3-9]',
                         metrics, re.M)
    finally:
        r.stop()
    cap.stop()
    # What left by p3 towards h3 is tagged 100, and tshark finds nothing malformed in it.
    out = cap.fields(["vlan.id", "eth.src"], "eth.src != " + mac_of(hosts["h3"], "v100"))
    assert out, "frames out of the tagged member"
    assert all(row[0] == "100" for row in out), out
    assert not cap.fields(["frame.number"], "_ws.malformed || _ws.expert.severity >= warning")


def test_a_flexlink_fails_over_when_the_primarys_cable_is_pulled(linerate_bin, testbed, tmp_path):
    """h -- [p0] linerate [p1 primary, p2 backup] == up (a Linux bridge over u1 and u2, no STP:
    the backup's blocking is what keeps the loop open). The far end of p1's wire goes down, as
    the seed pulled a cable: the link monitor sees it, p2 takes over, pings go on."""
    dut, h, up = testbed.netns("dut"), testbed.netns("h"), testbed.netns("up")
    testbed.veth(h, "eth0", dut, "d0")
    testbed.veth(up, "u1", dut, "d1")
    testbed.veth(up, "u2", dut, "d2")
    for d in ("d0", "d1", "d2"):
        dut.sysctl({f"net.ipv6.conf.{d}.disable_ipv6": 1})
        dut.up(d)
    h.sysctl({"net.ipv6.conf.eth0.disable_ipv6": 1})
    h.addr("eth0", "192.0.2.10/24")
    up.ip("link", "add", "br0", "type", "bridge")
    for d in ("u1", "u2"):
        up.sysctl({f"net.ipv6.conf.{d}.disable_ipv6": 1})
        up.ip("link", "set", d, "master", "br0")
        up.up(d)
    up.sysctl({"net.ipv6.conf.br0.disable_ipv6": 1})
    up.up("br0")
    up.addr("br0", "192.0.2.20/24")
    cfg = """\
router: { workers: 1 }
ports:
  - { name: p0, driver: af_packet, device: d0 }
  - { name: p1, driver: af_packet, device: d1 }
  - { name: p2, driver: af_packet, device: d2 }
interfaces:
  - { name: p0, port: p0, mac: "02:00:00:00:0d:01" }
  - { name: p1, port: p1, mac: "02:00:00:00:0d:02" }
  - { name: p2, port: p2, mac: "02:00:00:00:0d:03" }
bridges:
  - { name: lan, members: [p0, { interface: p1, backup: p2 }] }
"""
    # The backup's far end: the MAC-move updates must come out here after the switchover.
    cap = testbed.capture(up, "u2", "flexlink-u2.pcap")
    r = Router(linerate_bin, dut, tmp_path / "dut", cfg)
    try:
        assert h.ping("192.0.2.20", count=2, timeout=3), r.log.read_text()
        roles = {m["interface"]: m for m in r.json("show", "bridge")[0]["members"]}
        assert roles["p2"]["blocked"] and roles["p2"]["flexlink"] == "backup (standby)", roles
        # 200 more hosts upstream: one broadcast from each, learned behind the primary.
        up.run(["python3", "-c", SEND_FROM_MANY, "br0", "200"])
        behind = wait_until(
            lambda: (lambda e: e if len(e) >= 201 else None)(
                r.json("show", "mac", "address-table", "--interface", "p1")["entries"]),
            10, what="201 addresses behind the primary")
        behind = {e["mac"] for e in behind}
        # 400 pings 10 ms apart; the cable goes 1 s in.
        pinger = h.popen(["ping", "-n", "-i", "0.01", "-c", "400", "-W", "1", "192.0.2.20"],
                         log=tmp_path / "ping.log", name="ping")
        time.sleep(1.0)
        up.ip("link", "set", "u1", "down")
        wait_until(lambda: not pinger.running, 20, what="the pings")
        out = (tmp_path / "ping.log").read_text()
        m = re.search(r"(\d+) packets transmitted, (\d+) received", out)
        assert m, out
        sent, got = int(m.group(1)), int(m.group(2))
        lost = sent - got
        roles = {m["interface"]: m for m in r.json("show", "bridge")[0]["members"]}
        assert roles["p2"]["flexlink"] == "backup (active)" and not roles["p2"]["blocked"], roles
        assert roles["p1"]["blocked"], roles
        logs = r.cli("show", "logging")
        assert "FLEXLINK_SWITCHOVER" in logs and "p1 -> p2 (p1 down)" in logs, logs
        # Detection (the link monitor) and the switch: some pings, not many, are lost.
        assert got >= sent - 50, out
        print(f"Flexlink failover on veth, cable pulled: {lost} of {sent} pings lost "
              f"(10 ms apart: about {lost * 10} ms from the pull to traffic on the backup)")
        metrics = r.cli("show", "metrics")
        m = re.search(r'^linerate_flexlink_move_updates_total\{[^}]*\} (\d+)', metrics, re.M)
        assert m and int(m.group(1)) >= len(behind), metrics
    finally:
        r.stop()
    cap.stop()
    # One RARP broadcast (a MAC-move update) from every address learned behind the primary
    # went out of the backup, and tshark decodes each cleanly.
    rows = cap.fields(["eth.src", "eth.dst", "arp.opcode", "arp.src.hw_mac"],
                      "eth.type == 0x8035")
    announced = {row[0] for row in rows}
    assert behind <= announced, sorted(behind - announced)[:5]
    assert all(row[1] == "ff:ff:ff:ff:ff:ff" and row[2] == "3" and row[3] == row[0]
               for row in rows), rows[:5]
    assert not cap.fields(["frame.number"],
                          "eth.type == 0x8035 && (_ws.malformed || _ws.expert.severity >= warning)")


def test_member_services_filter_remark_and_account_bridged_traffic(linerate_bin, testbed,
                                                                     tmp_path):
    """Services on bridge members, as a metro switch's port ACLs, port QoS and bridged NetFlow:
    p2's IPv4 list denies ICMP to h3 and leaves ARP alone (h2 still reaches h1); p3.100 re-marks
    every IP packet leaving by it to DSCP 46 (tshark reads it on h3's wire, tagged 100); p1
    accounts what it switches, and nfcapd (in the router's namespace) reads the records back,
    each naming the member it left by."""
    from test_services import nfcapd_bin

    dut, hosts, cfg = topology(testbed, tmp_path)
    nfdir = tmp_path / "nfcapd"
    nfdir.mkdir()
    nfcapd = dut.popen([nfcapd_bin(), "-w", str(nfdir), "-b", "127.0.0.1", "-p", "2055",
                        "-t", "3600"], log=tmp_path / "nfcapd.log", name="nfcapd")
    cfg = (cfg
           .replace('mac: "02:00:00:00:0c:01" }', 'mac: "02:00:00:00:0c:01", flow: in }')
           .replace('mac: "02:00:00:00:0c:02" }', 'mac: "02:00:00:00:0c:02", acl-in: NO-H3 }')
           .replace('mac: "02:00:00:00:0c:03" }', 'mac: "02:00:00:00:0c:03", qos-out: EF }'))
    cfg += """\
acls:
  - { name: NO-H3, entries: ["deny icmp dst host 192.0.2.13", "permit ip"] }
qos:
  classes: [{ name: ip, match: ["ip"] }]
  policies: [{ name: EF, classes: [{ class: ip, set: { dscp: 46 } }] }]
flow-export: { version: 9, collectors: ["127.0.0.1:2055"], active-timeout: 60 }
"""
    cap = testbed.capture(hosts["h3"], "eth0", "member-services-h3.pcap")
    r = Router(linerate_bin, dut, tmp_path / "dut", cfg)
    try:
        assert hosts["h1"].ping(HOSTS["h2"], count=3, timeout=3), r.log.read_text()
        assert hosts["h1"].ping(HOSTS["h3"], count=3, timeout=3)
        # h2's echoes to h3 are denied on the way in; its ARP and its pings to h1 are not.
        assert not hosts["h2"].ping(HOSTS["h3"], count=3, timeout=2)
        assert hosts["h2"].ping(HOSTS["h1"], count=2, timeout=3)
        (acl,) = r.json("show", "acl", "NO-H3")
        # (ping sends on until its deadline when nothing answers: at least 3 were denied.)
        denied = acl["entries"][0]["hits"]
        assert denied >= 3 and r.drops().get("AclDenied", 0) == denied, (acl, r.drops())
        assert acl["entries"][1]["hits"] >= 2 and acl["implicit_deny"] == 0, acl
        assert acl["bound"] == ["p2 in"], acl
        (ef,) = r.json("show", "qos")
        # h1's echo requests to h3 (84 bytes of IP each) are what left by p3.100.
        c = ef["classes"][0]
        assert ef["interface"] == "p3.100" and c["packets"] >= 3, ef
        assert c["bytes"] == 84 * c["packets"], ef
        flows = r.json("show", "flows")
        assert flows["interfaces"] == ["p1 in"] and flows["created"] >= 2, flows
    finally:
        r.stop()
    cap.stop()
    # The router flushed its caches to the exporter as it stopped; nfcapd writes on SIGTERM.
    time.sleep(1.0)
    nfcapd.stop(timeout=20)
    # What p3.100 sent h3: tagged 100, every IP packet DSCP 46.
    out = cap.fields(["vlan.id", "ip.dsfield.dscp"],
                     "ip && eth.dst == " + mac_of(hosts["h3"], "v100"))
    assert len(out) >= 3 and all(row == ["100", "46"] for row in out), out
    # p1's records (ifIndex: p1 1, p2 2, p3.100 3): what h1 sent h2 left by p2, h3's by p3.100;
    # nothing else came in by p1 (ARP is not a flow).
    p = subprocess.run(["nfdump", "-R", str(nfdir), "-q", "-o", "fmt:%sa,%da,%pr,%in,%out,%pkt"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    rows = [[x.strip() for x in line.split(",")] for line in p.stdout.splitlines() if "," in line]
    got: dict[tuple, int] = {}
    for sa, da, pr, i, o, n in rows:
        got[(sa, da, pr, i, o)] = got.get((sa, da, pr, i, o), 0) + int(n)
    # h1 -> h2: its 3 echo requests and its 2 replies to h2's pings.
    assert got.get(("192.0.2.11", "192.0.2.12", "ICMP", "1", "2"), 0) == 5, rows
    assert got.get(("192.0.2.11", "192.0.2.13", "ICMP", "1", "3"), 0) == 3, rows
    assert len(got) == 2, rows
