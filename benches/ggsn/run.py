#!/usr/bin/env python3
"""GG-1 through OsmoGGSN and through Linerate, side by side: one topology, one tester.

    tester namespace                              DUT namespace
    [linerate bench external --gtp]  t0 ==veth== d0  (Gn, 10.0.0.1)  (o) osmo-ggsn, gtpu-mode
      pinned to CPU 0, GTP-C from                                        tun, the kernel routing
      10.0.0.3 (t0's own address)    t1 ==veth== d1  (Gi, 10.1.0.1)  (l) linerate daemon's GGSN

Each GGSN in turn gets the same run of the tester's SGSN emulator and user traffic: a search for
the highest create rate with 99.999% of the requests accepted (contexts created, then deleted, at
each rate tried), then --contexts contexts created at the rate found (or --create-rate), then the
no-drop rate (RFC 2544, zero loss) both ways through them per frame size (default 64 and 1460 B:
the user's packets; the tunnel adds 36 bytes on Gn), then every context deleted. The GGSN's
work is steered to the last CPU (osmo-ggsn pinned there with RPS for the kernel's part, or
Linerate's worker pinned there), the tester's to CPU 0: so each figure is one core's.

Printed as a Markdown table with Linerate's ratio to OsmoGGSN; also written to OUT/ggsn.md and
OUT/ggsn.json, with each run's own GG-1 report (gg-1.md, .json, .svg) under OUT/run-KEY.

    sudo benches/ggsn/run.py --quick    # 1,000 contexts (and per search step), 1 s trials
    sudo benches/ggsn/run.py --full     # the same contexts, 10 s trials, 2% resolution
    sudo benches/ggsn/run.py --only l --contexts 384000 --create-search 100000   # GG-1's scale
    sudo benches/ggsn/run.py --gg2      # GG-2: two Linerate GGSNs, 1024 B and 1460 B

OsmoGGSN holds at most 1,024 contexts (its GTP library's table; the 1,025th Create is refused
with "no memory available"), so the side by side runs 1,000 contexts through each; Linerate
alone runs at the seed's scale.

Needs root, osmo-ggsn, and a release build of linerate (target/release/linerate or LINERATE_BIN).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "system"))

from testbed import Testbed, wait_until
from testbed.cpus import boosted, napi_on_core, rps
from testbed.ggsn import DUT_YAML, GG2_DUT_YAML, osmo_ggsn_config

LR_MAC = ["02:00:00:00:0d:01", "02:00:00:00:0d:02"]


LABELS = {"o": "OsmoGGSN (gtpu-mode tun)", "l": "Linerate"}


def linerate_config(core: int, driver: str, contexts: int, net: int = 0) -> str:
    """A Linerate GGSN on d0 (Gn, 10.NET.0.1) and d1 (Gi, 10.NET+1.0.1), its table room for
    twice `contexts` (the most held at once, a search step's or the run's)."""
    return f"""\
router: {{ workers: 1, cores: [{core}] }}
limits: {{ gtp-contexts: {max(65_536, contexts * 2)} }}
ports:
  - {{ name: gn, driver: {driver}, device: d0 }}
  - {{ name: gi, driver: {driver}, device: d1 }}
interfaces:
  - {{ name: gn, port: gn, mac: "{LR_MAC[0]}", ipv4: [10.{net}.0.1/24] }}
  - {{ name: gi, port: gi, mac: "{LR_MAC[1]}", ipv4: [10.{net + 1}.0.1/24] }}
ggsn:
  address: 10.{net}.0.1
  create-rate: 1000000
  echo-interval: 0
  apns:
    - {{ name: internet, ipv4-pool: 10.64.0.0/12 }}
