"""The services (ACLs, QoS, flow export) with the tester's traffic through an embedded router and
real peers reading what the router says: nfcapd/nfdump and tshark decode its NetFlow v9 and
IPFIX, rsyslogd receives its ACL log records, tshark reads the DSCP it re-marked.

Traffic is the `pair` pattern of test_mgmt_traffic.py: p0 <-> p1 between the neighbours
198.18.0.2 and 198.18.1.2, UDP 1024 -> 5000, at a few tens of thousands of frames per second.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from rsyslog import rsyslog_server
from test_mgmt_traffic import PATTERN_ARGS, ROUTER, Bench, capture, only_trial


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def with_services(bind_p0: str = "", bind_p1: str = "", extra: str = "") -> str:
    text = ROUTER.replace('ipv4: [198.18.0.1/24] }', f'ipv4: [198.18.0.1/24]{bind_p0} }}')
    text = text.replace('ipv4: [198.18.1.1/24] }', f'ipv4: [198.18.1.1/24]{bind_p1} }}')
    return text + extra


@pytest.fixture
def start(linerate_bin, tmp_path):
    started: list[Bench] = []

    def go(router: str, *args: str, name: str = "run") -> Bench:
        b = Bench(linerate_bin, tmp_path / name, router, *args)
        started.append(b)
        b.wait_api()
        return b

    yield go
    for b in started:
        b.stop()


def streams(t: dict) -> dict:
    return {s["name"]: s for s in t["streams"]}


def nfcapd_bin() -> str:
    found = shutil.which("nfcapd")
    if found:
        return found
    if os.geteuid() != 0:
        pytest.skip("nfcapd is not installed and this user is not root (apt-get install nfdump)")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for cmd in (["apt-get", "update"], ["apt-get", "install", "-y", "nfdump"]):
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1200)
        assert r.returncode == 0, f"{' '.join(cmd)} failed: {r.stderr[-2000:]}"
    subprocess.run(["systemctl", "disable", "--now", "nfdump"], capture_output=True)
    return shutil.which("nfcapd") or pytest.fail("nfdump installed but nfcapd not found")


class Nfcapd:
    """nfcapd on a free loopback port writing into `dir`; `records()` stops it and reads back."""

    def __init__(self, workdir: Path):
        self.dir = workdir / "nfcapd"
        self.dir.mkdir()
        self.port = free_udp_port()
        self.log = open(workdir / "nfcapd.log", "w")
        self.proc = subprocess.Popen(
            [nfcapd_bin(), "-w", str(self.dir), "-b", "127.0.0.1", "-p", str(self.port),
             "-t", "3600"], stdout=self.log, stderr=subprocess.STDOUT)
        time.sleep(0.5)
        assert self.proc.poll() is None, (workdir / "nfcapd.log").read_text()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=20)
        self.log.close()

    def records(self) -> list[dict]:
        """Every flow nfcapd stored, as nfdump's CSV rows."""
        self.stop()
        files = [p for p in self.dir.rglob("nfcapd.*") if p.is_file()]
        assert files, f"nfcapd wrote no file in {self.dir}"
        p = subprocess.run([shutil.which("nfdump") or "nfdump", "-R", str(self.dir), "-o", "csv",
                            "-q"], capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, p.stderr
        lines = [line for line in p.stdout.splitlines() if line and not line.startswith("Summary")]
        # nfdump's CSV has a header line unless -q drops it; read both ways.
        header = ("ts,te,td,sa,da,sp,dp,pr,flg,fwd,stos,ipkt,ibyt,opkt,obyt,in,out,sas,das,smk,"
                  "dmk,dtos,dir,nh,nhb,svln,dvln,ismc,odmc,idmc,osmc,mpls1,mpls2,mpls3,mpls4,"
                  "mpls5,mpls6,mpls7,mpls8,mpls9,mpls10,cl,sl,al,ra,eng,exid,tr")
        if not lines or not lines[0].startswith("ts,"):
            lines.insert(0, header)
        rows = list(csv.DictReader(io.StringIO("\n".join(lines))))
        return [r for r in rows if r.get("sa") and r["sa"] != "sa" and r.get("ipkt", "").strip()]


def tshark_fields(tshark: str, pcap: Path, opts: list[str], *fields: str) -> list[tuple[str, ...]]:
    """tshark's fields per packet of `pcap`, with extra options (decode-as, preferences)."""
    cmd = [tshark, "-r", str(pcap), *opts, "-T", "fields"]
    for f in fields:
        cmd += ["-e", f]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, f"tshark failed on {pcap}: {p.stderr}"
    return [tuple(line.split("\t")) for line in p.stdout.splitlines() if line.strip()]


def cflow(tshark: str, pcap: Path, port: int, *fields: str) -> list[tuple[str, ...]]:
    """tshark's NetFlow/IPFIX decoding of the datagrams to `port` in `pcap`."""
    return tshark_fields(tshark, pcap, ["-d", f"udp.port=={port},cflow", "-Y", "cflow"], *fields)


@pytest.mark.parametrize("version", ["9", "ipfix"])
def test_netflow_read_back_by_nfdump_and_tshark_equals_what_the_tester_sent(
        start, tshark, tmp_path, version):
    nf = Nfcapd(tmp_path)
    port = nf.port
    try:
        router = with_services(
            ", flow: both", ", flow: both",
            f'flow-export: {{ version: {version}, collectors: ["127.0.0.1:{nf.port}"], '
            f'cache-size: 65536, active-timeout: 60, inactive-timeout: 60, domain-id: 7 }}\n')
        # tshark reads the same datagrams off the loopback.
        pcap = tmp_path / "flows.pcap"
        cap = subprocess.Popen([tshark, "-i", "lo", "-f", f"udp port {nf.port}", "-w", str(pcap)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(2)
        b = start(router, *PATTERN_ARGS, "--load", "20", "--seconds", "2")
        shown = json.loads(b.ok("show", "flows", "--json").stdout)
        assert shown["enabled"] and shown["version"] == ("9" if version == "9" else "ipfix")
        t = only_trial(b.finish())
        # The router flushed its caches to the exporter when it stopped.
        time.sleep(1.5)
        cap.send_signal(signal.SIGINT)
        cap.wait(timeout=20)
        rows = nf.records()
    finally:
        nf.stop()
    s = streams(t)
    assert t["lost"] == 0 and t["rx"] == t["tx"] > 1000
    # Each packet is one flow record's packet twice: ingress on its arrival interface and egress
    # on its departure interface (SNMP ifIndex: p0 = 1, p1 = 2).
    by = {}
    for r in rows:
        key = (r["sa"], r["da"], int(r["sp"]), int(r["dp"]), r["pr"], int(r["in"]),
               int(r["out"]))
        by.setdefault(key, [0, 0])
        by[key][0] += int(r["ipkt"])
        by[key][1] += int(r["ibyt"])
    fwd = by.get(("198.18.0.2", "198.18.1.2", 1024, 5000, "UDP", 1, 2), [0, 0])
    rev = by.get(("198.18.1.2", "198.18.0.2", 1024, 5000, "UDP", 2, 1), [0, 0])
    assert fwd[0] == 2 * s["p0>p1"]["tx"], (by, s)
    assert rev[0] == 2 * s["p1>p0"]["tx"], (by, s)
    # 128-byte frames: 110 bytes of IP each (frame minus Ethernet header and FCS).
    assert fwd[1] == 110 * fwd[0] and rev[1] == 110 * rev[0], by
    # tshark decodes every datagram, with no malformed ones, to the same packet total.
    pkts = cflow(tshark, pcap, port, "cflow.packets", "_ws.malformed")
    assert pkts, "tshark saw no flow export datagrams"
    total = 0
    for fields in pkts:
        assert fields[-1] == "", f"tshark found a malformed datagram: {fields}"
        total += sum(int(x) for x in fields[0].split(",") if x)
    assert total == 2 * t["tx"], (total, t["tx"])
    v = cflow(tshark, pcap, port, "cflow.version")
    assert {x[0] for x in v} == {"9" if version == "9" else "10"}


def test_acl_denies_one_stream_logs_it_and_counts_it(start, tmp_path):
    with rsyslog_server(tmp_path / "rsyslog") as srv:
        router = with_services(
            ", acl-in: A", "",
            "acls:\n"
            "  - name: A\n"
            "    entries:\n"
            '      - "10 permit udp src host 198.18.0.2 dport 80"\n'
            '      - "20 deny udp src host 198.18.0.2 dst host 198.18.1.2 sport 1024 dport 5000 log"\n'
            '      - "30 permit"\n'
            f'logging: {{ servers: ["127.0.0.1:{srv.port}"], acl-interval: 1 }}\n')
        b = start(router, *PATTERN_ARGS, "--load", "10", "--seconds", "3")
        time.sleep(1.5)
        mid = json.loads(b.ok("show", "acl", "A", "--json").stdout)[0]
        t = only_trial(b.finish())
        recs = srv.wait_for(lambda rs: sum(r["msgid"] == "ACL_LOG" for r in rs) >= 2,
                            timeout=10)
    s = streams(t)
    assert s["p0>p1"]["rx"] == 0 and s["p0>p1"]["tx"] > 1000, "the denied stream loses all"
    assert s["p1>p0"]["rx"] == s["p1>p0"]["tx"] and s["p1>p0"]["lost"] == 0
    assert mid["bound"] == ["p0 in"] and mid["entries"][1]["hits"] > 0
    assert mid["entries"][0]["hits"] == 0 and mid["implicit_deny"] == 0
    logs = [r for r in recs if r["msgid"] == "ACL_LOG"]
    first = logs[0]["msg"]
    assert first == ("access-list A (20) deny udp 198.18.0.2(1024) -> 198.18.1.2(5000) "
                     "on p0 in, 1 packet"), first
    # Later records carry counts (one per second, the last when the router stopped); with the
    # first they add up to every denied frame.
    counted = sum(int(r["msg"].rsplit(", ", 1)[1].split()[0]) for r in logs)
    assert counted == s["p0>p1"]["tx"], (counted, [r["msg"] for r in logs])


def test_acl_entry_added_and_removed_under_traffic(start, tmp_path):
    router = with_services(", acl-in: A", ", acl-in: A",
                           "acls:\n  - { name: A, entries: [\"permit\"] }\n")
    b = start(router, *PATTERN_ARGS, "--load", "10", "--seconds", "4")
    time.sleep(1)
    b.ok("acl", "add", "A", "5", "deny", "udp", "src", "host", "198.18.1.2")
    time.sleep(1)
    shown = json.loads(b.ok("show", "acl", "--json").stdout)[0]
    b.ok("acl", "del", "A", "5")
    after = json.loads(b.ok("show", "acl", "--json").stdout)[0]
    bad = b.cli("acl", "add", "A", "7", "deny", "udp", "dport", "99999")
    t = only_trial(b.finish())
    assert bad.returncode != 0 and "`99999` is not a port" in bad.stderr, bad.stderr
    s = streams(t)
    assert [e["seq"] for e in shown["entries"]] == [5, 10]
    assert shown["entries"][0]["hits"] > 0
    assert [e["seq"] for e in after["entries"]] == [10]
    # Only the p1 stream lost frames, and only while entry 5 was there.
    assert s["p0>p1"]["lost"] == 0 and s["p0>p1"]["rx"] == s["p0>p1"]["tx"]
    lost = s["p1>p0"]["lost"]
    assert 0 < lost < s["p1>p0"]["tx"], s["p1>p0"]
    # Frames the list denied are the frames the stream lost.
    drops_by = {d["reason"]: d["frames"] for d in t["dut_drops"]}
    assert drops_by == {"AclDenied": lost}, t["dut_drops"]


def test_qos_remark_seen_by_tshark_and_counted(start, tshark, tmp_path):
    router = with_services(
        ", qos-in: edge", "",
        "qos:\n"
        "  classes: [{ name: bulk, match: [\"udp dport 5000\"] }]\n"
        "  policies:\n"
        "    - name: edge\n"
        "      classes: [{ class: bulk, set: { dscp: 46 } }]\n")
    b = start(router, *PATTERN_ARGS, "--load", "10", "--seconds", "3")
    time.sleep(0.5)
    pcap = tmp_path / "p1tx.pcap"
    n = capture(b, pcap, "-i", "p1", "--direction", "tx", "-c", "50")
    q = json.loads(b.ok("show", "qos", "--json").stdout)
    t = only_trial(b.finish())
    assert n == 50
    # tshark checks the IPv4 header checksum (status 1: good) the router updated when re-marking.
    dscp = tshark_fields(tshark, pcap, ["-o", "ip.check_checksum:TRUE"], "ip.dsfield.dscp",
                         "ip.checksum.status")
    assert len(dscp) == 50 and all(d == ("46", "1") for d in dscp), dscp[:3]
    assert q[0]["interface"] == "p0" and q[0]["classes"][0]["packets"] > 0
    assert t["lost"] == 0
