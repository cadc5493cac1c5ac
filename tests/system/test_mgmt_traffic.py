"""The management CLI acting on a router while the tester's traffic flows through it.

`linerate bench run ... --api-socket S --load P` runs one fixed-load trial through an embedded
router and serves the runtime API on S for its whole length; these tests drive the CLI against
that socket (capture, trace, config apply / rollback, route add / del, show) while the trial
runs, then read the trial's JSON (DIR/custom.json) to see what the traffic made of it.

Nominal port speed is 100 Mbit/s, so 20-30 % load is a few tens of thousands of frames/s: any
loss measured here is the router's doing, not the (2-core) machine's.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

# Three mem ports; the pair pattern sends p0 <-> p1 between the neighbours 198.18.0.2 and
# 198.18.1.2. p2 and the static routes are not used by those streams.
ROUTER = """\
router: { workers: 1 }
ports:
  - { name: p0, driver: mem }
  - { name: p1, driver: mem }
  - { name: p2, driver: mem }
interfaces:
  - { name: p0, port: p0, mac: "02:00:00:00:00:01", ipv4: [198.18.0.1/24] }
  - { name: p1, port: p1, mac: "02:00:00:00:01:01", ipv4: [198.18.1.1/24] }
  - { name: p2, port: p2, mac: "02:00:00:00:02:01", ipv4: [198.18.2.1/24] }
neighbors:
  - { interface: p0, ip: 198.18.0.2, mac: "02:00:00:00:00:02" }
  - { interface: p1, ip: 198.18.1.2, mac: "02:00:00:00:01:02" }
  - { interface: p2, ip: 198.18.2.2, mac: "02:00:00:00:02:02" }
routes:
  - { prefix: 10.1.0.0/16, via: 198.18.1.2 }
  - { prefix: 10.66.0.0/16, blackhole: true }
