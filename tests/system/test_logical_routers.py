"""Logical routers as processes: `linerate supervisor` runs two LRs, each a `linerate daemon` in
its own namespace and control group, with the same addresses on both (their address plans are
their own).

h1 -- [a1] LR A [a2] -- h2        h3 -- [b1] LR B [b2] -- h4

The ports' devices start in the host's namespace; the supervisor moves each into its LR's. The
test sees each LR in its group (cpuset, memory) and namespace, pings through both, sends traffic
through A and sees none of it on B's ports, kills B's process under A's traffic (A loses no
ping; the supervisor restarts B), upgrades B to another binary, stops and starts A, and stops
the supervisor: devices back in the host's namespace, namespaces and groups gone. A file that
gives one device to two LRs is refused, naming the field, with nothing started.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from testbed.netns import list_netns, wait_until

pytestmark = pytest.mark.usefixtures("testbed_session")

TAG = f"{os.getpid() % 100000}"


def lr_config(p1: str, p2: str, mac: int) -> str:
    return f"""\
router: {{ workers: 1, idle-sleep-us: 50 }}
ports:
  - {{ name: p1, driver: af_packet, device: {p1} }}
  - {{ name: p2, driver: af_packet, device: {p2} }}
interfaces:
  - {{ name: p1, port: p1, mac: "02:00:00:00:{mac:02x}:01", ipv4: [192.0.2.1/24] }}
  - {{ name: p2, port: p2, mac: "02:00:00:00:{mac:02x}:02", ipv4: [198.51.100.1/24] }}
neighbors:
  - {{ interface: p1, ip: 192.0.2.2, mac: "02:00:00:00:{mac:02x}:a1" }}
  - {{ interface: p2, ip: 198.51.100.2, mac: "02:00:00:00:{mac:02x}:a2" }}
"""


class Supervisor:
    def __init__(self, bin_: Path, d: Path, lrs: str) -> None:
        self.bin, self.dir = bin_, d
        self.file = d / "lrs.yaml"
        self.file.write_text(lrs)
        self.sock = d / "run" / "supervisor.sock"
        self.log = d / "supervisor.log"
        self.proc = subprocess.Popen([str(bin_), "supervisor", "--config", str(self.file)],
                                     stdout=self.log.open("w"), stderr=subprocess.STDOUT)

    def cli(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        r = subprocess.run([str(self.bin), "--supervisor", str(self.sock), *args],
                           capture_output=True, text=True, timeout=60)
        if check:
            assert r.returncode == 0, f"{args}: {r.stdout}{r.stderr}\n{self.log.read_text()}"
        return r

    def lrs(self) -> dict[str, dict]:
        out = self.cli("show", "logical-routers", "--json").stdout
        return {r["name"]: r for r in json.loads(out)["routers"]}

    def lr_json(self, name: str, *args: str):
        return json.loads(self.cli("-l", name, *args, "--json").stdout)

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


def rx_packets(sup: Supervisor, lr: str) -> int:
    return sum(p["rx_packets"] for p in sup.lr_json(lr, "show", "ports"))


def test_two_lrs_run_apart_restart_alone_and_leave_nothing_behind(linerate_bin, testbed):
    a, b = f"lra{TAG}", f"lrb{TAG}"
    hosts = [testbed.netns(f"h{i}") for i in (1, 2, 3, 4)]
    devs = [f"a1x{TAG}", f"a2x{TAG}", f"b1x{TAG}", f"b2x{TAG}"]
    # Neighbours are static both ways: a host sends nothing unless the test makes it, so a
    # port's receive count is exactly the test's traffic.
    for h, dev, (mac, side) in zip(hosts, devs, ((0x0a, 1), (0x0a, 2), (0x0b, 1), (0x0b, 2))):
        testbed.veth(h, "eth0", None, dev)
        h.sysctl({"net.ipv6.conf.eth0.disable_ipv6": 1})
        h.ip("link", "set", "eth0", "address", f"02:00:00:00:{mac:02x}:a{side}")
        mine, gw = ("192.0.2.2/24", "192.0.2.1") if side == 1 else ("198.51.100.2/24",
                                                                    "198.51.100.1")
        h.addr("eth0", mine)
        h.route("default", "via", gw)
        h.ip("neigh", "replace", gw, "lladdr", f"02:00:00:00:{mac:02x}:0{side}", "dev", "eth0",
             "nud", "permanent")
    d = testbed.dir("lrs")
    (d / "a.yaml").write_text(lr_config(devs[0], devs[1], 0x0a))
    (d / "b.yaml").write_text(lr_config(devs[2], devs[3], 0x0b))
    cpus = os.sched_getaffinity(0)
    cpu_a, cpu_b = min(cpus), max(cpus)
    sup = Supervisor(linerate_bin, d, f"""\