control-plane: {{ taps: true }}
"""


class Bench:
    def __init__(self, tb: Testbed, bin_: Path, out: Path, args) -> None:
        self.tb, self.bin, self.out, self.args = tb, bin_, out, args
        self.tst, self.dut = tb.netns("tester"), tb.netns("dut")
        tb.veth(self.tst, "t0", self.dut, "d0", queues=2)
        tb.veth(self.tst, "t1", self.dut, "d1", queues=2)
        ncpu = os.cpu_count() or 1
        self.tester_core, self.dut_core = 0, ncpu - 1
        for ns, devs in ((self.tst, ("t0", "t1")), (self.dut, ("d0", "d1"))):
            ns.sysctl({f"net.ipv6.conf.{d}.disable_ipv6": 1 for d in devs})
            for d in devs:
                ns.up(d)
        self.dut.up("lo")
        # The SGSN's signalling address: the tester kernel's own, for its UDP socket.
        self.tst.addr("t0", "10.0.0.3/24")
        if ncpu > 1:
            rps(self.tst, ("t0", "t1"), self.tester_core)
            rps(self.dut, ("d0", "d1"), self.dut_core)
        (out / "dut.yaml").write_text(DUT_YAML)

    def osmo(self):
        d = self.dut
        d.addr("d0", "10.0.0.1/24")
        d.addr("d1", "10.1.0.1/24")
        d.sysctl({"net.ipv4.ip_forward": 1, "net.ipv4.conf.all.rp_filter": 0,
                  "net.ipv4.conf.default.rp_filter": 0, "net.ipv4.conf.d0.rp_filter": 0,
                  "net.ipv4.conf.d1.rp_filter": 0})
        wd = self.out / "osmo-ggsn"
        (wd / "state").mkdir(parents=True, exist_ok=True)
        cfg = wd / "osmo-ggsn.cfg"
        cfg.write_text(osmo_ggsn_config(wd / "state"))
        proc = d.popen(["taskset", "-c", str(self.dut_core),
                        *boosted(["osmo-ggsn", "-c", str(cfg)], self.args.boost)],
                       log=wd / "out.log", name="osmo-ggsn")
        wait_until(lambda: "10.0.0.1:2123" in d.run(["ss", "-uln"]).stdout or not proc.running,
                   10, what="osmo-ggsn to bind GTP-C")
        if not proc.running:
            raise RuntimeError((wd / "out.log").read_text()[-3000:])
        rps(d, ("tun4",), self.dut_core)
        return proc, None

    def osmo_off(self) -> None:
        d = self.dut
        d.ip("addr", "flush", "dev", "d0")
        d.ip("addr", "flush", "dev", "d1")
        d.ip("neigh", "flush", "all")
        d.sysctl({"net.ipv4.ip_forward": 0})

    def linerate(self):
        wd = self.out / "linerate"
        wd.mkdir(parents=True, exist_ok=True)
        cfg = wd / "router.yaml"
        cfg.write_text(linerate_config(self.dut_core, self.args.driver,
                                       max(self.args.contexts, self.args.create_search)))
        sock, log = wd / "api.sock", wd / "daemon.log"
        proc = self.dut.popen(boosted([str(self.bin), "daemon", "--config", str(cfg),
                                       "--no-state", "--socket", str(sock)], self.args.boost),
                              log=log, name="linerate")
        wait_until(lambda: sock.exists() or not proc.running, 60, what="the daemon's API socket")
        if not proc.running:
            raise RuntimeError(f"linerate daemon exited:\n{log.read_text()[-3000:]}")
        if self.args.driver == "af_xdp":
            napi_on_core(self.dut, ("d0", "d1"), self.dut_core)
        return proc, sock

    def tester(self, key: str, api: Path | None) -> dict:
        """GG-1 from the tester namespace; its JSON report."""
        a = self.args
        out = self.out / f"run-{key}"
        argv = [str(self.bin), "bench", "external", "--dut", str(self.out / "dut.yaml"),
                "--port", "gn=t0", "--port", "gi=t1", "--core", str(self.tester_core),
                "--gtp", "--sgsn", "10.0.0.3", "--contexts", str(a.contexts),
                "--create-rate", str(a.create_rate), "--seconds", str(a.seconds),
                "--resolution", str(a.resolution), "--out", str(out)]
        if a.create_search:
            argv += ["--create-search", str(a.create_search),
                     "--create-search-max", str(a.search_max)]
        for s in a.sizes.split(","):
            argv += ["--sizes", s]
        if api:
            argv += ["--dut-api", str(api)]
        if a.boost:
            argv = ["setsid", "-w", *boosted(argv, True)]
        p = self.tst.run(argv, check=False, timeout=a.timeout)
        (self.out / f"run-{key}.log").write_text(p.stdout + p.stderr)
        if p.returncode != 0:
            lines = (p.stderr or p.stdout or "failed").strip().splitlines()
            raise RuntimeError(lines[-1] if lines else "failed")
        return json.loads((out / "gg-1.json").read_text())

    def run(self, key: str) -> dict:
        t0 = time.monotonic()
        print(f"({key}) {LABELS[key]}", file=sys.stderr)
        proc, api = self.osmo() if key == "o" else self.linerate()
        try:
            rep = self.tester(key, api)
        except (RuntimeError, TimeoutError) as e:
            return {"key": key, "error": str(e)}
        finally:
            proc.stop()
            if key == "o":
                self.osmo_off()
        print(f"  ({key}) {time.monotonic() - t0:.0f} s, verdict {rep['verdict']}", file=sys.stderr)
        return {"key": key, "report": rep}


def gg2(tb: Testbed, bin_: Path, args) -> dict:
    """GG-2: two Linerate GGSNs in namespaces of their own, each on its own veth pair, one
    tester: 1024 B through A, 1460 B through B, each alone and then both. Their workers go on
    the last two CPUs when the machine has three or more, else both on the last one (then they
    share a core, and together can only be about half of alone)."""
    out = args.out
    tst = tb.netns("tester")
    ncpu = os.cpu_count() or 1
    cores = [ncpu - 1, ncpu - 2] if ncpu >= 3 else [ncpu - 1, ncpu - 1]
    procs = []
    try:
        for i, name in enumerate("ab"):
            dut = tb.netns(f"ggsn_{name}")
            t = (f"t{2 * i}", f"t{2 * i + 1}")
            tb.veth(tst, t[0], dut, "d0", queues=2)
            tb.veth(tst, t[1], dut, "d1", queues=2)
            tst.sysctl({f"net.ipv6.conf.{d}.disable_ipv6": 1 for d in t})
            dut.sysctl({f"net.ipv6.conf.{d}.disable_ipv6": 1 for d in ("d0", "d1")})
            for d in t:
                tst.up(d)
            for d in ("d0", "d1"):
                dut.up(d)
            dut.up("lo")
            tst.addr(t[0], f"10.{2 * i}.0.3/24")
            if ncpu > 1:
                rps(tst, t, 0)
                rps(dut, ("d0", "d1"), cores[i])
            wd = out / f"linerate-{name}"
            wd.mkdir(parents=True, exist_ok=True)
            cfg = wd / "router.yaml"
            cfg.write_text(linerate_config(cores[i], args.driver, args.contexts, net=2 * i))
            sock, log = wd / "api.sock", wd / "daemon.log"
            proc = dut.popen(boosted([str(bin_), "daemon", "--config", str(cfg), "--no-state",
                                      "--socket", str(sock)], args.boost),
                             log=log, name=f"linerate-{name}")
            procs.append(proc)
            wait_until(lambda: sock.exists() or not proc.running, 60,
                       what="the daemon's API socket")
            if not proc.running:
                raise RuntimeError(f"linerate daemon {name} exited:\n{log.read_text()[-3000:]}")
        (out / "dut.yaml").write_text(GG2_DUT_YAML)
        argv = [str(bin_), "bench", "external", "--dut", str(out / "dut.yaml"),
                "--port", "gna=t0", "--port", "gia=t1", "--port", "gnb=t2", "--port", "gib=t3",
                "--core", "0", "--gtp", "--sgsn", "10.0.0.3", "--sgsn", "10.2.0.3",
                "--contexts", str(args.contexts), "--create-rate", str(args.create_rate),
                "--sizes", "1024", "--second-size", "1460", "--alone",
                "--seconds", str(args.seconds), "--resolution", str(args.resolution),
                "--out", str(out / "run-gg2")]
        if args.boost:
            argv = ["setsid", "-w", *boosted(argv, True)]
        p = tst.run(argv, check=False, timeout=args.timeout)
        (out / "run-gg2.log").write_text(p.stdout + p.stderr)
        if p.returncode != 0:
            raise RuntimeError((p.stderr or p.stdout or "failed").strip().splitlines()[-1])
        rep = json.loads((out / "run-gg2" / "gg-2.json").read_text())
        rep["_cores"] = cores
        return rep
    finally:
        for proc in procs:
            proc.stop()


def figures(r: dict) -> dict:
    """What the table shows of one GGSN's GG-1 report."""
    rep = r.get("report")
    if not rep:
        return {}
    g = rep["gtp"]
    f = {"best_rate": g.get("best_rate"), "create_per_s": g["create"]["accepted_per_s"],
         "created": g["create"]["accepted"], "requested": g["create"]["requests"],
         "verdict": rep["verdict"]}
    for row in rep["rows"]:
        key = row["key"].lower()
        best = next((t for t in row["trials"] if t["pass"] and t["load"] == row["throughput_load"]),
                    None)
        cpu = (best or {}).get("cpu") or {}
        f[key] = {
            "ndr_fps": row["throughput_fps"],
            "tester_limited": row["tester_limited"],
            "lat_avg_us": (row["latency"] or {}).get("avg_ns", 0) / 1e3 if row["latency"] else None,
            "dut_core_ns": cpu.get("dut_cores_ns_per_frame"),
        }
    return f


