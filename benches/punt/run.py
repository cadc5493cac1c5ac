#!/usr/bin/env python3
"""Punt latency: how long a frame for the router waits on its way up to the kernel and back.

    h1 (192.0.2.2) == d0 [linerate daemon, 1 worker, AF_PACKET] d1 == h2 (198.51.100.2)
    h3 (203.0.113.2) == d2 (the DUT namespace's kernel, 203.0.113.1)

Three ping series of --count echoes each, --interval apart, from the hosts' kernels:
- `router address`: h1 pings 192.0.2.1, Linerate's own address: worker -> punt ring -> punt
  thread -> TAP twin -> the kernel answers -> TAP -> inject ring -> worker -> port;
- `through`: h1 pings h2 through Linerate's data path (the worker alone);
- `kernel`: h3 pings the DUT namespace's kernel on a plain veth (no Linerate): the floor.
The punt path's cost is `router address` less `kernel`. Prints a table of min / avg / max and
mdev (ping's own summary), and writes it to --out as JSON.

    sudo benches/punt/run.py --count 500 --interval 0.01
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "system"))

from testbed import Testbed  # noqa: E402
from testbed.l2 import LinerateDaemon  # noqa: E402

CONFIG = """\
router: { workers: 1 }
ports:
  - { name: p0, driver: af_packet, device: d0 }
  - { name: p1, driver: af_packet, device: d1 }
interfaces:
  - { name: p0, port: p0, mac: "02:00:00:00:0a:01", ipv4: [192.0.2.1/24] }
  - { name: p1, port: p1, mac: "02:00:00:00:0b:01", ipv4: [198.51.100.1/24] }
control-plane:
  taps: true
"""


def rtt(ns, dst: str, count: int, interval: float) -> dict:
    out = ns.run(["ping", "-q", "-c", str(count), "-i", str(interval), "-W", "2", dst],
                 check=False, timeout=count * interval + 60).stdout
    m = re.search(r"= ([\d.]+)/([\d.]+)/([\d.]+)/([\d.]+) ms", out)
    lost = re.search(r"(\d+)% packet loss", out)
    if not m:
        raise RuntimeError(out)
    mn, avg, mx, mdev = (float(x) for x in m.groups())
    return {"min_ms": mn, "avg_ms": avg, "max_ms": mx, "mdev_ms": mdev,
            "loss_pct": int(lost.group(1)) if lost else None}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default=str(REPO / "target" / "release" / "linerate"))
    ap.add_argument("--count", type=int, default=500)
    ap.add_argument("--interval", type=float, default=0.01)
    ap.add_argument("--out", default="target/bench-punt")
    a = ap.parse_args()
    out = Path(a.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    with Testbed(out / "run") as tb:
        dut, (h1, h2, h3) = tb.hosts_around(3)
        dut.addr("d2", "203.0.113.1/24")
        h1.addr("eth0", "192.0.2.2/24")
        h2.addr("eth0", "198.51.100.2/24")
        h3.addr("eth0", "203.0.113.2/24")
        h1.route("default", "via", "192.0.2.1")
        h2.route("default", "via", "198.51.100.1")
        r = LinerateDaemon(Path(a.bin), dut, out / "dut", CONFIG.splitlines())
        try:
            # Neighbours resolved and the twins up before anything is timed.
            if not (h1.ping("198.51.100.2", count=3, timeout=3)
                    and h1.ping("192.0.2.1", count=3, timeout=3)):
                raise RuntimeError(r.log.read_text())
            rows = {
                "router address": rtt(h1, "192.0.2.1", a.count, a.interval),
                "through": rtt(h1, "198.51.100.2", a.count, a.interval),
                "kernel": rtt(h3, "203.0.113.1", a.count, a.interval),
            }
        finally:
            r.stop()
    print(f"| path ({a.count} echoes, {a.interval * 1000:g} ms apart) | min | avg | max | mdev "
          "| loss |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, v in rows.items():
        print(f"| {name} | {v['min_ms']:.3f} | {v['avg_ms']:.3f} | {v['max_ms']:.3f} "
              f"| {v['mdev_ms']:.3f} | {v['loss_pct']}% |")
    (out / "punt-latency.json").write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
