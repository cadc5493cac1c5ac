"""IGMP and MLD snooping against the Linux kernel's own group membership: hosts in namespaces
join and leave groups through sockets (IP_ADD_MEMBERSHIP, IPV6_JOIN_GROUP), so the reports,
leaves and MLD messages on the wire are the kernel's (IGMPv3 and MLDv2 by default, IGMPv2 where
a host is told to), and a sender's UDP goes through the router's bridge `tv` (af_packet ports).

- Every receiver gets every datagram of its groups, IPv4 and IPv6; the host that joined
  nothing gets none of them (unregistered groups are not flooded) and none of the other hosts'
  reports (reports go to multicast routers only, and there is none);
- r2 (IGMPv2, fast-leave) leaves in the middle: nothing of the group reaches it after its leave
  has reached the router, and `show igmp snooping groups` drops it;
- the bridge's own querier (every 2 s here) sends IGMPv3 and MLDv2 general queries to every
  member, and the kernels answer them: r1 reports again after its unsolicited reports;
- tshark decodes what crossed, nothing malformed; the metrics count the groups.
"""

from __future__ import annotations

import json
import time

import pytest

from test_real_ports import Router
from testbed.netns import wait_until

pytestmark = pytest.mark.usefixtures("testbed_session")

GROUP4, GROUP6, PORT = "239.1.2.3", "ff3e::1234", 5000
HOSTS = ["src", "r1", "r2", "r3"]

CONFIG = """\
router: { workers: 1 }
ports:
  - { name: p1, driver: af_packet, device: d1 }
  - { name: p2, driver: af_packet, device: d2 }
  - { name: p3, driver: af_packet, device: d3 }
  - { name: p4, driver: af_packet, device: d4 }
interfaces:
  - { name: p1, port: p1, mac: "02:00:00:00:0d:01" }
  - { name: p2, port: p2, mac: "02:00:00:00:0d:02" }
  - { name: p3, port: p3, mac: "02:00:00:00:0d:03" }
  - { name: p4, port: p4, mac: "02:00:00:00:0d:04" }
bridges:
  - name: tv
    id: 30
    members: [p1, p2, p3, p4]
    igmp-snooping: { flood-unregistered: false, fast-leave: [p2, p3, p4], querier: true,
                     query-interval: 2, querier-address: 10.30.0.254 }
"""
QUERIER_MAC = "02:00:5e:10:00:1e"  # the bridge's own (no routed interface): made from id 30

# Joins `groups` (v4 and v6 addresses) on eth0, counts datagrams per group, leaves after
# `leave` seconds (if given: then keeps counting what still comes), stops after `secs`.
RECEIVER = r"""
import json, socket, struct, sys, time
groups, leave, secs = json.loads(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
idx = socket.if_nametoindex("eth0")
socks, counts, after = {}, {}, {}
for g in groups:
    if ":" in g:
        s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("::", 5000))
        mreq = socket.inet_pton(socket.AF_INET6, g) + struct.pack("@I", idx)
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_JOIN_GROUP, mreq)
    else:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((g, 5000))
        mreq = struct.pack("4s4s", socket.inet_aton(g), socket.inet_aton("0.0.0.0"))
        s.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, mreq)
    s.setblocking(False)
    socks[g], counts[g], after[g] = s, 0, 0
print("joined", flush=True)
t0 = time.time(); left = False; left_at = None
while time.time() - t0 < secs:
    if leave > 0 and not left and time.time() - t0 >= leave:
        for g, s in socks.items():
            if ":" in g:
                mreq = socket.inet_pton(socket.AF_INET6, g) + struct.pack("@I", idx)
                s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_LEAVE_GROUP, mreq)
            else:
                mreq = struct.pack("4s4s", socket.inet_aton(g), socket.inet_aton("0.0.0.0"))
                s.setsockopt(socket.IPPROTO_IP, socket.IP_DROP_MEMBERSHIP, mreq)
        left, left_at = True, time.time()
    for g, s in socks.items():
        while True:
            try:
                s.recv(2048)
            except BlockingIOError:
                break
            counts[g] += 1
            if left:
                after[g] += 1
    time.sleep(0.002)
print(json.dumps({"counts": counts, "after_leave": after}), flush=True)
"""