def fmt(v, digits: int = 0) -> str:
    return "-" if v is None else f"{v:,.{digits}f}"


def ratio(v, base) -> str:
    return "-" if not v or not base else f"{v / base:.2f}"


def table(results: list[dict], sizes: list[str]) -> str:
    figs = {r["key"]: figures(r) for r in results}
    base = figs.get("o", {})
    md = ("| GGSN | create rate found (/s, 99.999%) | ratio | " +
          " | ".join(f"{s} B NDR (pps) | ratio | {s} B latency avg (us) | {s} B device core "
                     f"(ns/pkt)" for s in sizes) + " | verdict |\n")
    md += "|---|---:|---:|" + "---:|---:|---:|---:|" * len(sizes) + "---|\n"
    for r in results:
        f = figs[r["key"]]
        if not f:
            md += f"| {LABELS[r['key']]} | error: {r.get('error', '?')} |\n"
            continue
        cells = [LABELS[r["key"]], fmt(f["best_rate"]), ratio(f["best_rate"], base.get("best_rate"))]
        for s in sizes:
            x, b = f.get(s.lower(), {}), base.get(s.lower(), {})
            ndr = fmt(x.get("ndr_fps")) + (" (tester-bound)" if x.get("tester_limited") else "")
            cells += [ndr, ratio(x.get("ndr_fps"), b.get("ndr_fps")), fmt(x.get("lat_avg_us"), 1),
                      fmt(x.get("dut_core_ns"))]
        cells.append(f["verdict"])
        md += "| " + " | ".join(cells) + " |\n"
    return md


