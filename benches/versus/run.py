#!/usr/bin/env python3
"""Linux kernel forwarding and Linerate side by side: one topology, one tester, five devices.

    tester namespace                         DUT namespace
    [linerate bench external]  t0 ==veth== d0   (a) kernel forwarding
      pinned to CPU 0          t1 ==veth== d1   (b) kernel + N linear nftables rules
                                                (c) kernel + the same N entries as one set
                                                (d) linerate daemon (--driver on d0, d1)
                                                (e) linerate + the same N entries as an ACL

Each device in turn gets the same `linerate bench external` (pair pattern, 198.18.0.2 <->
198.18.1.2, UDP 1024 -> 5000) from the same tester namespace over the same veths (2 queues
each). The device's work is steered to the last CPU (RPS on d0/d1 for the kernel, the worker
pinned there for Linerate) and the tester's receive work to CPU 0 (RPS on t0/t1), so the
machine's CPU splits into the tester's and the device's. The N deny entries mirror XR-5's lists:
`deny udp src host A sport P dst host B dport Q`, seeded, no two mergeable, half between the
streams' addresses on ports they never use, half between addresses nobody uses; the traffic
matches only the final accept/permit.

Per device: the NDR (RFC 2544 zero-loss throughput) at 64 B (and IMIX with --imix), the CPU per
forwarded frame of the whole machine, of the tester, of the device (machine minus tester) and,
for Linerate, of its workers' busy time, with ratios to the kernel's figures; also the
machine's busy cores with no traffic (other work on the machine, and a polling router's idle
core). Printed as a Markdown table; also written to OUT/versus.md and OUT/versus.json.

    sudo benches/versus/run.py --quick      # CI: 1,000 rules, 1 s trials, 10% resolution
    sudo benches/versus/run.py --full       # 10,000 rules, 10 s trials, 2% resolution

Needs root, nftables, and a release build of linerate (target/release/linerate or LINERATE_BIN).
Absolute rates on a 2-vCPU VM are low (a veth costs about a microsecond per frame); the point is
the ratios, measured in one run on one machine.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "system"))

from testbed import Testbed, wait_until
from testbed.cpus import boosted, busy_cores, napi_on_core, rps

# The tester's side of each link, and the device's.
T_ADDR = ["198.18.0.2", "198.18.1.2"]
T_MAC = ["02:00:00:00:00:02", "02:00:00:00:01:02"]
D_ADDR = ["198.18.0.1", "198.18.1.1"]
LR_MAC = ["02:00:00:00:0a:01", "02:00:00:00:0b:01"]
SPORT, DPORT = 1024, 5000
# 64-byte frames/s one 10 Gbit/s port carries at 100% (what `--load` is a percentage of).
LINE_RATE_64 = 10e9 / ((64 + 20) * 8)

# The device as the tester sees it: interface MACs left out (the tester resolves them, so one
# file serves every device), the tester's addresses as neighbours.
DUT_YAML = f"""\
ports:
  - {{ name: p0, driver: af_packet, device: d0 }}
  - {{ name: p1, driver: af_packet, device: d1 }}
interfaces:
  - {{ name: p0, port: p0, ipv4: [{D_ADDR[0]}/24] }}
  - {{ name: p1, port: p1, ipv4: [{D_ADDR[1]}/24] }}
neighbors:
  - {{ interface: p0, ip: {T_ADDR[0]}, mac: "{T_MAC[0]}" }}
  - {{ interface: p1, ip: {T_ADDR[1]}, mac: "{T_MAC[1]}" }}