"""

ROUTER_MAC = {"p0": "02:00:00:00:00:01", "p1": "02:00:00:00:01:01", "p2": "02:00:00:00:02:01"}
NBR_MAC = {"p0": "02:00:00:00:00:02", "p1": "02:00:00:00:01:02", "p2": "02:00:00:00:02:02"}
NBR_IP = {"p0": "198.18.0.2", "p1": "198.18.1.2", "p2": "198.18.2.2"}

PATTERN_ARGS = ("--pattern", "pair", "--speed", "100m", "--sizes", "128")


def run(bin_path: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(bin_path), *map(str, args)], capture_output=True, text=True, timeout=timeout
    )


class Bench:
    """A `bench run` in the background with its API socket; `finish()` returns its JSON."""

    def __init__(self, bin_path: Path, workdir: Path, router_text: str, *args: str):
        self.bin = bin_path
        self.dir = workdir
        self.dir.mkdir(parents=True, exist_ok=True)
        self.router = self.dir / "router.yaml"
        self.router.write_text(router_text)
        # Unix socket paths are limited to 108 bytes; pytest's tmp_path can be long.
        self.sockdir = Path(tempfile.mkdtemp(prefix="lr-mt-"))
        self.socket = self.sockdir / "api.sock"
        self.out = self.dir / "out"
        self.stdout = open(self.dir / "bench.out", "w")
        self.stderr = open(self.dir / "bench.err", "w")
        self.proc = subprocess.Popen(
            [str(bin_path), "bench", "run", "--router", str(self.router), *args,
             "--api-socket", str(self.socket), "--out", str(self.out), "--quiet"],
            stdout=self.stdout, stderr=self.stderr,
        )
        self.started = time.monotonic()

    def cli(self, *args: str, timeout: float = 30) -> subprocess.CompletedProcess:
        # --socket first: capture and trace take the rest of the line as their filter.
        return run(self.bin, "--socket", str(self.socket), *args, timeout=timeout)

    def ok(self, *args: str, timeout: float = 30) -> subprocess.CompletedProcess:
        p = self.cli(*args, timeout=timeout)
        assert p.returncode == 0, f"linerate {' '.join(args)}: exit {p.returncode}\n{p.stderr}"
        return p

    def running(self) -> bool:
        return self.proc.poll() is None

    def log(self) -> str:
        self.stderr.flush()
        return (self.dir / "bench.err").read_text()[-3000:]

    def wait_api(self, timeout: float = 20) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.running():
                pytest.fail(f"bench run exited ({self.proc.returncode}) before its API "
                            f"answered:\n{self.log()}")
            if self.socket.exists() and self.cli("show", "system", timeout=10).returncode == 0:
                return
            time.sleep(0.1)
        pytest.fail(f"the API on {self.socket} did not answer within {timeout} s:\n{self.log()}")

    def finish(self, timeout: float = 60) -> dict:
        rc = self.proc.wait(timeout=timeout)
        assert rc == 0, f"bench run failed ({rc}):\n{self.log()}"
        return json.loads((self.out / "custom.json").read_text())

    def stop(self) -> None:
        if self.running():
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.stdout.close()
        self.stderr.close()
        shutil.rmtree(self.sockdir, ignore_errors=True)


@pytest.fixture
def bench(linerate_bin, tmp_path):
    """Starts `bench run`s; every one still running at teardown is killed."""
    started: list[Bench] = []

    def start(*args: str, router: str = ROUTER, name: str = "run") -> Bench:
        b = Bench(linerate_bin, tmp_path / name, router, *args)
        started.append(b)
        b.wait_api()
        return b

    yield start
    for b in started:
        b.stop()


def only_trial(rep: dict) -> dict:
    assert len(rep["rows"]) == 1, rep["rows"]
    trials = rep["rows"][0]["trials"]
    assert len(trials) == 1, "--load runs one trial per frame size"
    return trials[0]


def assert_clean(t: dict) -> None:
    """Every frame sent came back, where it belonged, once, intact."""
    counts = {k: t[k] for k in ("tx", "rx", "lost", "misdelivered", "duplicated", "corrupted",
                                "refused", "stale", "foreign")}
    assert t["error"] is None, t["error"]
    assert t["tx"] > 10_000, counts
    # (t["tester_limited"] may be set: on a small machine the tester can fall behind its
    # schedule while tshark and the CLI take the CPU; that costs frames offered, not frames lost.)
    assert t["rx"] == t["tx"], counts
    assert t["lost"] == 0 and t["misdelivered"] == 0, counts
    assert t["duplicated"] == 0 and t["corrupted"] == 0 and t["refused"] == 0, counts
    assert t["dut_drops"] == [], t["dut_drops"]


def capture(b: Bench, pcap: Path, *args: str) -> int:
    """`linerate capture ... -w pcap`; the frame count the CLI reports."""
    p = b.ok("capture", "-w", str(pcap), *args)
    assert f"frames written to {pcap}" in p.stderr, p.stderr
    return int(p.stderr.strip().split()[0])


def decode(tshark: str, pcap: Path, *fields: str) -> list[tuple[str, ...]]:
    """tshark's view of a pcap: one tuple of the fields per frame."""
    cmd = [tshark, "-r", str(pcap), "-T", "fields"]
    for f in fields:
        cmd += ["-e", f]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, f"tshark failed on {pcap}: {p.stderr}"
    return [tuple(line.split("\t")) for line in p.stdout.splitlines() if line.strip()]


# ---------------------------------------------------------------------------------------------
# 1. capture


