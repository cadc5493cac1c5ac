"""IF-MIB through net-snmp's snmpd: each router is an AgentX subagent in an SNMP context of its
own (a logical router's name), one snmpd serves them all, and an operator's snmpwalk and
snmpbulkwalk (v2c, a community per context) read each router's ports, state and counters.

What is checked: the two routers' rows are apart (context lrA sees A's ports, lrB sees B's);
names, descriptions, MACs, MTUs and status are the config's; ifHCInUcastPkts moves with the
traffic a host sends through A and agrees with the router's own port counters; GetBulk walks
what GetNext walks; the subagent registers again after snmpd restarts and after a hitless
restart of the router (the new process takes the registration over once the old one exits).
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from testbed.netns import wait_until
from testbed.routed import R_MAC, Router, topology

pytestmark = pytest.mark.usefixtures("testbed_session")

IF_DESCR = ".1.3.6.1.2.1.2.2.1.2"
IF_MTU = ".1.3.6.1.2.1.2.2.1.4"
IF_PHYS = ".1.3.6.1.2.1.2.2.1.6"
IF_TYPE = ".1.3.6.1.2.1.2.2.1.3"
IF_OPER = ".1.3.6.1.2.1.2.2.1.8"
IF_NAME = ".1.3.6.1.2.1.31.1.1.1.1"
IF_HC_IN_UCAST = ".1.3.6.1.2.1.31.1.1.1.7"
IF_TABLE = ".1.3.6.1.2.1.2"
IF_X_TABLE = ".1.3.6.1.2.1.31.1.1"

B_CONFIG = """\
router: { workers: 1 }
ports:
  - { name: q0, driver: mem }
  - { name: q1, driver: mem }
interfaces:
  - { name: q0, port: q0, mac: "02:00:00:00:0b:01", mtu: 9000, ipv4: [10.20.0.1/24] }
  - { name: q1, port: q1, mac: "02:00:00:00:0b:02", ipv4: [10.21.0.1/24] }
  - { name: q1.100, port: q1, vlan: 100, mac: "02:00:00:00:0b:02", ipv4: [10.22.0.1/24] }
