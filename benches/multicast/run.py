#!/usr/bin/env python3
"""IGMP snooping, side by side: the Linux bridge (its own querier) and a Linerate daemon
(1 worker), configured alike (groups nobody joined not flooded, fast leave on the receivers),
each measured by the same `linerate bench external --multicast` over the same veth topology
(tests/system/testbed/l2.py):

    tester namespace                    DUT namespace
    linerate bench external   t0 == d0  (a) Linux bridge  (b) Linerate
      --multicast ...         t1..tN == d1..dN   (receivers)

Per device and frame size: the zero-loss rate of --sources x --groups (S,G) from port 0, every
group joined (IGMPv2) by a host on each receiving port, every copy owed to every receiver; then
a probe group's join and leave times. Writes OUT/<device>/multicast.{md,json,svg} and
OUT/multicast.md (the side by side table).

    sudo benches/multicast/run.py --receivers 3 --groups 100 --sources 10 --sizes 64,1518

With --routed the devices are multicast routers under FRR's pimd instead (the kernel's own
multicast routing, and a Linerate daemon with pimd on its TAP twins: tests/system/testbed/
l3mcast.py), each trial after --warmup seconds of the same traffic (pimd makes each (S,G) from
its first packets):

    sudo benches/multicast/run.py --routed --receivers 3 --groups 100 --sources 10 --warmup 2
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "system"))

from testbed import Testbed  # noqa: E402
from testbed import l2  # noqa: E402
from testbed import l3mcast  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--devices", default="linux,linerate")
    ap.add_argument("--routed", action="store_true",
                    help="multicast routers under pimd instead of snooping bridges")
    ap.add_argument("--warmup", type=float, default=0.0,
                    help="seconds of traffic before each trial (pimd builds its routes)")
    ap.add_argument("--receivers", type=int, default=3)
    ap.add_argument("--groups", type=int, default=100)
    ap.add_argument("--sources", type=int, default=10)
    ap.add_argument("--sizes", default="64,1518")
    ap.add_argument("--speed", default="1g", help="nominal port speed (rates are % of it)")
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--resolution", type=float, default=2.0, help="percent")
    ap.add_argument("--core", type=int, default=0, help="the tester's CPU")
    ap.add_argument("--out", type=Path, default=REPO / "target" / "bench" / "multicast")
    a = ap.parse_args()
    bin_ = Path(os.environ.get("LINERATE_BIN", REPO / "target" / "release" / "linerate"))
    a.out.mkdir(parents=True, exist_ok=True)
    nports = a.receivers + 1
    results = []
    for dev in a.devices.split(","):
        row = {"device": dev, "error": None, "report": None}
        t0 = time.time()
        with Testbed(a.out / f"{dev}-run") as tb:
            try:
                tst, dut = l2.topology(tb, nports)
                if a.routed and dev == "linux":
                    d = l3mcast.LinuxMrouter(tb, dut, nports)
                elif a.routed and dev == "linerate":
                    d = l3mcast.LinerateMrouter(bin_, tb, dut, a.out / f"{dev}-run" / "dut",
                                                nports)
                elif dev == "linux":
                    d = l2.LinuxBridge(dut, nports, snooping=True)
                elif dev == "linerate":
                    d = l2.LinerateBridge(bin_, dut, a.out / f"{dev}-run" / "dut", nports,
                                          65_536, snooping=True)
                else:
                    raise ValueError(dev)
                f = a.out / f"{dev}-dut.yaml"
                f.write_text(l2.dut_yaml(nports))
                row["report"] = l2.bench_multicast(
                    bin_, tst, f, nports, a.out / dev, "--groups", str(a.groups),
                    "--sources", str(a.sources), "--sizes", a.sizes.replace(",", " "),
                    "--speed", a.speed, "--seconds", str(a.seconds),
                    "--resolution", str(a.resolution), "--core", str(a.core), "--quiet",
                    "--warmup", str(a.warmup),
                    *(["--leave-target-ms", "500"] if a.routed else []), timeout=3600)
                if a.routed:
                    row["routes"] = d.routes()
                d.stop()
            except Exception as e:  # noqa: BLE001 - reported per device
                row["error"] = f"{e}\n{traceback.format_exc()}"
        row["seconds"] = round(time.time() - t0, 1)
        results.append(row)
        print(f"{dev}: {'error' if row['error'] else 'done'} in {row['seconds']} s",
              file=sys.stderr, flush=True)
    md = table(results, a)
    print(md)
    (a.out / "multicast.md").write_text(md)
    return 0 if all(not r["error"] for r in results) else 1


def fmt(x) -> str:
    return "-" if x is None else f"{x:,.0f}"


def table(results: list[dict], a) -> str:
    s = ("| device | frame (B) | into the device (fps) | copies out (fps) | lost | "
         "tester-limited | latency avg / max (ms) | join / leave (ms, by send time) |\n"
         "|---|---:|---:|---:|---:|---|---:|---|\n")
    for r in results:
        dev = r["device"]
        if r["error"]:
            s += f"| {dev} | (did not run) | {r['error'].splitlines()[0][:200]} | | | | |\n"
            continue
        m = r["report"]["multicast"]
        jl = (f"{m['join_ms']:.2f} / {m['leave_ms']:.2f}"
              if m["join_ms"] is not None and m["leave_ms"] is not None else "not seen")
        if not m["rows"]:
            s += f"| {dev} | - | no rate passed | | | | | {jl} |\n"
        # The passing trial's latency: a device that queues what it cannot forward shows it
        # here (a deep receive ring lets a 1 s trial pass at a rate it does not sustain).
        lat = {str(x["key"]): x.get("latency") for x in r["report"].get("rows", [])}
        for row in m["rows"]:
            la = lat.get(str(row["size"]))
            la = f"{la['avg_ns'] / 1e6:.2f} / {la['max_ns'] / 1e6:.2f}" if la else "-"
            s += (f"| {dev} | {row['size']} | {fmt(row['input_fps'])} | {fmt(row['output_fps'])}"
                  f" | {row['lost']} | {'yes' if row['tester_limited'] else 'no'} | {la} | {jl} |\n")
    cpu = next((r["report"]["cores"]["cpu"] for r in results if r["report"]), "?")
    s += (f"\nCPU: {cpu}; 2 vCPUs shared by the tester (pinned to CPU {a.core}) and the "
          f"device; {a.receivers} receivers, {a.sources} sources x {a.groups} groups, "
          f"{a.seconds} s trials"
          + (f" after {a.warmup} s of warm-up traffic, routed under pimd (routes held at the "
             f"end: " + ", ".join(f"{r['device']} {r.get('routes', '?')}" for r in results)
             + ")" if a.routed else "")
          + "; verdicts: " + ", ".join(
              f"{r['device']} {(r['report'] or {}).get('verdict', 'n/a')}" for r in results)
          + "\n")
    return s


if __name__ == "__main__":
    sys.exit(main())