supervisor: {{ share-cores: true, socket: run/supervisor.sock, run-dir: run, state-dir: state }}
logical-routers:
  - {{ name: {a}, config: a.yaml, cpus: {cpu_a}, memory: 512M }}
  - {{ name: {b}, config: b.yaml, cpus: {cpu_b}, memory: 512M }}
""")
    try:
        wait_until(lambda: sup.sock.exists() and all(
            r["state"] == "running" for r in sup.lrs().values()), 30,
            what="both LRs running")
        lrs = sup.lrs()
        print({n: (r["start_ms"], r["memory_used"]) for n, r in lrs.items()})
        nets = {os.readlink("/proc/self/ns/net")}
        for name, cpu, mydevs in ((a, cpu_a, devs[:2]), (b, cpu_b, devs[2:])):
            r = lrs[name]
            pid = r["pid"]
            groups = Path(f"/proc/{pid}/cgroup").read_text()
            assert f"/linerate/{name}\n" in groups, groups
            status = Path(f"/proc/{pid}/status").read_text()
            assert f"Cpus_allowed_list:\t{cpu}\n" in status, status
            assert 0 < r["memory_used"] < r["memory_limit"] == 512 << 20, r
            assert r["start_ms"] is not None and r["restarts"] == 0, r
            nets.add(os.readlink(f"/proc/{pid}/ns/net"))
            # Its devices are in its namespace, no longer in the host's.
            assert r["devices"] == mydevs, r
            for dev in mydevs:
                assert not Path(f"/sys/class/net/{dev}").exists()
                subprocess.run(["ip", "-n", r["namespace"], "link", "show", dev], check=True,
                               capture_output=True)
        assert len(nets) == 3, nets
        macs = {i["name"]: i["mac"] for i in sup.lr_json(a, "show", "interfaces")}
        assert macs == {"p1": "02:00:00:00:0a:01", "p2": "02:00:00:00:0a:02"}, macs

        # The same addresses through each LR.
        assert hosts[0].ping("198.51.100.2", count=3, timeout=5), (d / "run" / f"{a}.log").read_text()
        assert hosts[2].ping("198.51.100.2", count=3, timeout=5), (d / "run" / f"{b}.log").read_text()
        # Traffic through A reaches none of B's ports.
        before_a, before_b = rx_packets(sup, a), rx_packets(sup, b)
        assert hosts[0].ping("198.51.100.2", count=50, timeout=10)
        assert rx_packets(sup, a) - before_a == 100
        assert rx_packets(sup, b) == before_b

        # B's process dies under A's traffic: A answers every ping; B comes back.
        pid_a, pid_b = lrs[a]["pid"], lrs[b]["pid"]
        flood: dict = {}

        def ping_a() -> None:
            flood["r"] = hosts[0].run(["ping", "-n", "-q", "-i", "0.01", "-c", "300", "-W", "1",
                                       "198.51.100.2"], check=False, timeout=60)

        t = threading.Thread(target=ping_a)
        t.start()
        time.sleep(0.5)
        os.kill(pid_b, signal.SIGKILL)
        t.join()
        assert " 0% packet loss" in flood["r"].stdout, flood["r"].stdout
        wait_until(lambda: sup.lrs()[b]["state"] == "running", 30, what="B restarted")
        rb = sup.lrs()[b]
        assert rb["pid"] != pid_b and rb["restarts"] == 1, rb
        assert rb["last_exit"] == "killed by signal 9", rb
        assert sup.lrs()[a]["pid"] == pid_a
        assert hosts[2].ping("198.51.100.2", count=3, timeout=5)
        assert f"{b}: exited (killed by signal 9)" in sup.log.read_text()

        # Upgrade B to another binary (a copy stands for a new build), hitless: a ping flood
        # through B loses nothing while the new process takes over from the old one.
        new = d / "linerate-new"
        shutil.copy2(linerate_bin, new)
        pid_b = sup.lrs()[b]["pid"]

        def ping_b() -> None:
            flood["b"] = hosts[2].run(["ping", "-n", "-q", "-i", "0.01", "-c", "300", "-W", "1",
                                       "198.51.100.2"], check=False, timeout=60)

        t = threading.Thread(target=ping_b)
        t.start()
        time.sleep(0.5)
        sup.cli("lr", "upgrade", b, "--binary", str(new))
        t.join()
        assert " 0% packet loss" in flood["b"].stdout, flood["b"].stdout
        rb = sup.lrs()[b]
        assert rb["binary"] == str(new) and rb["state"] == "running", rb
        assert rb["pid"] != pid_b and rb["handovers"] == 1 and rb["restarts"] == 1, rb
        assert rb["last_exit"] == "handed over", rb
        assert os.readlink(f"/proc/{rb['pid']}/exe") == str(new)
        groups = Path(f"/proc/{rb['pid']}/cgroup").read_text()
        assert f"/linerate/{b}\n" in groups, groups
        assert f"{b}: pid {pid_b} handed over to pid {rb['pid']}" in sup.log.read_text()
        assert hosts[2].ping("198.51.100.2", count=3, timeout=5)
        # --cold: stopped, then started (a new PID, no hand-over).
        sup.cli("lr", "restart", b, "--cold")
        rb2 = sup.lrs()[b]
        assert rb2["pid"] != rb["pid"] and rb2["handovers"] == 1 and rb2["state"] == "running"

        # A stopped stays stopped; started, it forwards again.
        out = sup.cli("lr", "stop", a).stdout
        assert "stopped" in out, out
        time.sleep(1.5)
        assert sup.lrs()[a]["state"] == "stopped" and sup.lrs()[a]["pid"] is None
        assert not hosts[0].ping("198.51.100.2", count=1, timeout=1)
        sup.cli("lr", "start", a)
        assert hosts[0].ping("198.51.100.2", count=3, timeout=5)
        # An LR that does not exist is named in the answer.
        r = sup.cli("lr", "stop", "nosuch", check=False)
        assert r.returncode != 0 and "no logical router `nosuch`" in r.stderr, r
    finally:
        rc = sup.stop()
    assert rc == 0, sup.log.read_text()
    assert a not in list_netns() and b not in list_netns()
    for dev in devs:
        assert Path(f"/sys/class/net/{dev}").exists(), dev
    for ctl in ("cpuset", "memory"):
        for name in (a, b):
            assert not Path(f"/sys/fs/cgroup/{ctl}/linerate/{name}").exists()


def test_a_device_given_to_two_lrs_is_refused_and_nothing_starts(linerate_bin, testbed):
    d = testbed.dir("lrs-bad")
    (d / "a.yaml").write_text(lr_config("eth-one", "eth-two", 0x0a))
    (d / "b.yaml").write_text(lr_config("eth-two", "eth-three", 0x0b))
    a, b = f"lrc{TAG}", f"lrd{TAG}"
    sup = Supervisor(linerate_bin, d, f"""\