"""

LABELS = {
    "a": "kernel forwarding",
    "b": "kernel + {n} nftables rules",
    "c": "kernel + {n}-entry nftables set",
    "d": "Linerate",
    "e": "Linerate + {n}-line ACL",
}


def deny_tuples(n: int, seed: int = 0x5834_0000) -> list[tuple[str, int, str, int]]:
    """XR-5's shape: `n` UDP deny entries (src, sport, dst, dport), none equal to another or
    one step from it in any field (no two could merge into a range); half between the streams'
    addresses on ports the streams never use (they send 1024 -> 5000), half between 140/8 and
    141/8, which nobody uses here."""
    rng = random.Random(seed)
    streams = [(T_ADDR[0], T_ADDR[1]), (T_ADDR[1], T_ADDR[0])]
    seen: set[tuple[int, int, int, int]] = set()
    out = []
    while len(out) < n:
        sport, dport = rng.randint(10_000, 65_535), rng.randint(10_000, 65_535)
        if len(out) % 2 == 0:
            s, d = streams[rng.randrange(2)]
            a, b = int(ipaddress.ip_address(s)), int(ipaddress.ip_address(d))
        else:
            a = 0x8C00_0000 | rng.getrandbits(24)
            b = 0x8D00_0000 | rng.getrandbits(24)
        t = (a, sport, b, dport)
        near = [t, (a + 1, sport, b, dport), (a - 1, sport, b, dport),
                (a, sport + 1, b, dport), (a, sport - 1, b, dport),
                (a, sport, b + 1, dport), (a, sport, b - 1, dport),
                (a, sport, b, dport + 1), (a, sport, b, dport - 1)]
        if any(x in seen for x in near):
            continue
        seen.add(t)
        out.append((str(ipaddress.ip_address(a)), sport, str(ipaddress.ip_address(b)), dport))
    return out


def nft_linear(tuples) -> str:
    rules = "".join(f"    ip saddr {a} udp sport {p} ip daddr {b} udp dport {q} drop\n"
                    for a, p, b, q in tuples)
    return ("table ip lrbench {\n  chain forward_filter {\n"
            "    type filter hook forward priority 0; policy accept;\n"
            f"{rules}    accept\n  }}\n}}\n")


def nft_set(tuples) -> str:
    elems = ",\n      ".join(f"{a} . {p} . {b} . {q}" for a, p, b, q in tuples)
    return ("table ip lrbench {\n"
            "  set deny {\n"
            "    type ipv4_addr . inet_service . ipv4_addr . inet_service\n"
            f"    elements = {{\n      {elems}\n    }}\n  }}\n"
            "  chain forward_filter {\n"
            "    type filter hook forward priority 0; policy accept;\n"
            "    ip saddr . udp sport . ip daddr . udp dport @deny drop\n"
            "    accept\n  }\n}\n")


def acl_lines(tuples) -> str:
    lines = "".join(f"deny udp src host {a} sport {p} dst host {b} dport {q}\n"
                    for a, p, b, q in tuples)
    return "# versus: generated by benches/versus/run.py (seeded, XR-5's shape)\n" + lines + \
        "permit\n"


def linerate_config(core: int, acl: bool, driver: str = "af_packet",
                    rx_ring: str = "blocks") -> str:
    bind = ", acl-in: VERSUS" if acl else ""
    ring = f", rx-ring: {rx_ring}" if driver == "af_packet" else ""
    acls = "acls:\n  - { name: VERSUS, family: ipv4, file: versus.acl }\n" if acl else ""
    return f"""\
router: {{ workers: 1, cores: [{core}] }}
ports:
  - {{ name: p0, driver: {driver}, device: d0{ring} }}
  - {{ name: p1, driver: {driver}, device: d1{ring} }}
{acls}interfaces:
  - {{ name: p0, port: p0, mac: "{LR_MAC[0]}", ipv4: [{D_ADDR[0]}/24]{bind} }}
  - {{ name: p1, port: p1, mac: "{LR_MAC[1]}", ipv4: [{D_ADDR[1]}/24]{bind} }}