def test_capture_under_traffic_decodes_in_tshark_and_costs_no_frames(bench, tshark, tmp_path):
    b = bench(*PATTERN_ARGS, "--flows", "8", "--load", "20", "--seconds", "6")
    fields = ("eth.src", "eth.dst", "ip.src", "ip.dst", "ip.ttl", "udp.srcport", "udp.dstport",
              "frame.len")

    # What p0's neighbour sends in: stream p0>p1, as the tester built it.
    rx = tmp_path / "p0-rx.pcap"
    assert capture(b, rx, "-i", "p0", "--direction", "rx", "-c", "50", "udp") == 50
    frames = decode(tshark, rx, *fields)
    assert len(frames) == 50
    for esrc, edst, src, dst, ttl, sport, dport, flen in frames:
        assert (esrc, edst) == (NBR_MAC["p0"], ROUTER_MAC["p0"])
        assert (src, dst, ttl, dport) == (NBR_IP["p0"], NBR_IP["p1"], "64", "5000")
        assert 1024 <= int(sport) < 1024 + 8, "--flows 8: source ports 1024..1031"
        assert flen == "124", "128-byte frames, FCS not captured"
    assert len({f[5] for f in frames}) > 1, "the flows' source ports vary"

    # What the router sends out of p0: stream p1>p0, rewritten and with its TTL decremented.
    tx = tmp_path / "p0-tx.pcap"
    assert capture(b, tx, "-i", "p0", "--direction", "tx", "-c", "50", "udp") == 50
    frames = decode(tshark, tx, *fields)
    assert len(frames) == 50
    for esrc, edst, src, dst, ttl, sport, dport, flen in frames:
        assert (esrc, edst) == (ROUTER_MAC["p0"], NBR_MAC["p0"])
        assert (src, dst, ttl, dport) == (NBR_IP["p1"], NBR_IP["p0"], "63", "5000")

    # A filter nothing matches: the capture gives up at its timeout with an empty (valid) pcap.
    none = tmp_path / "none.pcap"
    t0 = time.monotonic()
    assert capture(b, none, "-i", "p0", "--direction", "rx", "-c", "50", "--timeout", "1",
                   "tcp") == 0
    assert time.monotonic() - t0 < 5
    assert decode(tshark, none, "frame.number") == []

    # ip4-forward's output: the same stream after the rewrite (MACs of p1's side, TTL 63).
    fwd = tmp_path / "fwd.pcap"
    assert capture(b, fwd, "--node", "ip4-forward", "-c", "20",
                   "src", "host", NBR_IP["p0"]) == 20
    frames = decode(tshark, fwd, *fields)
    assert len(frames) == 20
    for esrc, edst, src, dst, ttl, sport, dport, flen in frames:
        assert (esrc, edst) == (ROUTER_MAC["p1"], NBR_MAC["p1"]), "MACs rewritten to p1's side"
        assert (src, dst, dport) == (NBR_IP["p0"], NBR_IP["p1"], "5000")
        assert ttl == "63", "TTL decremented (64 on receive)"

    # Nothing is dropped in this run, so a drop capture finds nothing (the blackhole route
    # 10.66/16 is not used by the pair streams; test_route_moved_under_traffic shows drops).
    drops = tmp_path / "drops.pcap"
    assert capture(b, drops, "--drops", "-c", "5", "--timeout", "1") == 0

    assert b.running(), "the captures should all have happened during the trial"
    t = only_trial(b.finish())
    assert_clean(t)
    # 2 streams x 20% of 100 Mbit/s in 128-byte frames (84,459 frames/s at 100%) for 6 s, less
    # what the tester could not send in time.
    assert 0.8 * (2 * 84_459.46 * 0.2 * 6) <= t["tx"] <= 2 * 84_459.46 * 0.2 * 6 + 100


