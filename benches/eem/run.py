#!/usr/bin/env python3
"""The ME 6524's event-manager scenarios against a Linerate daemon, each writing its report
(OUT/me-NN.md, .json with a top-level `verdict` and its checks, .svg timeline):

- ME-16: a link goes down; the NOC's mailbox (aiosmtpd, a real SMTP server) gets a mail with the
  interface's counters and link diagnostics within 5 s.
- ME-17: a TTL=1 flood to the router's address drives its control-plane CPU over the threshold;
  a rule commits an interface policer and a lower punt rate; the CPU returns to normal.
- ME-18: background flows, then SQL Slammer from three hosts on a local subnet and from 500
  spoofed sources, twice with new random addresses: a flow rule names each infected host and
  commits a classifier + policer for it; uRPF drops the spoofed sources.

    sudo benches/eem/run.py --out target/eem            # ME-16, ME-17, ME-18
    sudo benches/eem/run.py --only me18 --seed 7         # the same addresses again
    sudo benches/eem/run.py --only me17 --threshold 40 --load 2
    sudo benches/eem/run.py --only fastpath --pairs 3   # forwarding cost with and without rules
    sudo benches/eem/run.py --only fastflows            # ... with and without flows rules

`fastpath`: the same fixed-load trial through a daemon without rules and with --rules metric
rules sampled every --poll-ms, alternated --pairs times; the DUT's own ns per frame (its
workers' busy time per frame) side by side, and each poll's cost (OUT/fastpath.json).
`fastflows`: the same with flow accounting on (a --cache-size cache), without rules and with
--flow-rules flows rules, which make the workers read their whole cache every --scan-ms
(OUT/fastflows.json).

Runs in network namespaces it makes and removes (tests/system/testbed).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "system"))

from testbed import Testbed  # noqa: E402
from testbed import eem, me18  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default=str(REPO / "target" / "release" / "linerate"))
    ap.add_argument("--out", default="target/eem")
    ap.add_argument("--only", choices=["me16", "me17", "me18", "fastpath", "fastflows"], action="append")
    ap.add_argument("--rules", type=int, default=200, help="fastpath: metric rules")
    ap.add_argument("--poll-ms", type=int, default=10, help="fastpath: their poll period")
    ap.add_argument("--pairs", type=int, default=3, help="fastpath: alternated pairs")
    ap.add_argument("--flow-rules", type=int, default=8,
                    help="fastflows: flows rules (the workers scan their caches for them)")
    ap.add_argument("--cache-size", type=int, default=2_000_000, help="fastflows: flow cache")
    ap.add_argument("--scan-ms", type=int, default=250, help="fastflows: one pass's time")
    ap.add_argument("--fast-load", type=float, default=0.5,
                    help="fastpath: %% of 10 Gbit/s in 64-byte frames (below the bed's limit)")
    ap.add_argument("--threshold", type=float, default=40.0,
                    help="ME-17: the rule's control-plane CPU threshold, %% (the seed: 90 on a "
                         "route processor of its own; this machine's control plane shares a CPU "
                         "with the worker)")
    ap.add_argument("--load", type=float, default=2.0,
                    help="ME-17: the flood, %% of 10 Gbit/s in 64-byte frames")
    ap.add_argument("--seconds", type=int, default=12, help="ME-17: the flood's length")
    ap.add_argument("--seed", type=int, default=None,
                    help="ME-18: random seed for the attack addresses (default: new each run)")
    ap.add_argument("--rounds", type=int, default=2, help="ME-18: attacks, each from new "
                    "addresses")
    a = ap.parse_args()
    out = Path(a.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    which = a.only or ["me16", "me17", "me18"]
    verdicts = {}
    for name in which:
        if name in ("fastpath", "fastflows"):
            flows = name == "fastflows"
            runs = []
            for i in range(a.pairs):
                for rules in (0, a.flow_rules if flows else a.rules):
                    with Testbed(out / f"run-{name}-{i}-{rules}") as tb:
                        x = eem.fastpath_once(Path(a.bin), tb, out / f"run-{name}-{i}-{rules}" /
                                              "work", rules, a.poll_ms, a.fast_load, 5,
                                              flows=flows, cache_size=a.cache_size,
                                              scan_ms=a.scan_ms)
                    runs.append(x)
                    print(f"  pair {i}: {rules} rules: {x['dut_busy_ns_per_frame']} ns/frame, "
                          f"lost {x['lost']} of {x['tx']}, poll {x['last_poll_us']} us "
                          f"(max {x['max_poll_us']})")
            (out / f"{name}.json").write_text(json.dumps(runs, indent=2) + "\n")
            continue
        with Testbed(out / f"run-{name}") as tb:
            if name == "me16":
                rep = eem.me16(Path(a.bin), tb, out / "run-me16" / "work")
                eem.write_report(rep, out / "me-16", limit_ms=5000)
            elif name == "me18":
                rep = me18.me18(Path(a.bin), tb, out / "run-me18" / "work", seed=a.seed,
                                rounds=a.rounds)
                eem.write_report(rep, out / "me-18", limit_ms=2000)
            else:
                rep = eem.me17(Path(a.bin), tb, out / "run-me17" / "work", load_pct=a.load,
                               seconds=a.seconds, threshold=a.threshold)
                fired = rep["ours"]["fired_s_after_flood"] or 0
                eem.write_report(rep, out / "me-17", limit_ms=fired * 1000 + 1000)
        verdicts[rep["scenario"]] = rep["verdict"]
        print(f"{rep['scenario']}: {rep['verdict']}")
        for c in rep["checks"]:
            print(f"  {'ok ' if c['pass'] else 'NO '} {c['name']}: {c['measured']} "
                  f"(expected {c['expected']})")
    (out / "eem.json").write_text(json.dumps(
        {"verdict": "pass" if all(v == "pass" for v in verdicts.values()) else "fail",
         "scenarios": verdicts}, indent=2) + "\n")
    return 0 if all(v == "pass" for v in verdicts.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
