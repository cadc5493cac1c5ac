"""Multicast routing under FRR's pimd (issue 24, L3): pimd runs unchanged on the TAP twins and
programs the twins' kernel multicast cache; Linerate mirrors it and replicates in its data plane.

    h1 (source 192.0.2.2) -- [p0] linerate [p1] -- h2 (receiver)
                                           [p2] -- h3 (receiver)

PIM-SSM: the receivers join (192.0.2.2, 232.1.1.1) with IGMPv3 (the hosts' kernels send the
reports). What is checked:
- the joins reach pimd through the punt path and the twins, and the (S,G) pimd installs in the
  kernel reaches Linerate's multicast FIB (`show ip mroute`: RPF p0, out p1 and p2, origin pim);
- every receiver gets the stream, each datagram once: the kernel's own copies of what was punted
  for pimd (the unknown (S,G)'s first packets, keepalive copies) are dropped, not sent again;
- Linerate's route counts the traffic, while the kernel's counters still move (the keepalive
  copies that stop pimd from timing the (S,G) out), and the kernel sends none of those copies
  out of the twins (they go up at TTL 1);
- a leave (the receiver's socket closed) takes that interface out of the route, and the other
  receiver keeps its stream.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from testbed import frr as frrmod
from testbed.netns import wait_until

from test_real_ports import Router

pytestmark = [
    pytest.mark.usefixtures("testbed_session"),
    # pimd needs the kernel's IPv4 multicast routing (CONFIG_IP_MROUTE: its MRT_INIT socket
    # option); some of these VMs' kernels are built without it, and pimd then fails with
    # "Could not enable mroute on socket: Protocol not available".
    pytest.mark.skipif(not Path("/proc/net/ip_mr_vif").exists(),
                       reason="this kernel has no IPv4 multicast routing (no /proc/net/ip_mr_vif)"),
]

SOURCE, GROUP = "192.0.2.2", "232.1.1.1"

SEND = """
import socket, struct, sys, time
group, rate, secs, first = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 8)
n, t0 = 0, time.monotonic()
while time.monotonic() - t0 < secs:
    due = t0 + n / rate
    now = time.monotonic()
    if due > now:
        time.sleep(due - now)
    s.sendto((first + n).to_bytes(8, "big") + bytes(56), (group, 9000))
    n += 1
print(n)
"""

# Joins (S,G) with IGMPv3 (IP_ADD_SOURCE_MEMBERSHIP) and counts datagrams: distinct sequence
# numbers and duplicates, until `secs` pass or a line on stdin says stop.
RECV = """
import select, socket, struct, sys, time
group, source, ifaddr, secs = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
s.bind((group, 9000))
mreq = socket.inet_aton(group) + socket.inet_aton(ifaddr) + socket.inet_aton(source)
s.setsockopt(socket.IPPROTO_IP, 39, mreq)  # IP_ADD_SOURCE_MEMBERSHIP
print("joined", flush=True)
seen, dups, t0 = set(), 0, time.monotonic()
while time.monotonic() - t0 < secs:
    r, _, _ = select.select([s, sys.stdin], [], [], 0.2)
    if sys.stdin in r:
        break
    if s in r:
        n = int.from_bytes(s.recv(64)[:8], "big")
        dups += n in seen
        seen.add(n)
s.close()
print(len(seen), dups, flush=True)
"""


class Receiver:
    def __init__(self, ns, ifaddr: str, secs: float) -> None:
        self.p = subprocess.Popen(
            ["ip", "netns", "exec", ns.name, "python3", "-c", RECV, GROUP, SOURCE, ifaddr,
             str(secs)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.p.stdout.readline().strip() == "joined"

    def leave(self) -> tuple[int, int]:
        """Closes the socket (the kernel sends the leave); (datagrams, duplicates)."""
        out, _ = self.p.communicate("stop\n", timeout=30)
        seen, dups = out.split()
        return int(seen), int(dups)


def mroutes(r: Router) -> list[dict]:
    return r.json("show", "ip", "mroute")["routes"]


def route(r: Router) -> dict | None:
    return next((x for x in mroutes(r) if (x["source"], x["group"]) == (SOURCE, GROUP)), None)


def kernel_packets(dut) -> int:
    """The kernel's own counter for the (S,G) (`ip -s mroute`), which pimd reads."""
    lines = dut.run(["ip", "-s", "mroute"]).stdout.splitlines()
    for i, line in enumerate(lines):
        if line.replace(" ", "").startswith(f"({SOURCE},{GROUP})") and i + 1 < len(lines):
            words = lines[i + 1].split()
            if "packets," in words:
                return int(words[words.index("packets,") - 1])
    return 0