# Sends `n` datagrams to each of `groups` at `pps` each, out of eth0; prints what it sent.
SENDER = r"""
import json, socket, sys, time
groups, n, pps = json.loads(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
idx = socket.if_nametoindex("eth0")
v4 = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
v4.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 4)
v4.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(sys.argv[4]))
v6 = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
v6.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_MULTICAST_IF, idx)
v6.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_MULTICAST_HOPS, 4)
sent = {g: 0 for g in groups}
t0 = time.time()
for i in range(n):
    while time.time() - t0 < i / pps:
        time.sleep(0.0005)
    for g in groups:
        (v6 if ":" in g else v4).sendto(b"x" * 100, (g, 5000))
        sent[g] += 1
print(json.dumps(sent), flush=True)
"""


def topology(testbed):
    dut = testbed.netns("dut")
    dut.up("lo")
    hosts = {}
    for i, name in enumerate(HOSTS, start=1):
        h = testbed.netns(name)
        # Link-local addresses usable at once (MLD reports need one), not after DAD.
        h.sysctl({"net.ipv6.conf.default.accept_dad": 0, "net.ipv6.conf.all.accept_dad": 0})
        testbed.veth(h, "eth0", dut, f"d{i}")
        dut.sysctl({f"net.ipv6.conf.d{i}.disable_ipv6": 1})
        dut.up(f"d{i}")
        h.addr("eth0", f"10.30.0.{i}/24", f"2001:db8:30::{i}/64")
        h.route("224.0.0.0/4", "dev", "eth0")
        hosts[name] = h
    # r2's kernel speaks IGMPv2 (reports to the group, leaves to 224.0.0.2).
    hosts["r2"].sysctl({"net.ipv4.conf.eth0.force_igmp_version": 2})
    return dut, hosts


def groups_view(r: Router) -> dict[str, list[str]]:
    v = r.json("show", "igmp", "snooping", "groups")
    return {g["group"]: sorted(m["interface"] for m in g["members"]) for g in v["groups"]}