"""


@dataclass
class Result:
    key: str
    label: str
    rows: dict = field(default_factory=dict)  # size -> figures
    background: float = 0.0
    background_after: float = 0.0
    error: str = ""
    # Where the device dropped, by its own counters, over the whole run (failed trials and
    # overload included): Linerate's `show errors`; the kernel's veth and backlog counters.
    drops: dict = field(default_factory=dict)
    # The tester's latency with no device, measured by its run (external.latency_floor).
    floor: dict | None = None


class Bench:
    def __init__(self, tb: Testbed, bin_: Path, out: Path, args) -> None:
        self.tb, self.bin, self.out, self.args = tb, bin_, out, args
        self.tst = tb.netns("tester")
        self.dut = tb.netns("dut")
        tb.veth(self.tst, "t0", self.dut, "d0", queues=2)
        tb.veth(self.tst, "t1", self.dut, "d1", queues=2)
        ncpu = os.cpu_count() or 1
        self.tester_core = 0
        self.dut_core = ncpu - 1
        for ns, devs in ((self.tst, ("t0", "t1")), (self.dut, ("d0", "d1"))):
            ns.sysctl({f"net.ipv6.conf.{d}.disable_ipv6": 1 for d in devs})
        if ncpu > 1:
            rps(self.tst, ("t0", "t1"), self.tester_core)
            rps(self.dut, ("d0", "d1"), self.dut_core)
        (out / "dut.yaml").write_text(DUT_YAML)
        self.tuples = deny_tuples(args.rules)
        self.polling = False

    # -- the devices ----------------------------------------------------------------------

    def kernel(self, nft: str | None) -> None:
        d = self.dut
        d.ip("addr", "flush", "dev", "d0")
        d.ip("addr", "flush", "dev", "d1")
        d.addr("d0", f"{D_ADDR[0]}/24")
        d.addr("d1", f"{D_ADDR[1]}/24")
        d.ip("neigh", "flush", "all")
        d.sysctl({"net.ipv4.ip_forward": 1, "net.ipv4.conf.all.rp_filter": 0,
                  "net.ipv4.conf.d0.rp_filter": 0, "net.ipv4.conf.d1.rp_filter": 0})
        d.run("nft delete table ip lrbench 2>/dev/null; true")
        if nft:
            f = self.out / "rules.nft"
            f.write_text(nft)
            t0 = time.monotonic()
            d.run(["nft", "-f", str(f)], timeout=600)
            print(f"  nftables loaded in {time.monotonic() - t0:.1f} s", file=sys.stderr)

    def kernel_off(self) -> None:
        d = self.dut
        d.run("nft delete table ip lrbench 2>/dev/null; true")
        d.ip("addr", "flush", "dev", "d0")
        d.ip("addr", "flush", "dev", "d1")
        d.sysctl({"net.ipv4.ip_forward": 0})

    def linerate(self, acl: bool):
        self.kernel_off()
        wd = self.out / ("linerate-acl" if acl else "linerate")
        wd.mkdir(parents=True, exist_ok=True)
        if acl:
            (wd / "versus.acl").write_text(acl_lines(self.tuples))
        cfg = wd / "router.yaml"
        cfg.write_text(linerate_config(self.dut_core, acl, self.args.driver, self.args.rx_ring))
        sock = wd / "api.sock"
        log = wd / "daemon.log"
        proc = self.dut.popen(boosted([str(self.bin), "daemon", "--config", str(cfg),
                                       "--no-state", "--socket", str(sock)], self.args.boost),
                              log=log, name="linerate")
        wait_until(lambda: sock.exists() or not proc.running, 60,
                   what="the daemon's API socket")
        if not proc.running:
            raise RuntimeError(f"linerate daemon exited:\n{log.read_text()[-3000:]}")
        if self.args.driver == "af_xdp":
            self.napi_on_dut_core(("d0", "d1"))
        return proc, sock

    def napi_on_dut_core(self, devs) -> None:
        napi_on_core(self.dut, devs, self.dut_core)

    # -- the tester -----------------------------------------------------------------------

    def tester(self, key: str, tag: str, api: Path | None, extra: list[str]) -> dict:
        """One `linerate bench external` run in the tester namespace; its JSON report."""
        out = self.out / f"run-{key}{tag}"
        argv = [str(self.bin), "bench", "external", "--dut", str(self.out / "dut.yaml"),
                "--port", "p0=t0", "--port", "p1=t1", "--core", str(self.tester_core),
                "--seconds", str(self.args.seconds), "--out", str(out), *extra]
        if api:
            argv += ["--dut-api", str(api)]
        if self.args.boost:
            argv = ["setsid", "-w", *boosted(argv, True)]
        p = self.tst.run(argv, check=False, timeout=self.args.timeout)
        (self.out / f"run-{key}{tag}.log").write_text(p.stdout + p.stderr)
        if p.returncode != 0:
            lines = (p.stderr or p.stdout or "failed").strip().splitlines()
            raise RuntimeError(lines[-1] if lines else "failed")
        return json.loads((out / "external.json").read_text())

    @staticmethod
    def figures(t: dict, fps: float) -> dict:
        """A trial's figures: `fps` (the NDR, or what was forwarded) and CPU per frame."""
        cpu = t.get("cpu") or {}
        lat = t.get("latency") or {}
        return {
            "ndr_fps": fps,
            "lost": t["lost"],
            "not_sent": t.get("tx_refused", 0) + t.get("tx_unsent", 0),
            "lat_p50_us": lat.get("p50_ns", 0) / 1e3 if lat else None,
            "lat_p99_us": lat.get("p99_ns", 0) / 1e3 if lat else None,
            "machine_ns": cpu.get("machine_ns_per_frame"),
            "tester_ns": cpu.get("tester_ns_per_frame"),
            "dut_ns": cpu.get("dut_ns_per_frame"),
            "core_ns": cpu.get("dut_cores_ns_per_frame"),
            "workers_ns": cpu.get("dut_busy_ns_per_frame"),
            "softirq_ns": cpu.get("dut_kernel_ns_per_frame"),
            "machine_cores": cpu.get("machine_cores"),
        }

    def measure(self, key: str, api: Path | None) -> Result:
        n = self.args.rules
        r = Result(key, LABELS[key].format(n=f"{n:,}"))
        r.background = self.quiet_machine()
        t0 = time.monotonic()
        sizes = ["64"] + (["imix"] if self.args.imix else [])
        rep = self.tester(key, "", api, ["--resolution", str(self.args.resolution),
                                         "--sizes", " ".join(sizes)])
        for row in rep["rows"]:
            best = [t for t in row["trials"] if t["pass"]]
            shown = max(best, key=lambda t: t["load"]) if best else row["trials"][-1]
            x = self.figures(shown, row["throughput_fps"])
            x["tester_bound"] = row["tester_limited"]
            x["trials"] = len(row["trials"])
            r.rows[row["sizes"]] = x
        r.rows["_control"] = rep["external"]["control_total"]
        r.floor = rep["external"].get("latency_floor")
        # One more trial at the same offered load for every device: CPU per frame depends on
        # the rate (an interrupt-driven kernel wakes for fewer frames at a time at low rates, a
        # polling router's idle core is spread over fewer frames), so only an equal load
        # compares like with like.
        if self.args.common_fps:
            pct = self.args.common_fps / 2 / LINE_RATE_64 * 100
            c = self.tester(key, "-common", api, ["--load", f"{pct:.6f}", "--sizes", "64"])
            t = c["rows"][0]["trials"][0]
            r.rows["common"] = self.figures(t, t["rx_fps"])
        r.drops = self.dut_drops(api)
        print(f"  ({key}) {time.monotonic() - t0:.0f} s: "
              + ", ".join(f"{s} NDR {v['ndr_fps']:,.0f} fps" for s, v in r.rows.items()
                          if s not in ("_control", "common")), file=sys.stderr)
        return r

    def dut_drops(self, api: Path | None) -> dict:
        """The device's own drop counters after its run (cumulative, every trial)."""
        if api:
            p = subprocess.run([str(self.bin), "--socket", str(api), "show", "errors", "--json"],
                               capture_output=True, text=True, timeout=30, check=False)
            try:
                return {f"{e['node']}/{e['reason']}": e["count"] for e in json.loads(p.stdout)}
            except (ValueError, KeyError, TypeError):
                return {"(unreadable)": p.stdout[-200:]}
        out = {}
        for d in ("d0", "d1"):
            st = self.dut.ip_json("-s", "link", "show", d)[0]["stats64"]
            out[f"{d} rx dropped"] = st["rx"]["dropped"]
            out[f"{d} tx dropped"] = st["tx"]["dropped"]
        return {k: v for k, v in out.items() if v}

    def quiet_machine(self) -> float:
        """The machine's busy cores with no traffic (a polling router's idle core included),
        measured over --idle seconds; with --wait-quiet, measured again until it is below
        --quiet (other work on the machine inflates every CPU figure) or the wait is over."""
        deadline = time.monotonic() + self.args.wait_quiet
        while True:
            b = busy_cores(self.args.idle)
            # A polling Linerate keeps one core busy by itself: that is the device, not noise.
            own = 1.0 if self.polling else 0.0
            if b - own <= self.args.quiet or time.monotonic() >= deadline:
                return b
            print(f"  the machine is busy ({b:.2f} cores with no traffic); waiting",
                  file=sys.stderr)

    def run(self, key: str) -> Result:
        print(f"{key}) {LABELS[key].format(n=f'{self.args.rules:,}')}", file=sys.stderr)
        proc = None
        try:
            api = None
            if key == "a":
                self.kernel(None)
            elif key == "b":
                self.kernel(nft_linear(self.tuples))
            elif key == "c":
                self.kernel(nft_set(self.tuples))
            else:
                proc, api = self.linerate(acl=key == "e")
            self.polling = proc is not None
            # The idle machine is measured before and after: other work that started meanwhile
            # is in every CPU figure, so a disturbed device is measured again (with
            # --wait-quiet, up to --retries times).
            for attempt in range(self.args.retries + 1):
                r = self.measure(key, api)
                r.background_after = busy_cores(self.args.idle)
                own = 1.0 if self.polling else 0.0
                if r.background_after - own <= self.args.quiet or not self.args.wait_quiet:
                    break
                if attempt < self.args.retries:
                    print(f"  ({key}) the machine got busy during the run "
                          f"({r.background_after:.2f} cores after it); measuring again",
                          file=sys.stderr)
            return r
        except Exception as e:  # noqa: BLE001 - one device failing must not hide the others
            detail = getattr(e, "stderr", None) or str(e)
            first = next((l for l in str(detail).splitlines() if l.strip()), type(e).__name__)
            print(f"  ({key}) failed: {detail}", file=sys.stderr)
            return Result(key, LABELS[key].format(n=f"{self.args.rules:,}"),
                          error=first[:200])
        finally:
            if proc is not None:
                proc.stop()


