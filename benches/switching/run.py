#!/usr/bin/env python3
"""RFC 2889 switching, side by side: the Linux bridge, a Linerate daemon (1 worker) and Open
vSwitch's userspace datapath, each measured by the same `linerate bench external --switching`
over the same veth topology (tests/system/testbed/l2.py):

    tester namespace                    DUT namespace
    linerate bench external   t0 == d0  (a) Linux bridge  (b) Linerate  (c) OVS netdev
      --switching ...         t1 == d1
                              t2 == d2

Per device: flooding (unknown unicast from port 1 reaches ports 0 and 2), the learning
capacity searched up to --macs, the learning rate of --rate-macs addresses, and the NDR of
64-byte known unicast (every port sending to the next). Linerate's table is sized
`limits: { macs: --linerate-macs }`; OVS keeps its default mac-table-size unless
--ovs-macs is given. Writes OUT/<device>/switching.{md,json,svg} and OUT/switching.md (the side
by side table) and OUT/switching.json.

    sudo benches/switching/run.py --macs 100000 --rate-macs 5000 --seconds 2

Needs root, a release build (target/release/linerate or LINERATE_BIN), and openvswitch-switch
for (c) (skipped, with the reason, when it does not run).
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--devices", default="linux,linerate,ovs")
    ap.add_argument("--procedures", default="flooding,capacity,rate,ndr")
    ap.add_argument("--macs", type=int, default=100_000, help="capacity search bound")
    ap.add_argument("--rate-macs", type=int, default=5_000)
    ap.add_argument("--flood-macs", type=int, default=1_000)
    ap.add_argument("--learn-fps", type=float, default=20_000)
    ap.add_argument("--linerate-macs", type=int, default=1_048_576)
    ap.add_argument("--ovs-macs", type=int, default=None)
    ap.add_argument("--speed", default="1g", help="nominal port speed (rates are % of it)")
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--resolution", type=float, default=1.0, help="percent")
    ap.add_argument("--core", type=int, default=0, help="the tester's CPU")
    ap.add_argument("--verbose", action="store_true", help="a line per trial")
    ap.add_argument("--out", type=Path, default=REPO / "target" / "bench" / "switching")
    a = ap.parse_args()
    bin_ = Path(os.environ.get("LINERATE_BIN", REPO / "target" / "release" / "linerate"))
    a.out.mkdir(parents=True, exist_ok=True)
    nports = 3
    results = []
    for dev in a.devices.split(","):
        row = {"device": dev, "error": None, "report": None}
        t0 = time.time()
        with Testbed(a.out / f"{dev}-run") as tb:
            try:
                tst, dut = l2.topology(tb, nports)
                if dev == "linux":
                    d = l2.LinuxBridge(dut, nports)
                elif dev == "linerate":
                    d = l2.LinerateBridge(bin_, dut, a.out / f"{dev}-run" / "dut", nports,
                                          a.linerate_macs)
                elif dev == "ovs":
                    why = l2.ovs_available()
                    if why:
                        raise RuntimeError(f"Open vSwitch: {why}")
                    d = l2.OvsNetdev(dut, a.out / f"{dev}-run" / "ovs", nports, a.ovs_macs)
                else:
                    raise ValueError(dev)
                f = a.out / f"{dev}-dut.yaml"
                f.write_text(l2.dut_yaml(nports))
                row["report"] = l2.bench(
                    bin_, tst, f, nports, a.out / dev, a.procedures, d.flush,
                    "--macs", str(a.macs), "--rate-macs", str(a.rate_macs),
                    "--flood-macs", str(a.flood_macs), "--learn-fps", str(a.learn_fps),
                    "--speed", a.speed, "--seconds", str(a.seconds),
                    "--resolution", str(a.resolution), "--core", str(a.core), *([] if a.verbose else ["--quiet"]),
                    timeout=3600)
                d.stop()
            except Exception as e:  # noqa: BLE001 - reported per device
                row["error"] = f"{e}\n{traceback.format_exc()}"
        row["seconds"] = round(time.time() - t0, 1)
        results.append(row)
        print(f"{dev}: {'error' if row['error'] else 'done'} in {row['seconds']} s",
              file=sys.stderr, flush=True)
    md = table(results, a)
    print(md)
    (a.out / "switching.md").write_text(md)
    (a.out / "switching.json").write_text(json.dumps(
        [{k: v for k, v in r.items() if k != "report" or v is None} |
         {"report": {k: v for k, v in (r["report"] or {}).items() if k != "_md"}}
         for r in results], indent=1))
    return 0 if all(not r["error"] for r in results) else 1


def fmt(x: float) -> str:
    return f"{x:,.0f}"


def table(results: list[dict], a) -> str:
    s = ("| device | procedure | result | tester-limited | scale |\n"
         "|---|---|---:|---|---|\n")
    for r in results:
        dev = r["device"]
        if r["error"]:
            s += f"| {dev} | (did not run) | {r['error'].splitlines()[0][:200]} | | |\n"
            continue
        rep = r["report"]
        yn = lambda b: "yes" if b else "no"  # noqa: E731
        if f := rep.get("flooding"):
            got = ", ".join(f"{n}: {fmt(x)}" for n, x in f["port_rx"])
            s += (f"| {dev} | flooding from {f['ingress_port']} | {got} | "
                  f"{yn(f['tester_limited'])} | {fmt(f['addresses'])} unknown addresses |\n")
        if k := rep.get("capacity"):
            s += (f"| {dev} | learning capacity | {fmt(k['addresses'])} addresses | "
                  f"{yn(k['tester_limited'])} | searched up to {fmt(k['max'])} at "
                  f"{fmt(k['learn_fps'])} fps, {len(k['steps'])} steps |\n")
        if k := rep.get("rate"):
            s += (f"| {dev} | learning rate | {fmt(k['achieved_fps'])} fps (offered "
                  f"{fmt(k['offered_fps'])}) | {yn(k['tester_limited'])} | "
                  f"{fmt(k['addresses'])} addresses, {len(k['steps'])} steps |\n")
        if n := rep.get("ndr"):
            s += (f"| {dev} | NDR {n['size']} B known unicast | {fmt(n['fps'])} fps | "
                  f"{yn(n['tester_limited'])} | 3 ports, all sending, {a.seconds} s trials |\n")
    cpu = next((r["report"]["cpu"] for r in results if r["report"]), "?")
    s += (f"\nCPU: {cpu}; 2 vCPUs shared by the tester (pinned to CPU {a.core}) and the "
          "device; verdicts: " + ", ".join(
              f"{r['device']} {(r['report'] or {}).get('verdict', 'n/a')}" for r in results)
          + "\n")
    return s


if __name__ == "__main__":
    sys.exit(main())