def test_kernel_hosts_join_and_leave_through_snooping(linerate_bin, testbed, tmp_path):
    dut, h = topology(testbed)
    caps = {n: testbed.capture(h[n], "eth0", f"igmp-{n}.pcap")
            for n in ("src", "r1", "r2", "r3")}
    r = Router(linerate_bin, dut, tmp_path / "dut", CONFIG)
    try:
        py = "/usr/bin/python3"
        recv = {
            "r1": h["r1"].popen([py, "-c", RECEIVER, json.dumps([GROUP4, GROUP6]), "0", "8"],
                                log=tmp_path / "r1.log", name="r1"),
            "r2": h["r2"].popen([py, "-c", RECEIVER, json.dumps([GROUP4]), "2", "8"],
                                log=tmp_path / "r2.log", name="r2"),
        }
        # The kernels' unsolicited reports reach the router: both groups snooped.
        wait_until(lambda: groups_view(r).get(GROUP4) == ["p2", "p3"]
                   and groups_view(r).get(GROUP6) == ["p2"], 10,
                   what=f"the joins snooped: {groups_view(r)}")
        out = h["src"].run([py, "-c", SENDER, json.dumps([GROUP4, GROUP6]), "1500", "500",
                            "10.30.0.1"], timeout=30).stdout
        sent = json.loads(out.strip().splitlines()[-1])
        # r2 has left (2 s in), r1 is still listening (until 8 s); the group's counters.
        assert groups_view(r) == {GROUP4: ["p2"], GROUP6: ["p2"]}, groups_view(r)
        v = r.json("show", "igmp", "snooping", "groups")
        g4 = next(g for g in v["groups"] if g["group"] == GROUP4)
        assert g4["packets"] == sent[GROUP4] and g4["replicas"] > sent[GROUP4], g4
        text = r.cli("show", "igmp", "snooping", "groups")
        assert "239.1.2.3" in text and "ff3e::1234" in text, text
        for p in recv.values():
            wait_until(lambda p=p: not p.running, 15, what="the receivers to finish")
        got = {n: json.loads((tmp_path / f"{n}.log").read_text().strip().splitlines()[-1])
               for n in recv}
        # r1 got every datagram of both groups.
        assert got["r1"]["counts"] == {GROUP4: sent[GROUP4], GROUP6: sent[GROUP6]}, (sent, got)
        # r2 got the group until it left (2 s after it joined, part way through the 3 s sent),
        # then nothing beyond what was on its way.
        assert 100 < got["r2"]["counts"][GROUP4] < sent[GROUP4] - 100, got
        assert got["r2"]["after_leave"][GROUP4] <= 5, got
        # r1's sockets closed with its process: its kernel left both groups.
        wait_until(lambda: groups_view(r) == {}, 5, what=f"every group left: {groups_view(r)}")
        v = r.json("show", "igmp", "snooping", "groups")
        assert v["reports"] > 0 and v["leaves"] >= 3 and v["malformed"] == 0, v
        assert v["queries_sent"] >= 6, v
        assert v["joined"] == 3 and v["ended"] == 3, v
        metrics = r.cli("show", "metrics")
        assert "linerate_igmp_snooping_groups 0" in metrics, metrics[-2000:]
        assert 'linerate_bridge_multicast_frames_total{bridge="tv",kind="copies"}' in metrics
    finally:
        r.stop()
    for c in caps.values():
        c.stop()
    # r3 joined nothing: no datagram of the groups, and none of the other hosts' reports.
    to_groups = f"ip.dst == {GROUP4} || ipv6.dst == {GROUP6}"
    assert caps["r3"].fields(["frame.number"], f"udp && ({to_groups})") == []
    r3_mac = h["r3"].ip_json("link", "show", "eth0")[0]["address"]
    reports = ("(igmp.type == 0x16 || igmp.type == 0x22 || igmp.type == 0x17 || "
               f"icmpv6.type == 143 || icmpv6.type == 131) && eth.src != {r3_mac}")
    assert caps["r3"].fields(["eth.src"], reports) == [], "reports are for routers only"
    # The querier's general queries reached every member, from its MAC and address; r1's
    # kernel answered them (IGMPv3 reports beyond its two unsolicited ones, MLDv2 likewise).
    for n in ("src", "r3"):
        q4 = caps[n].fields(["eth.src", "ip.src", "igmp.version"], "igmp.type == 0x11")
        assert len(q4) >= 3 and all(r == [QUERIER_MAC, "10.30.0.254", "3"] for r in q4), q4
        q6 = caps[n].fields(["eth.src"], "icmpv6.type == 130")
        assert len(q6) >= 3 and all(r == [QUERIER_MAC] for r in q6), q6
    reports = caps["r1"].fields(["frame.time_relative"], "igmp.type == 0x22")
    assert len(reports) >= 4, reports
    mld = caps["r1"].fields(["frame.time_relative"], "icmpv6.type == 143")
    assert len(mld) >= 4, mld
    # r2's leave is the kernel's IGMPv2 leave (type 0x17), decoded whole; nothing malformed.
    leaves = caps["r2"].fields(["igmp.version", "igmp.type"], "igmp.type == 0x17")
    assert leaves and all(row == ["2", "0x17"] for row in leaves), leaves
    for c in caps.values():
        bad = c.fields(["frame.number"], "_ws.malformed || _ws.expert.severity >= error")
        assert bad == [], (c.pcap, bad)