def fmt(v, digits: int = 0) -> str:
    if v is None:
        return "-"
    return f"{v:,.{digits}f}"


def ratio(v, base) -> str:
    if v is None or not base:
        return "-"
    return f"{v / base:.2f}x"


def table(results: list[Result], size: str, title: str) -> str:
    """One row per device: the rate, CPU per frame and ratios to the kernel's (a)."""
    base = next((r.rows.get(size) for r in results if r.key == "a" and r.rows.get(size)), None)

    def b(k):
        return base and base[k]

    s = (f"| device | {title} | vs kernel | lost | latency p50 / p99 (us) "
         f"| machine (ns/frame) | tester (ns/frame) "
         f"| DUT: machine - tester (ns/frame) | vs kernel | DUT core busy (ns/frame) | vs kernel "
         f"| Linerate workers busy (ns/frame) | vs kernel's DUT core "
         f"| idle machine before / after (cores) |\n")
    s += "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n"
    for r in results:
        x = r.rows.get(size)
        if x is None:
            s += f"| ({r.key}) {r.label} | failed: {r.error or 'no result'} |" + " |" * 12 + "\n"
            continue
        rate = fmt(x["ndr_fps"]) + (" (tester-bound)" if x.get("tester_bound") else "")
        s += (f"| ({r.key}) {r.label} | {rate} | {ratio(x['ndr_fps'], b('ndr_fps'))} "
              f"| {fmt(x['lost'])} | {fmt(x.get('lat_p50_us'), 1)} / {fmt(x.get('lat_p99_us'), 1)} "
              f"| {fmt(x['machine_ns'])} | {fmt(x['tester_ns'])} "
              f"| {fmt(x['dut_ns'])} | {ratio(x['dut_ns'], b('dut_ns'))} "
              f"| {fmt(x['core_ns'])} | {ratio(x['core_ns'], b('core_ns'))} "
              f"| {fmt(x['workers_ns'])} | {ratio(x['workers_ns'], b('core_ns'))} "
              f"| {r.background:.2f} / {r.background_after:.2f} |\n")
    return s