supervisor: {{ share-cores: true, socket: run/supervisor.sock, run-dir: run }}
logical-routers:
  - {{ name: {a}, config: a.yaml }}
  - {{ name: {b}, config: b.yaml }}
""")
    assert sup.proc.wait(timeout=30) != 0
    out = sup.log.read_text()
    assert f"{d}/lrs.yaml:4:" in out and "logical-routers[1].config" in out, out
    assert "port p1 (device eth-two) is already" in out, out
    assert "nothing was applied" in out, out
    assert a not in list_netns() and b not in list_netns()
    assert not sup.sock.exists()


def test_xr1_two_lr_processes_keep_their_traffic_apart(linerate_bin, tmp_path):
    """XR-1 at CI scale: the supervisor runs LR1 and LR2 as processes, the tester drives their
    four shared-memory ports full mesh (IPv4 64 B, IPv6 78 B): the search finds a rate for the
    streams inside the LRs, then with every stream on, those lose nothing and the 16 streams
    across LRs bring 0 frames. Nothing is left behind (namespaces, shared-memory files)."""
    out = tmp_path / "out"
    r = subprocess.run([str(linerate_bin), "bench", "scenario", "XR-1", "--scale", "0.01",
                        "--seconds", "0.5", "--resolution", "5", "--quiet", "--out", str(out)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    rep = json.loads((out / "xr-1.json").read_text())
    assert rep["scenario"] == "XR-1" and rep["verdict"] == "pass", rep["checks"]
    checks = {c["name"]: c for c in rep["checks"]}
    inside = checks["64: streams inside a logical router lose nothing"]
    across = checks["64: streams across logical routers are blocked"]
    assert inside["pass"] and inside["measured"].startswith("0 of "), inside
    assert across["pass"] and across["measured"].startswith("0 of "), across
    lines = [n for n in rep["notes"] if n.startswith("64 separation: ")]
    assert len(lines) == 24, lines
    assert sum("(across LRs)" in n for n in lines) == 16
    for n in lines:
        sent = int(n.split("sent ")[1].split(",")[0])
        got = int(n.split("received ")[1].split(",")[0])
        assert sent > 0, n
        assert got == (0 if "(across LRs)" in n else sent), n
    assert any(n.startswith("lr1: pid ") and "0 restart(s)" in n for n in rep["notes"])
    assert not [n for n in list_netns() if n.startswith("xr1lr")]
    assert not [f for f in os.listdir("/dev/shm") if f.startswith("linerate-xr1-")]


def test_xr2b_lr1_carries_on_while_lr2_goes_and_comes_back(linerate_bin, tmp_path):
    """XR-2B at CI scale: LR1's streams at a fixed 2% of two 10 GbE ports (no search: the full
    run searches and takes half the throughput), quiet and then while LR2's
    process is stopped and started, its port p3, a worker and both its ports are taken out and
    put back: LR1 loses nothing and every action on LR2 was done inside the trial. (The p99
    latency check is reported, not asserted here: on a 2-vCPU machine the tester shares a CPU
    with LR2's restart.)"""
    out = tmp_path / "out"
    r = subprocess.run([str(linerate_bin), "bench", "scenario", "XR-2B", "--scale", "0.01",
                        "--seconds", "5", "--load", "2", "--quiet", "--out", str(out)],
                       capture_output=True, text=True, timeout=900)
    rep = json.loads((out / "xr-2b.json").read_text())
    assert rep["scenario"] == "XR-2B", r.stderr
    checks = {c["name"]: c for c in rep["checks"]}
    lost = checks["LR1 loses nothing while LR2 is disturbed"]
    assert lost["pass"] and lost["measured"].startswith("0 of "), lost
    for name in ("LR2's process (its control plane) stopped", "LR2's process started again",
                 "LR2: port p3 out of service and back", "LR2: a worker added and removed",
                 "LR2: every port out of service and back"):
        assert checks[name]["pass"], checks[name]
    assert "LR1's p99 latency unchanged while LR2 is disturbed" in checks
    keys = [row["key"] for row in rep["rows"]]
    assert keys == ["64 quiet", "64 LR2 disturbed"], keys
    assert any(n.startswith("lr2: ") and "0 restart(s)" in n for n in rep["notes"]), rep["notes"]
    assert not [n for n in list_netns() if n.startswith("xr1lr")]


def test_xr2a_lr1_loses_nothing_while_its_own_process_is_replaced(linerate_bin, tmp_path):
    """XR-2A at CI scale: LR1's streams at a fixed 2% of two 10 GbE ports, quiet and then while
    LR1's own process is replaced by a new one that takes over its tables and shared-memory
    ports (a hitless restart), then upgraded to a copy of the binary the same way: LR1 loses
    nothing, each hand-over is done inside the trial, and LR1 ends on its third process with 0
    restarts and 2 hand-overs. (The p99 check is reported, not asserted: see XR-2B's test.)"""
    out = tmp_path / "out"
    r = subprocess.run([str(linerate_bin), "bench", "scenario", "XR-2A", "--scale", "0.01",
                        "--seconds", "8", "--load", "2", "--quiet", "--out", str(out)],
                       capture_output=True, text=True, timeout=900)
    rep = json.loads((out / "xr-2a.json").read_text())
    assert rep["scenario"] == "XR-2A", r.stderr
    checks = {c["name"]: c for c in rep["checks"]}
    lost = checks["LR1 loses nothing while its own process is replaced"]
    assert lost["pass"] and lost["measured"].startswith("0 of "), lost
    for name in ("LR1's process replaced by a new one (hitless restart)",
                 "LR1 upgraded to another binary (hitless)"):
        assert checks[name]["pass"], checks[name]
        assert "frames waited" in checks[name]["measured"], checks[name]
    keys = [row["key"] for row in rep["rows"]]
    assert keys == ["64 quiet", "64 LR1 replaced"], keys
    lr1 = [n for n in rep["notes"] if n.startswith("lr1: ")]
    assert lr1 and "0 restart(s), 2 hand-over(s)" in lr1[0], lr1
    assert not [n for n in list_netns() if n.startswith("xr1lr")]
    assert not [f for f in os.listdir("/dev/shm") if f.startswith("linerate-xr1-")]


def test_xr2c_a_storm_on_lr1s_control_plane_leaves_every_lr_lossless(linerate_bin, tmp_path):
    """XR-2C at CI scale: both LRs' streams at a fixed 2%, quiet, then while LR1's control plane
    is stormed (snmpbulkwalk of its IF-MIB through snmpd in context lr1, and API requests),
    then LR1's alone with LR2 switched off: no LR loses a frame, the storm ran (walks and
    requests counted, none failed), LR2 was stopped. (The p99 checks are reported, not asserted:
    the storm shares LR1's CPU with its worker on this 2-vCPU machine.)"""
    from testbed import require_tools
    require_tools("snmpd", "snmpbulkwalk")
    out = tmp_path / "out"
    r = subprocess.run([str(linerate_bin), "bench", "scenario", "XR-2C", "--scale", "0.01",
                        "--seconds", "5", "--load", "2", "--quiet", "--out", str(out)],
                       capture_output=True, text=True, timeout=900)
    rep = json.loads((out / "xr-2c.json").read_text())
    assert rep["scenario"] == "XR-2C", r.stderr
    checks = {c["name"]: c for c in rep["checks"]}
    for lr in ("LR1", "LR2"):
        c = checks[f"{lr} loses nothing while LR1's control plane is stormed"]
        assert c["pass"] and c["measured"].startswith("0 of "), c
        assert f"{lr}'s p99 latency unchanged while LR1's control plane is stormed" in checks
    ran = checks["the storm on LR1's control plane ran"]
    m = ran["measured"]
    assert ran["pass"] and " objects, 0 failed)" in m and " API requests (0 failed)" in m, ran
    off = checks["LR2 switched off: LR1 loses nothing"]
    assert off["pass"] and "LR2 stopped" in off["measured"], off
    keys = [row["key"] for row in rep["rows"]]
    assert keys == ["64 quiet", "64 LR1's control plane stormed", "64 LR1 alone, LR2 off"], keys
    assert not [n for n in list_netns() if n.startswith("xr1lr")]