def test_pim_ssm_through_pimd_on_the_twins(linerate_bin, testbed, tmp_path):
    dut, (h1, h2, h3) = testbed.hosts_around(3)
    nets = ("192.0.2", "198.51.100", "203.0.113")
    for h, net in zip((h1, h2, h3), nets):
        h.addr("eth0", f"{net}.2/24")
        h.route("default", "via", f"{net}.1")
        # IGMPv3 reports (the Linux default, made sure of).
        h.sysctl({"net.ipv4.conf.eth0.force_igmp_version": 3})
    ifs = "\n".join(
        f'  - {{ name: p{i}, port: p{i}, mac: "02:00:00:00:0{i}:01", ipv4: [{net}.1/24] }}'
        for i, net in enumerate(nets))
    cfg = f"""\
router: {{ workers: 1 }}
ports:
  - {{ name: p0, driver: af_packet, device: d0 }}
  - {{ name: p1, driver: af_packet, device: d1 }}
  - {{ name: p2, driver: af_packet, device: d2 }}
interfaces:
{ifs}
control-plane:
  taps: true
multicast-routing: true
"""
    r = Router(linerate_bin, dut, tmp_path / "dut", cfg)
    try:
        pim = "".join(f"interface lr-p{i}\n ip pim\n ip igmp\n ip igmp version 3\n!\n"
                      for i in range(3))
        frr = testbed.frr(dut, {"zebra": frrmod.zebra_config(), "pimd": pim})
        wait_until(lambda: "lr-p2" in frr.vtysh("show ip pim interface", daemon="pimd"), 30,
                   what="pimd on the three twins")
        rx2 = Receiver(h2, "198.51.100.2", 60)
        rx3 = Receiver(h3, "203.0.113.2", 60)
        wait_until(lambda: GROUP in frr.vtysh("show ip igmp groups", daemon="pimd"), 20,
                   what="the IGMPv3 joins in pimd",
                   diagnostics=lambda: frr.vtysh("show ip igmp interface", daemon="pimd"))
        sender = subprocess.Popen(
            ["ip", "netns", "exec", h1.name, "python3", "-c", SEND, GROUP, "200", "14", "0"],
            stdout=subprocess.PIPE, text=True)
        wait_until(lambda: (x := route(r)) is not None and {"p1", "p2"} <= set(x["oifs"]), 20,
                   what="pimd's (S,G) in Linerate's multicast FIB",
                   diagnostics=lambda: r.cli("show", "ip", "mroute")
                   + dut.run(["ip", "mroute"]).stdout)
        x = route(r)
        assert (x["iif"], x["origin"]) == ("p0", "pim"), x
        k0 = kernel_packets(dut)
        copies0 = r.json("show", "ip", "mroute")["kernel_copies_dropped"]
        time.sleep(7)  # past one keepalive period (5 s)
        k1 = kernel_packets(dut)
        copies1 = r.json("show", "ip", "mroute")["kernel_copies_dropped"]
        sent = int(sender.communicate(timeout=30)[0])
        time.sleep(0.5)
        x = route(r)
        assert x["packets"] >= sent * 0.9, (x, sent)
        assert x["replicas"] >= 2 * x["packets"] * 0.99, x
        assert k1 > k0, f"the kernel's (S,G) counter must move for pimd: {k0} -> {k1}"
        assert k1 < sent / 10, f"the kernel saw a trickle, not the stream: {k1} of {sent}"
        # The keepalive copies went up at TTL 1: the kernel counted them and sent none out.
        assert copies1 == copies0, f"the kernel replicated keepalives: {copies0} -> {copies1}"
        # Both receivers got the stream once: the kernel's copies were dropped on the twins.
        view = r.json("show", "ip", "mroute")
        got3 = rx3.leave()
        # h3's leave reaches pimd, which takes p2 out of the route (fast: IGMPv3 to
        # include-none, then pimd's last-member query time).
        wait_until(lambda: "p2" not in (route(r) or {"oifs": []})["oifs"], 20,
                   what="p2 out of the route after h3 left",
                   diagnostics=lambda: r.cli("show", "ip", "mroute"))
        before = route(r)["packets"]
        sender = subprocess.Popen(
            ["ip", "netns", "exec", h1.name, "python3", "-c", SEND, GROUP, "200", "2", str(sent)],
            stdout=subprocess.PIPE, text=True)
        sent2 = int(sender.communicate(timeout=30)[0])
        time.sleep(0.5)
        rx2_seen, rx2_dups = rx2.leave()
        after = route(r)
        assert got3[1] == 0 and rx2_dups == 0, (
            f"duplicates: h2 {rx2_dups}, h3 {got3[1]}; kernel copies dropped "
            f"{view['kernel_copies_dropped']}; route {after}; sent {sent}+{sent2}\n"
            + r.cli("show", "ip", "mroute") + r.cli("show", "errors")
            + dut.run(["ip", "-s", "mroute"]).stdout)
        assert got3[0] >= sent * 0.9, (got3, sent)
        assert rx2_seen >= (sent + sent2) * 0.9, (rx2_seen, sent, sent2)
        assert after["packets"] - before >= sent2 * 0.9, (before, after, sent2)
        assert after["oifs"] == ["p1"], after
        print(json.dumps({"sent": sent + sent2, "h2": rx2_seen, "h3": got3[0],
                          "kernel_counter": [k0, k1], "route": after,
                          "kernel_copies_dropped": view["kernel_copies_dropped"]}))
    finally:
        r.stop()