def find_bin() -> Path:
    env = os.environ.get("LINERATE_BIN")
    p = Path(env) if env else REPO / "target" / "release" / "linerate"
    return p if p.is_absolute() else REPO / p


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true",
                      help="CI: 1,000 rules, 1 s trials, 10%% resolution (the default)")
    mode.add_argument("--full", action="store_true",
                      help="10,000 rules, 10 s trials, 2%% resolution")
    ap.add_argument("--rules", type=int, help="deny entries (overrides the mode's)")
    ap.add_argument("--seconds", type=float, help="seconds per trial (overrides the mode's)")
    ap.add_argument("--resolution", type=float,
                    help="search resolution, percent of the first estimate (overrides the mode's)")
    ap.add_argument("--imix", action="store_true", help="also search IMIX")
    ap.add_argument("--common-fps", type=float, default=100_000,
                    help="also one trial per device at this offered load (64 B, frames/s, both "
                         "directions together; 0: none)")
    ap.add_argument("--only", default="abcde", help="a subset of the devices, e.g. ad")
    ap.add_argument("--driver", choices=["af_packet", "af_xdp"], default="af_packet",
                    help="Linerate's port driver on d0 and d1 (af_xdp runs in copy mode on veth)")
    ap.add_argument("--rx-ring", choices=["blocks", "frames"], default="frames",
                    help="Linerate's AF_PACKET receive ring: blocks (TPACKET_V3, handed over "
                         "when full or after 1 ms) or frames (TPACKET_V2, each frame at once)")
    ap.add_argument("--idle", type=float,
                    help="seconds of no traffic to measure the idle machine before each device "
                         "(default: 3 in full mode, 1 in quick mode)")
    ap.add_argument("--quiet", type=float, default=0.25,
                    help="busy cores (besides a polling router's) below which the machine is quiet")
    ap.add_argument("--wait-quiet", type=float,
                    help="seconds to wait for a quiet machine before each device "
                         "(default: 600 in full mode, 0 in quick mode)")
    ap.add_argument("--retries", type=int, default=2,
                    help="with --wait-quiet: measure a device again when the machine was busy "
                         "after its run, up to this many times")
    ap.add_argument("--no-boost", dest="boost", action="store_false",
                    help="run the tester and the Linerate daemon at normal CPU priority")
    ap.add_argument("--out", type=Path, default=REPO / "target" / "bench" / "versus")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds per tester run")
    args = ap.parse_args(argv)
    full = args.full
    args.rules = args.rules or (10_000 if full else 1_000)
    args.seconds = args.seconds or (10.0 if full else 1.0)
    args.resolution = args.resolution or (2.0 if full else 10.0)
    if args.idle is None:
        args.idle = 3.0 if full else 1.0
    if args.wait_quiet is None:
        args.wait_quiet = 600.0 if full else 0.0
    if os.geteuid() != 0:
        print("needs root (network namespaces)", file=sys.stderr)
        return 2
    bin_ = find_bin()
    if not bin_.is_file():
        print(f"{bin_}: no linerate binary (cargo build --release -p linerate)", file=sys.stderr)
        return 2
    if not shutil.which("nft") and any(k in args.only for k in "bc"):
        print("nft not found (apt-get install nftables)", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    mode_txt = "full" if full else "quick"
    print(f"versus ({mode_txt}): {args.rules:,} rules, {args.seconds} s trials, "
          f"{args.resolution}% resolution; out {args.out}", file=sys.stderr)
    results = []
    # A run in the background ignores SIGINT; SIGTERM must still remove the namespaces.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    with Testbed(args.out) as tb:
        b = Bench(tb, bin_, args.out, args)
        for key in args.only:
            results.append(b.run(key))
    sizes = ["64"] + (["IMIX"] if args.imix else [])
    cpu = next((l.split(":", 1)[1].strip() for l in Path("/proc/cpuinfo").read_text().splitlines()
                if l.startswith("model name")), "?")
    md = (f"Kernel vs Linerate, {mode_txt} mode: {args.rules:,} deny entries, {args.seconds} s "
          f"trials, resolution {args.resolution}% of the first estimate, zero loss; "
          f"{os.cpu_count()} CPUs ({cpu}); tester on CPU 0, device on CPU {b.dut_core}; "
          f"Linerate's ports: {args.driver}"
          f"{', receive ring ' + args.rx_ring if args.driver == 'af_packet' else ''}\n\n")
    for sz in sizes:
        md += f"At each device's NDR, {sz}-byte frames:\n\n"
        md += table(results, sz, f"NDR {sz} B (fps)") + "\n"
    if args.common_fps:
        md += (f"At one offered load for every device, {args.common_fps:,.0f} frames/s of 64 B "
               f"(one {args.seconds} s trial; a device that cannot forward it loses frames):\n\n")
        md += table(results, "common", "forwarded (fps)") + "\n"
    floors = [r.floor for r in results if r.floor]
    if floors:
        f = floors[0]
        md += (f"The tester's own latency floor (no device: a veth pair of its own, measured at the "
               f"start of each device's run; the first): p50 {f['p50_ns'] / 1e3:.1f} us, p99 "
               f"{f['p99_ns'] / 1e3:.1f} us, max {f['max_ns'] / 1e3:.1f} us; every latency above "
               f"includes it.\n")
    for r in results:
        if r.drops:
            md += (f"({r.key}) the device's own drop counters over its whole run (overload "
                   f"trials included): " + ", ".join(f"{k} {v:,}" for k, v in r.drops.items())
                   + "\n")
    md += ("CPU per frame forwarded. machine = every CPU's time not idle (/proc/stat idle, iowait "
           "and steal, exact on this tickless kernel; the ticked user+system+irq+softirq miss the "
           "short interrupt-driven bursts of an otherwise idle CPU), other work on the machine "
           "included (see the idle columns: the machine with no traffic just before and just "
           "after); tester = the tester process (getrusage; it polls one core, so this is one "
           "core over the rate); DUT = machine - tester; DUT core busy "
           "= the time not idle of the CPUs off the tester's core, where the device's work is "
           "steered (a polling Linerate's whole core); Linerate workers busy = time its workers "
           "spent on vectors with frames (its API; what it needed of its core, its packet "
           "sockets' receive in softirq outside vectors not included). A tester-bound rate is the "
           "tester's limit (one core through a veth pair), not the device's; `lost` is the "
           "shown trial's (the NDR's passing trial loses nothing).\n")
    print(md)
    (args.out / "versus.md").write_text(md)
    (args.out / "versus.json").write_text(json.dumps(
        {"mode": mode_txt, "rules": args.rules, "seconds": args.seconds,
         "resolution": args.resolution,
         "results": [{"key": r.key, "label": r.label, "rows": r.rows, "idle_cores": r.background,
                      "idle_cores_after": r.background_after,
                      "dut_drops": r.drops, "latency_floor": r.floor,
                      "error": r.error} for r in results]}, indent=2))
    return 0 if all(not r.error for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