def find_bin() -> Path:
    env = os.environ.get("LINERATE_BIN")
    return Path(env) if env else REPO / "target" / "release" / "linerate"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true",
                      help="1,000 contexts, 1 s trials, 10%% resolution (the default)")
    mode.add_argument("--full", action="store_true",
                      help="1,000 contexts, 10 s trials, 2%% resolution")
    ap.add_argument("--contexts", type=int, default=1000,
                    help="contexts held during the traffic (OsmoGGSN holds at most 1,024)")
    ap.add_argument("--create-search", type=int, default=1000,
                    help="contexts per step of the create rate search (0: no search)")
    ap.add_argument("--search-max", type=float, default=1_000_000, help="the search's top rate")
    ap.add_argument("--create-rate", type=float, default=600.0,
                    help="rate the held contexts are created at (the seed's 600/s)")
    ap.add_argument("--sizes", default="64,1460", help="frame sizes, comma separated")
    ap.add_argument("--seconds", type=float, help="seconds per trial")
    ap.add_argument("--resolution", type=float, help="NDR search resolution, percent")
    ap.add_argument("--only", default="ol", help="o: OsmoGGSN, l: Linerate")
    ap.add_argument("--driver", choices=["af_packet", "af_xdp"], default="af_packet",
                    help="Linerate's port driver")
    ap.add_argument("--gg2", action="store_true",
                    help="GG-2 instead: two Linerate GGSNs, 1024 B through one and 1460 B "
                         "through the other, each alone and then together")
    ap.add_argument("--no-boost", dest="boost", action="store_false")
    ap.add_argument("--out", type=Path, default=REPO / "target" / "bench" / "ggsn")
    ap.add_argument("--timeout", type=float, default=7200, help="seconds per tester run")
    args = ap.parse_args(argv)
    full = args.full
    args.seconds = args.seconds or (10.0 if full else 1.0)
    args.resolution = args.resolution or (2.0 if full else 10.0)
    if os.geteuid() != 0:
        print("needs root (network namespaces)", file=sys.stderr)
        return 2
    bin_ = find_bin()
    if not bin_.is_file():
        print(f"{bin_}: no linerate binary (cargo build --release -p linerate)", file=sys.stderr)
        return 2
    if "o" in args.only and not args.gg2 and not shutil.which("osmo-ggsn"):
        print("osmo-ggsn not found (apt-get install osmo-ggsn)", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if args.gg2:
        with Testbed(args.out) as tb:
            rep = gg2(tb, bin_, args)
        md = (args.out / "run-gg2" / "gg-2.md").read_text()
        print(md)
        print(f"GGSN workers on CPUs {rep['_cores']} ({os.cpu_count()} CPUs); verdict "
              f"{rep['verdict']}")
        return 0
    results = []
    with Testbed(args.out) as tb:
        b = Bench(tb, bin_, args.out, args)
        for key in args.only:
            results.append(b.run(key))
    sizes = args.sizes.split(",")
    cpu = next((l.split(":", 1)[1].strip() for l in Path("/proc/cpuinfo").read_text().splitlines()
                if l.startswith("model name")), "?")
    md = (f"GG-1, OsmoGGSN and Linerate side by side: {args.contexts:,} contexts created at "
          f"{args.create_rate:,.0f}/s after a create rate search of {args.create_search:,} "
          f"contexts per step; NDR both ways, {args.seconds} s trials, resolution "
          f"{args.resolution}%; {os.cpu_count()} CPUs ({cpu}); tester on CPU 0, the GGSN on CPU "
          f"{b.dut_core}; Linerate's ports: {args.driver}\n\n")
    md += table(results, sizes)
    md += ("\nSizes are the user's packets (the tunnel adds 36 bytes on Gn); NDR counts both "
           "directions; device core = the busy time of the CPUs off the tester's core per packet "
           "(where each GGSN's work is steered); a tester-bound rate is the tester's limit, not "
           "the GGSN's.\n")
    print(md)
    (args.out / "ggsn.md").write_text(md)
    (args.out / "ggsn.json").write_text(json.dumps(
        {"contexts": args.contexts, "create_rate": args.create_rate,
         "create_search": args.create_search, "seconds": args.seconds,
         "results": [{"key": r["key"], "label": LABELS[r["key"]], "figures": figures(r),
                      "error": r.get("error")} for r in results]}, indent=2))
    return 0 if all("report" in r for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