def test_capture_pcapng_names_each_point_and_keeps_direction_and_length(bench, tshark,
                                                                          tmp_path):
    """A `.pcapng` capture of p0's both sides and of ip4-forward's output towards p0, cut to 64
    bytes: tshark shows one interface per capture point by name, each frame's direction, and
    the 124-byte frames' original length. The same capture named `.pcap` is classic pcap, and
    keeps the original length too."""
    b = bench(*PATTERN_ARGS, "--load", "20", "--seconds", "8")
    # Enough frames to span several vectors: within one, a point's frames come in one run.
    ng = tmp_path / "p0.pcapng"
    n = capture(b, ng, "-i", "p0", "--direction", "both", "--node", "ip4-forward", "-s", "64",
                "-c", "1000", "udp")
    classic = tmp_path / "p0.pcap"
    assert capture(b, classic, "-i", "p0", "-s", "64", "-c", "5", "udp") == 5
    assert b.running(), "the captures should have happened during the trial"
    assert n == 1000
    assert ng.read_bytes()[:4] == bytes.fromhex("0a0d0d0a"), "a pcapng section header"
    r = subprocess.run([tshark, "-r", str(ng), "-V", "-c", "200"], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert len(re.findall(r"^Frame \d+: 124 bytes on wire .*, 64 bytes captured .* on interface "
                          r"p0(/ip4-forward)?, id \d \((in|out)bound\)$", r.stdout, re.M)) == 200, \
        r.stdout[:3000]
    frames = decode(tshark, ng, "frame.interface_name", "frame.packet_flags_direction",
                    "frame.len", "frame.cap_len", "eth.src", "eth.dst")
    assert len(frames) == n
    seen = set()
    for name, direction, flen, caplen, esrc, edst in frames:
        assert (flen, caplen) == ("124", "64"), "cut to 64 bytes, original length kept"
        # Received on p0: from p0's neighbour. Sent on p0, and ip4-forward's output towards
        # p0: from the router to p0's neighbour.
        inbound = esrc == NBR_MAC["p0"]
        want = {("p0", True): "0x00000001", ("p0", False): "0x00000002",
                ("p0/ip4-forward", False): "0x00000002"}.get((name, inbound))
        assert direction == want, (name, direction, esrc, edst)
        if not inbound:
            assert (esrc, edst) == (ROUTER_MAC["p0"], NBR_MAC["p0"])
        seen.add((name, inbound))
    assert seen == {("p0", True), ("p0", False), ("p0/ip4-forward", False)}, seen
    ifaces = subprocess.run([tshark, "-r", str(ng), "-V", "-c", "1000", "-T", "fields",
                             "-e", "frame.interface_description"], capture_output=True,
                            text=True, timeout=120).stdout.split("\n")
    assert "linerate: the output of ip4-forward on port p0" in ifaces
    assert "linerate: frames received and sent on port p0" in ifaces

    assert classic.read_bytes()[:4] == bytes.fromhex("4d3cb2a1")
    assert decode(tshark, classic, "frame.len", "frame.cap_len") == [("124", "64")] * 5
    t = only_trial(b.finish())
    assert_clean(t)


# ---------------------------------------------------------------------------------------------
# 2. trace


def test_trace_under_traffic_shows_each_frames_path(bench):
    b = bench(*PATTERN_ARGS, "--load", "20", "--seconds", "4")

    p = b.ok("trace", "-c", "5", "--json")
    traces = json.loads(p.stdout)
    assert len(traces) == 5, traces
    assert [tr["id"] for tr in traces] == [1, 2, 3, 4, 5]
    for tr in traces:
        steps = tr["steps"]
        assert [s["node"] for s in steps] == ["rx", "ethernet-input", "ip4-forward", "tx"], tr
        assert [s["next"] for s in steps[:2]] == ["ethernet-input", "ip4-forward"], tr
        # Which side it came in on decides where it goes: p0 -> p1, p1 -> p0.
        came = "p0" if steps[0]["decision"].startswith("port 0 (p0)") else "p1"
        assert steps[0]["decision"] == f"port {came[1]} ({came}), 124 bytes", steps[0]
        goes = {"p0": "p1", "p1": "p0"}[came]
        assert steps[1]["decision"].startswith(f"interface {came}, vrf default"), steps[1]
        fwd = steps[2]["decision"]
        assert f"out {goes}, to {NBR_MAC[goes]}" in fwd, fwd
        assert steps[2]["next"] == f"tx port {goes[1]}", steps[2]
        assert steps[3]["decision"] == f"queued on port {goes[1]}", steps[3]
        assert f"IPv4 {NBR_IP[came]} -> {NBR_IP[goes]} udp 1024 -> 5000 ttl 64" in tr["summary"]

    p = b.ok("trace", "-i", "p1", "-c", "3")
    out = p.stdout
    assert "Packet 1 " in out and "Packet 3 " in out and "Packet 4 " not in out, out
    assert out.count("rx              port 1 (p1)") == 3, out
    assert out.count(f"out p0, to {NBR_MAC['p0']} -> tx port 0") == 3, out

    p = b.ok("trace", "-c", "1", "--timeout", "1", "tcp")
    assert "no frame matched before the timeout" in p.stdout

    assert b.running()
    assert_clean(only_trial(b.finish()))


def test_show_runtime_under_traffic_counts_each_node_and_clears(bench):
    """`show runtime`: every node has a row per worker; the nodes the traffic takes count its
    frames (ethernet-input all of them, in vectors of at least one), with a time per packet from
    the sampled vectors; `clear runtime` starts the counts again."""
    b = bench(*PATTERN_ARGS, "--load", "20", "--seconds", "4")
    time.sleep(1.5)
    v = json.loads(b.ok("show", "runtime", "--json").stdout)
    assert v["timed_every"] == 16
    assert len(v["workers"]) == 1 and v["workers"][0]["worker"] == 0
    rows = {n["node"]: n for n in v["total"]}
    assert set(rows) == {"ethernet-input", "atm-input", "l2-input", "l2-mcast", "l2-flood",
                         "bvi-input", "ip4-forward", "ip-mcast", "gtpu-input", "gtpu-encap",
                         "ip6-forward", "l2-control", "slow-path", "output-features",
                         "bvi-output", "l2-output", "interface-output", "mpls-input",
                         "pw-encap"}, rows
    # Unicast routed traffic on Ethernet only: the ATM, bridge, multicast, GTP and MPLS nodes
    # have rows and nothing in them.
    for node in ("atm-input", "l2-input", "l2-mcast", "l2-flood", "bvi-input", "bvi-output",
                 "ip-mcast", "gtpu-input", "gtpu-encap", "mpls-input", "pw-encap"):
        assert rows[node]["packets"] == 0, rows[node]
    eth, ip4, tx = rows["ethernet-input"], rows["ip4-forward"], rows["interface-output"]
    assert eth["packets"] > 10_000, eth
    # Every frame of the pair pattern is IPv4 and forwarded: the three nodes see the same ones
    # (give or take the vector in flight while the show reads the counters).
    assert abs(ip4["packets"] - eth["packets"]) <= 512, rows
    assert abs(tx["packets"] - eth["packets"]) <= 512, rows
    assert rows["ip6-forward"]["packets"] == 0 and rows["slow-path"]["packets"] == 0, rows
    assert eth["vector_size"] >= 1.0 and eth["calls"] <= eth["packets"], eth
    assert eth["timed_calls"] > 0 and eth["ns_per_packet"] > 0, eth
    text = b.ok("show", "runtime").stdout
    assert text.startswith("worker 0 (") and "ethernet-input" in text and "total" in text, text
    b.ok("clear", "runtime")
    after = {n["node"]: n for n in json.loads(b.ok("show", "runtime", "--json").stdout)["total"]}
    assert after["ethernet-input"]["packets"] < eth["packets"], (after, eth)
    assert_clean(only_trial(b.finish()))


def test_show_processes_cpu_tells_work_from_polling(bench):
    """`show processes cpu`: the worker's row has its core, the CPU it used and the work it did
    (less: it polls between vectors), over windows no longer than the history; the router's
    own threads are listed as control threads."""
    b = bench(*PATTERN_ARGS, "--load", "20", "--seconds", "5")
    time.sleep(3)
    v = json.loads(b.ok("show", "processes", "cpu", "--json").stdout)
    assert 1.5 <= v["covered_s"][0] <= 5.5, v["covered_s"]
    rows = v["rows"]
    workers = [r for r in rows if r["kind"] == "worker"]
    assert [w["name"] for w in workers] == ["worker0"], rows
    w = workers[0]
    # 20 % of 100 Mbit/s of 128-byte frames is ~18,000 frames/s: a little work, and the
    # polling loop's CPU on top of it.
    assert 0 < w["busy"][0] < 50, w
    assert w["cpu"][0] >= w["busy"][0], w
    names = {r["name"] for r in rows if r["kind"] == "control"}
    assert "cpu" in names, names
    text = b.ok("show", "processes", "cpu").stdout
    assert "worker0" in text and "Busy 5s" in text, text
    m = b.ok("show", "metrics").stdout
    assert 'linerate_thread_cpu_percent{thread="worker0"' in m
    assert_clean(only_trial(b.finish()))


# ---------------------------------------------------------------------------------------------
# 3. config changes under traffic


def test_config_changes_under_traffic_lose_nothing(bench, tmp_path):
    # B: a route removed (10.1/16), one added (10.77/16 via p2's neighbour), p2's address
    # changed. None of it is on the pair streams' path.
    changed = (ROUTER
               .replace("  - { prefix: 10.1.0.0/16, via: 198.18.1.2 }\n",
                        "  - { prefix: 10.77.0.0/16, via: 198.18.2.2 }\n")
               .replace("ipv4: [198.18.2.1/24]", "ipv4: [198.18.2.254/24]"))
    assert changed != ROUTER
    cfg_b = tmp_path / "b.yaml"
    cfg_b.write_text(changed)
    bad_text = ROUTER.replace("{ prefix: 10.66.0.0/16, blackhole: true }",
                              "{ prefix: 10.66.0.0/16, blackhole: true, metric: 5 }")
    bad_line = bad_text.splitlines().index(
        "  - { prefix: 10.66.0.0/16, blackhole: true, metric: 5 }") + 1
    bad = tmp_path / "bad.yaml"
    bad.write_text(bad_text)
    unresolved = tmp_path / "unresolved.yaml"
    unresolved.write_text(ROUTER.replace("via: 198.18.1.2 }", "via: 198.18.9.9 }"))

    b = bench(*PATTERN_ARGS, "--load", "30", "--seconds", "10")

    def route(addr: str) -> list[dict]:
        return json.loads(b.ok("show", "ip", "route", addr, "--json").stdout)["routes"]

    def commit() -> int:
        return json.loads(b.ok("show", "system", "--json").stdout)["commit"]

    assert commit() == 1
    assert route("10.1.2.3")[0]["prefix"] == "10.1.0.0/16"

    p = b.ok("config", "apply", str(cfg_b), "-m", "b")
    assert "commit 2 applied" in p.stdout, p.stdout
    assert route("10.1.2.3") == [] and route("10.77.0.1")[0]["prefix"] == "10.77.0.0/16"
    p2 = [i for i in json.loads(b.ok("show", "interfaces", "--json").stdout) if i["name"] == "p2"]
    assert p2[0]["ipv4"] == ["198.18.2.254/24"], p2

    p = b.ok("config", "rollback", "1")
    assert "commit 3 applied" in p.stdout, p.stdout
    assert route("10.77.0.1") == [] and route("10.1.2.3")[0]["prefix"] == "10.1.0.0/16"

    p = b.ok("config", "apply", str(cfg_b), "-m", "b again")
    assert "commit 4 applied" in p.stdout, p.stdout
    assert commit() == 4

    for i in range(3):
        b.ok("route", "add", f"10.{200 + i}.0.0/16", "via", "198.18.2.2")
        b.ok("route", "add", f"10.{210 + i}.0.0/16", "blackhole")
        got = route(f"10.{200 + i}.1.1")
        assert got and got[0]["prefix"] == f"10.{200 + i}.0.0/16" and got[0]["origin"] == "api"
        b.ok("route", "del", f"10.{200 + i}.0.0/16")
        b.ok("route", "del", f"10.{210 + i}.0.0/16")
        assert route(f"10.{200 + i}.1.1") == []

    for _ in range(2):
        for what in (("interfaces",), ("ports",), ("ip", "route"), ("neighbors",),
                     ("counters",), ("errors",), ("workers",), ("system",), ("logging",)):
            b.ok("show", *what)
            b.ok("show", *what, "--json")

    # Mistakes are refused whole, naming file and line; the running config stays commit 4.
    p = b.cli("config", "apply", str(bad))
    assert p.returncode != 0
    assert f"{bad}:{bad_line}:" in p.stderr and "metric" in p.stderr, p.stderr
    assert "nothing was changed" in p.stderr, p.stderr
    p = b.cli("config", "apply", str(unresolved))
    assert p.returncode != 0
    assert f"{unresolved}:" in p.stderr and "198.18.9.9" in p.stderr, p.stderr
    assert commit() == 4

    hist = json.loads(b.ok("config", "history", "--json").stdout)
    still_running = b.running()
    assert [h["id"] for h in hist] == [1, 2, 3, 4], hist
    assert [h["comment"] for h in hist][0] == "startup"
    assert hist[1]["comment"] == "b" and hist[3]["comment"] == "b again", hist
    assert all(h["status"] == "committed" for h in hist), hist
    text = b.ok("config", "history").stdout
    assert all(f"\n{n} " in text for n in (2, 3, 4)), text
    assert still_running, (
        f"the changes took {time.monotonic() - b.started:.1f} s: longer than the 10 s trial")

    t = only_trial(b.finish())
    assert_clean(t)
    assert t["reordered"] == 0


# ---------------------------------------------------------------------------------------------
# 4. a route the traffic uses, moved under traffic; drops captured


STREAMS = """\
speeds: { default: 100m }
streams:
  - { name: moved, from: p0, to: p1, ipv4: { src: 198.18.0.2, dst: 10.1.0.1 } }
  - { name: back, from: p1, to: p0, ipv4: { src: 198.18.1.2, dst: 198.18.0.2 } }
  - { name: sunk, from: p2, to: p0, ipv4: { src: 198.18.2.2, dst: 10.66.0.1 } }
"""


def test_route_moved_under_traffic_takes_effect(bench, tshark, tmp_path):
    streams = tmp_path / "streams.yaml"
    streams.write_text(STREAMS)
    moved = tmp_path / "moved.yaml"
    moved.write_text(ROUTER.replace("{ prefix: 10.1.0.0/16, via: 198.18.1.2 }",
                                    "{ prefix: 10.1.0.0/16, via: 198.18.2.2 }"))
    b = bench("--streams", str(streams), "--sizes", "128", "--load", "20", "--seconds", "5")
    fields = ("eth.dst", "ip.src", "ip.dst", "ip.ttl")

    before = tmp_path / "before.pcap"
    assert capture(b, before, "-i", "p1", "--direction", "tx", "-c", "10",
                   "dst", "host", "10.1.0.1") == 10
    assert set(decode(tshark, before, *fields)) == {(NBR_MAC["p1"], NBR_IP["p0"], "10.1.0.1",
                                                     "63")}

    # Stream `sunk` goes to the blackhole route: a drop capture shows its frames.
    drops = tmp_path / "drops.pcap"
    assert capture(b, drops, "--drops", "-c", "10") == 10
    assert set(decode(tshark, drops, "ip.src", "ip.dst", "udp.dstport")) == {
        (NBR_IP["p2"], "10.66.0.1", "5000")}

    p = b.ok("config", "apply", str(moved), "-m", "move 10.1/16 to p2")
    assert "~ route 10.1.0.0/16" in p.stdout and "commit 2 applied" in p.stdout, p.stdout
    got = json.loads(b.ok("show", "ip", "route", "10.1.0.1", "--json").stdout)["routes"]
    assert got[0]["prefix"] == "10.1.0.0/16" and "198.18.2.2" in json.dumps(got[0]), got

    after = tmp_path / "after.pcap"
    assert capture(b, after, "-i", "p2", "--direction", "tx", "-c", "10",
                   "dst", "host", "10.1.0.1") == 10
    assert set(decode(tshark, after, *fields)) == {(NBR_MAC["p2"], NBR_IP["p0"], "10.1.0.1",
                                                    "63")}
    gone = tmp_path / "gone.pcap"
    assert capture(b, gone, "-i", "p1", "--direction", "tx", "-c", "1", "--timeout", "1",
                   "dst", "host", "10.1.0.1") == 0, "nothing for 10.1/16 leaves p1 any more"

    assert b.running()
    t = only_trial(b.finish())
    counts = {k: t[k] for k in ("tx", "rx", "lost", "misdelivered", "duplicated", "corrupted",
                                "refused")}
    drops_by = {d["reason"]: d["frames"] for d in t["dut_drops"]}
    assert set(drops_by) == {"Blackhole"}, t["dut_drops"]
    # Three streams at the same rate on their own ports: `sunk` (a third) all dropped;
    # `moved` arrives at p2 after the change, which the tester counts as misdelivered.
    per_stream = t["tx"] / 3
    assert drops_by["Blackhole"] == pytest.approx(per_stream, rel=0.01), counts
    assert 0 < t["misdelivered"] < per_stream, counts
    assert t["lost"] == drops_by["Blackhole"] + t["misdelivered"], counts
    assert t["rx"] == t["tx"] - t["lost"], counts
    assert t["rx"] > per_stream, "`back` whole, and `moved` until the change"
    assert t["duplicated"] == 0 and t["corrupted"] == 0 and t["refused"] == 0, counts


# ---------------------------------------------------------------------------------------------
# The JSON's per-stream counts (docs/tester.md promises them)


def test_bench_json_has_per_stream_counts(linerate_bin, tmp_path):
    (tmp_path / "router.yaml").write_text(ROUTER)
    out = tmp_path / "out"
    p = run(linerate_bin, "bench", "run", "--router", tmp_path / "router.yaml", *PATTERN_ARGS,
            "--load", "10", "--seconds", "0.5", "--out", out, "--quiet")
    assert p.returncode == 0, p.stderr
    t = only_trial(json.loads((out / "custom.json").read_text()))
    assert t["lost"] == 0
    streams = {s["name"]: s for s in t["streams"]}
    assert set(streams) == {"p0>p1", "p1>p0"}
    for s in streams.values():
        assert s["tx"] > 0 and s["rx"] == s["tx"] and s["lost"] == 0 and s["misdelivered"] == 0


def test_fixed_load_table_row_names_the_load_and_the_loss(linerate_bin, tmp_path):
    (tmp_path / "router.yaml").write_text(ROUTER)
    # Half the frames go to the blackhole route: the one trial fails.
    (tmp_path / "streams.yaml").write_text(
        "speeds: { default: 100m }\n"
        "streams:\n"
        "  - { from: p0, to: p1, ipv4: { src: 198.18.0.2, dst: 198.18.1.2 } }\n"
        "  - { from: p2, to: p0, ipv4: { src: 198.18.2.2, dst: 10.66.0.1 } }\n")
    out = tmp_path / "out"
    p = run(linerate_bin, "bench", "run", "--router", tmp_path / "router.yaml",
            "--streams", tmp_path / "streams.yaml", "--sizes", "128", "--load", "20",
            "--seconds", "0.5", "--out", out, "--quiet")
    assert p.returncode == 0, p.stderr
    t = only_trial(json.loads((out / "custom.json").read_text()))
    assert t["load"] == 0.2 and not t["pass"] and t["lost"] > 0
    row = next(line for line in (out / "custom.md").read_text().splitlines()
               if line.startswith("| 128 |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert "at 100%" not in cells[2], row
    assert cells[6] == f"{t['lost']:,}", row