"""


class Snmpd:
    """snmpd as the AgentX master on a Unix socket, answering v2c on 127.0.0.1:16161 of
    namespace `ns`; community `pub-X` reads context X."""

    def __init__(self, ns, d: Path, contexts: list[str]) -> None:
        from testbed import require_tools
        self.tools = require_tools("snmpd", "snmpwalk", "snmpbulkwalk", "snmpget")
        self.ns, self.dir = ns, d
        self.agentx = d / "agentx.sock"
        conf = ["master agentx", f"agentXSocket unix:{self.agentx}", "agentXPerms 0660 0770",
                "agentaddress udp:127.0.0.1:16161", "view all included .1"]
        for c in contexts:
            conf += [f"com2sec -Cn {c} sec{c} 127.0.0.1 pub-{c}",
                     f"group grp{c} v2c sec{c}",
                     f"access grp{c} {c} any noauth exact all none none"]
        (d / "snmpd.conf").write_text("\n".join(conf) + "\n")
        self.proc = None
        self.start()

    def start(self) -> None:
        self.proc = self.ns.popen([self.tools["snmpd"], "-f", "-C", "-c",
                                   str(self.dir / "snmpd.conf"), "-m", "", "-Lo"],
                                  log=self.dir / "snmpd.log", name="snmpd")
        wait_until(lambda: self.agentx.exists(), 10, what="snmpd's AgentX socket")

    def stop(self) -> None:
        self.proc.stop()

    def walk(self, context: str, oid: str, bulk: bool = False) -> dict[str, str]:
        tool = self.tools["snmpbulkwalk" if bulk else "snmpwalk"]
        r = self.ns.run([tool, "-v2c", "-c", f"pub-{context}", "-On", "-m", "", "-t", "2",
                         "127.0.0.1:16161", oid], check=False)
        assert r.returncode == 0, r.stdout + r.stderr
        out = {}
        for line in r.stdout.splitlines():
            if " = " in line:
                k, v = line.split(" = ", 1)
                out[k.strip()] = v.strip()
        return out

    def column(self, context: str, oid: str) -> list[str]:
        w = self.walk(context, oid)
        return [w[k] for k in sorted(w, key=lambda k: int(k.rsplit(".", 1)[1]))]

    def counter(self, context: str, oid: str) -> int:
        r = self.ns.run([self.tools["snmpget"], "-v2c", "-c", f"pub-{context}", "-On", "-m", "",
                         "-Oqv", "127.0.0.1:16161", oid], check=False)
        assert r.returncode == 0, r.stdout + r.stderr
        return int(r.stdout.strip())

    def registered(self, context: str) -> bool:
        try:
            return bool(self.walk(context, IF_X_TABLE))
        except AssertionError:
            return False


def test_each_router_serves_if_mib_in_its_context_through_one_snmpd(linerate_bin, testbed,
                                                                       tmp_path):
    dut, h1, h2, cfg = topology(testbed)
    b_ns = testbed.netns("lrb")
    snmpd = Snmpd(dut, tmp_path, ["lrA", "lrB"])
    snmp = f'snmp: {{ agentx: "{snmpd.agentx}", context: lrA }}\n'
    a = Router(linerate_bin, dut, tmp_path / "a", cfg + snmp)
    b = Router(linerate_bin, b_ns, tmp_path / "b",
               B_CONFIG + f'snmp: {{ agentx: "{snmpd.agentx}", context: lrB }}\n')
    try:
        wait_until(lambda: snmpd.registered("lrA") and snmpd.registered("lrB"), 15,
                   what="both subagents registered")
        # Each context holds its own router's ports, as the config has them.
        assert snmpd.column("lrA", IF_NAME) == ['STRING: "p0"', 'STRING: "p1"']
        assert snmpd.column("lrB", IF_NAME) == ['STRING: "q0"', 'STRING: "q1"',
                                                'STRING: "q1.100"']
        assert snmpd.column("lrA", IF_DESCR) == ['STRING: "p0 (port p0, af_packet)"',
                                                 'STRING: "p1 (port p1, af_packet)"']
        assert snmpd.column("lrB", IF_MTU) == ["INTEGER: 9000", "INTEGER: 1500", "INTEGER: 1500"]
        # A VLAN sub-interface is l2vlan; the interfaces sharing port q1 have no counters (the
        # data plane counts per port): absent, not zero.
        assert snmpd.column("lrB", IF_TYPE) == ["INTEGER: 6", "INTEGER: 6", "INTEGER: 135"]
        assert list(snmpd.walk("lrB", IF_HC_IN_UCAST)) == [IF_HC_IN_UCAST + ".1"]
        macs = snmpd.column("lrA", IF_PHYS)
        assert macs[0].replace(" ", ":").lower().endswith(R_MAC[0][3:]), macs
        assert snmpd.column("lrA", IF_OPER) == ["INTEGER: 1", "INTEGER: 1"]
        # GetBulk walks what GetNext walks: the same objects (counters may move in between).
        for ctx in ("lrA", "lrB"):
            for sub in (IF_TABLE, IF_X_TABLE):
                assert snmpd.walk(ctx, sub, bulk=True).keys() == snmpd.walk(ctx, sub).keys()
            assert snmpd.walk(ctx, IF_NAME, bulk=True) == snmpd.walk(ctx, IF_NAME)
        # Counters move with traffic through A, and agree with A's own.
        oid = IF_HC_IN_UCAST + ".1"
        before = snmpd.counter("lrA", oid)
        assert h1.ping("198.51.100.2", count=50, timeout=20)
        s1 = snmpd.counter("lrA", oid)
        api = next(p["rx_packets"] for p in a.json("show", "ports") if p["name"] == "p0")
        s2 = snmpd.counter("lrA", oid)
        assert s1 - before >= 50, (before, s1)
        assert s1 <= api <= s2, (s1, api, s2)
        assert snmpd.counter("lrB", oid) == 0
        # snmpd restarts: the subagents register again.
        snmpd.stop()
        snmpd.start()
        wait_until(lambda: snmpd.registered("lrA") and snmpd.registered("lrB"), 15,
                   what="both subagents registered again after snmpd's restart")
        # A hitless restart of A: the new process registers once the old one has gone.
        new = a.ns.popen([str(linerate_bin), "daemon", "--config", str(a.config), "--state",
                          str(a.dir / "state"), "--socket", str(a.sock), "--take-over"],
                         log=a.dir / "daemon-new.log", name="linerate-new")
        old = a.proc
        wait_until(lambda: not old.running, 30, what="the old process to exit")
        a.proc, a.log = new, a.dir / "daemon-new.log"
        wait_until(lambda: snmpd.registered("lrA"), 15,
                   what="the new process's IF-MIB in context lrA")
        assert snmpd.column("lrA", IF_NAME) == ['STRING: "p0"', 'STRING: "p1"']
    finally:
        a.stop()
        b.stop()
        snmpd.stop()
