"""`linerate daemon` on real Linux interfaces in a namespace of its own, between two hosts, and
a counted UDP stream through it: what the real-port tests (test_real_ports.py) and the hitless
restart tests (test_hitless_restart.py) share."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from testbed.netns import wait_until

R_MAC = ["02:00:00:00:0a:01", "02:00:00:00:0b:01"]


class Router:
    """`linerate daemon` inside namespace `ns`, and its CLI."""

    def __init__(self, bin_: Path, ns, workdir: Path, config: str) -> None:
        self.bin, self.ns, self.dir = bin_, ns, workdir
        self.dir.mkdir(parents=True, exist_ok=True)
        self.config = self.dir / "router.yaml"
        self.config.write_text(config)
        self.sock = self.dir / "api.sock"
        self.log = self.dir / "daemon.log"
        self.proc = ns.popen(
            [str(bin_), "daemon", "--config", str(self.config), "--state",
             str(self.dir / "state"), "--socket", str(self.sock)],
            log=self.log, name="linerate")
        wait_until(lambda: self.sock.exists() or not self.proc.running, 20,
                   what="the daemon's API socket")
        assert self.proc.running, self.log.read_text()

    def cli(self, *args: str) -> str:
        r = subprocess.run([str(self.bin), "--socket", str(self.sock), *args],
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, f"{args}: {r.stdout}{r.stderr}\n{self.log.read_text()}"
        return r.stdout

    def json(self, *args: str):
        return json.loads(self.cli(*args, "--json"))

    def drops(self) -> dict[str, int]:
        return {d["reason"]: d["count"] for d in self.json("show", "errors")}

    def stop(self) -> None:
        self.proc.stop()


def topology(testbed, driver: str = "af_packet"):
    """h1 -- [d0] linerate [d1] -- h2; returns (dut, h1, h2, config text)."""
    dut, h1, h2 = testbed.netns("dut"), testbed.netns("h1"), testbed.netns("h2")
    testbed.veth(h1, "eth0", dut, "d0")
    testbed.veth(h2, "eth0", dut, "d1")
    for d in ("d0", "d1"):
        dut.sysctl({f"net.ipv6.conf.{d}.disable_ipv6": 1})
        dut.up(d)
    dut.up("lo")
    h1.addr("eth0", "192.0.2.2/24", "2001:db8:1::2/64")
    h2.addr("eth0", "198.51.100.2/24", "2001:db8:2::2/64")
    h1.route("default", "via", "192.0.2.1")
    h1.ip("-6", "route", "add", "default", "via", "2001:db8:1::1")
    h2.route("default", "via", "198.51.100.1")
    h2.ip("-6", "route", "add", "default", "via", "2001:db8:2::1")
    cfg = f"""\
router: {{ workers: 1 }}
ports:
  - {{ name: p0, driver: {driver}, device: d0 }}
  - {{ name: p1, driver: {driver}, device: d1 }}
interfaces:
  - {{ name: p0, port: p0, mac: "{R_MAC[0]}", ipv4: [192.0.2.1/24], ipv6: ["2001:db8:1::1/64"] }}
  - {{ name: p1, port: p1, mac: "{R_MAC[1]}", ipv4: [198.51.100.1/24], ipv6: ["2001:db8:2::1/64"] }}
control-plane:
  taps: true
  neighbor: {{ reachable-time: 30, retransmit-ms: 200, retries: 5, hold: 8 }}
  fpm: {{ listen: "127.0.0.1:2620", stale-time: 60 }}
"""
    return dut, h1, h2, cfg


UDP_SEND = """
import socket, sys, time
dst, rate, secs = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
s = socket.socket(socket.AF_INET6 if ":" in dst else socket.AF_INET, socket.SOCK_DGRAM)
n, t0 = 0, time.monotonic()
while True:
    due = t0 + n / rate
    now = time.monotonic()
    if due - t0 >= secs:
        break
    if due > now:
        time.sleep(due - now)
    s.sendto(n.to_bytes(8, "big") + bytes(56), (dst, 9000))
    n += 1
print(n)
"""

UDP_COUNT = """
import socket, sys
s = socket.socket(socket.AF_INET6 if ":" in sys.argv[1] else socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
s.bind((sys.argv[1], 9000))
s.settimeout(float(sys.argv[2]))
seen = set()
try:
    while True:
        seen.add(int.from_bytes(s.recv(64)[:8], "big"))
        s.settimeout(3.0)
except socket.timeout:
    pass
print(len(seen))
"""


class UdpStream:
    """`rate` numbered UDP datagrams a second for `secs` from namespace `tx` to `dst` (an
    address of namespace `rx`), counted at `rx` (each number once) until `wait` s pass without
    one (at least `secs` plus a margin). Logs in `dir`."""

    def __init__(self, tx, rx, dst: str, rate: int, secs: float, dir: Path) -> None:
        self.sent_log, self.got_log = dir / "send.out", dir / "count.out"
        wait = secs + 20
        self.rx = rx.popen(["python3", "-c", UDP_COUNT, dst, str(wait)], name="udp-count",
                           log=self.got_log)
        time.sleep(0.3)
        self.tx = tx.popen(["python3", "-c", UDP_SEND, dst, str(rate), str(secs)],
                           name="udp-send", log=self.sent_log)

    def result(self, timeout: float) -> tuple[int, int]:
        """Waits for both ends; (sent, received)."""
        wait_until(lambda: not self.tx.running, timeout, what="the sender to finish")
        wait_until(lambda: not self.rx.running, timeout, what="the counter to finish")
        return (int(self.sent_log.read_text().split()[-1]),
                int(self.got_log.read_text().split()[-1]))
