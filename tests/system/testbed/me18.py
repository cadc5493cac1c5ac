"""ME-18, the ME 6524's NetFlow applet: normal background flows, then SQL Slammer (UDP to port
1434) from hosts on a local subnet and from spoofed sources. A flow rule finds the infected hosts
in the live flow caches, logs each one's address and commits a classifier + policer for it on
the interface it attacks from; uRPF (strict) drops the spoofed sources before they are ever
accounted. Run twice with new random addresses, as the seed repeated it "using different source
addresses unknown to the switch".

The tester (`linerate bench external`, one trial per phase) sends 418-byte frames (Slammer's
376-byte payload) from t0 to t1 through the router; its per-stream counts say what got through.
"""

from __future__ import annotations

import ipaddress
import json
import random
import time
from pathlib import Path

from .eem import LR_MAC, ME17_TESTER_DUT, T_MAC, check, two_links
from .l2 import LinerateDaemon
from .netns import Testbed

THRESHOLD = 100  # flows per source (background hosts have 5 each, an infected one ~170)
FRAME = 418

DUT = """\
router: {{ workers: 1 }}
ports:
  - {{ name: p0, driver: af_packet, device: d0 }}
  - {{ name: p1, driver: af_packet, device: d1 }}
interfaces:
  - {{ name: p0, port: p0, mac: "{m0}", ipv4: [198.18.0.1/24], urpf: strict, flow: in }}
  - {{ name: p1, port: p1, mac: "{m1}", ipv4: [198.18.1.1/24], flow: in }}
neighbors:
  - {{ interface: p0, ip: 198.18.0.2, mac: "{t0}" }}
  - {{ interface: p1, ip: 198.18.1.2, mac: "{t1}" }}
routes:
  - {{ prefix: 0.0.0.0/0, via: 198.18.1.2 }}
flow-export:
  collectors: ["127.0.0.1:2055"]
  cache-size: 262144
  inactive-timeout: 15
event-manager:
  poll-ms: 50
  flow-scan-ms: 250
  rules:
    # The seed's first response: a syslog entry noting an abnormally high flow count.
    - name: flow-count
      detector: {{ flows: {{ per: interface, above: 400, active-ms: 2000 }} }}
      keep-firing-for-ms: 2000
      actions:
        - syslog: {{ severity: warning, msgid: FLOW_ANOMALY, text: "{{flows}} live flows on {{interface}} (normal is under 400); busiest sources {{sources}}" }}
    # The second: for each attacking host, a classifier + policer on the interface it is on.
    - name: slammer
      detector: {{ flows: {{ match: ["udp dport 1434"], per: source, above: {threshold}, active-ms: 2000 }} }}
      keep-firing-for-ms: 2000
      actions:
        - syslog: {{ severity: alert, msgid: WORM, text: "SQL Slammer from {{source}} on {{interface}}: {{flows}} flows to udp/1434" }}
        - commit:
            set:
              "qos.classes[name=worm-{{source}}].match": '["udp src host {{source}} dport 1434"]'
              "qos.policies[name=worm-guard-{{interface}}].classes[class=worm-{{source}}].police": "{{ cir: 64k, violate: drop }}"
              "interfaces[name={{interface}}].qos-in": "worm-guard-{{interface}}"
          rate-limit: {{ count: 20, per-s: 60 }}
"""


def streams(attack: tuple[list[str], str, str] | None) -> str:
    """The tester's streams: 40 background hosts x 5 flows each; with an `attack` (infected
    hosts, spoofed source base, target base) each infected host's Slammer to
    ~500/len(infected) random addresses and 500 spoofed sources, one flow each."""
    out = ["streams:",
           "  - { name: background, from: p0, to: p1, ipv4: { src: 198.18.0.10, dst: 10.1.0.1 },",
           "      udp: { src: 1024, dst: 80 }, weight: 4,",
           "      vary: [ { field: src-ip, count: 40 }, { field: dst-ip, count: 5, nested: true } ] }"]
    if attack is None:
        return "\n".join(out) + "\n"
    infected, spoof_base, worm_dst = attack
    per = -(-500 // len(infected))
    for i, h in enumerate(infected):
        out += [f"  - {{ name: worm-{i}, from: p0, to: p1, ipv4: {{ src: {h}, dst: {worm_dst} }},",
                "      udp: { src: 1434, dst: 1434 },",
                f"      vary: [ {{ field: dst-ip, count: {per}, random: true }} ] }}"]
    out += [f"  - {{ name: spoofed, from: p0, to: p1, ipv4: {{ src: {spoof_base}, dst: {worm_dst} }},",
            "      udp: { src: 1434, dst: 1434 },",
            "      vary: [ { field: src-ip, count: 500, random: true } ] }"]
    return "\n".join(out) + "\n"


def attack_addresses(rng: random.Random, used: set[int]) -> tuple[list[str], str, str]:
    """Infected hosts on p0's subnet (outside the background's .10-.49), a spoofed source base
    no route points back to p0, and a worm target base: all new each call. A host infected in
    an earlier round (in `used`, which this adds to) is never drawn again: its class from that
    round polices it still, so it would neither make flows nor be named anew."""
    hosts = rng.sample([h for h in range(60, 250) if h not in used], 3)
    used.update(hosts)
    infected = sorted(f"198.18.0.{h}" for h in hosts)
    spoof = ipaddress.IPv4Address(rng.randrange(0x0B000000, 0x6F000000) & 0xFFFFF000)
    dst = ipaddress.IPv4Address(rng.randrange(0x0A000000, 0x0AFF0000) & 0xFFFFF000)
    return infected, str(spoof), str(dst)


def stream_counts(rep: dict) -> dict:
    t = rep["rows"][0]["trials"][-1]
    return {s["name"]: (s["tx"], s["rx"]) for s in t["streams"]}


def urpf_drops(r: LinerateDaemon) -> int:
    """Frames the router dropped for failing the reverse-path check (`show errors`)."""
    return sum(e["count"] for e in r.cli_json("show", "errors") if e["reason"] == "UrpfFailed")


def p0_rx(r: LinerateDaemon) -> int:
    return next(p["rx_packets"] for p in r.cli_json("show", "counters")["ports"]
                if p["port"] == "p0")


def phase(bin_: Path, tst, workdir: Path, name: str, text: str, seconds: int, load: float):
    """One tester trial: the streams in `text` for `seconds` at `load`% of 10 Gbit/s."""
    f = workdir / f"{name}.yaml"
    f.write_text(text)
    gen = tst.popen([str(bin_), "bench", "external", "--dut", str(workdir / "tester-dut.yaml"),
                     "--port", "p0=t0", "--port", "p1=t1", "--streams", str(f), "--sizes",
                     str(FRAME), "--load", str(load), "--seconds", str(seconds), "--core", "0",
                     "--out", str(workdir / name)],
                    log=workdir / f"{name}.log", name=f"tester-{name}")
    return gen, lambda: json.loads((workdir / name / "external.json").read_text())


def me18(bin_: Path, tb: Testbed, workdir: Path, seed: int | None = None, seconds: int = 8,
         load: float = 1.0, rounds: int = 2) -> dict:
    """ME-18: background, then `rounds` attacks each from new random addresses."""
    rng = random.Random(seed)
    tst, dut = two_links(tb, workdir)
    r = LinerateDaemon(bin_, dut, workdir / "dut",
                       DUT.format(m0=LR_MAC[0], m1=LR_MAC[1], t0=T_MAC[0], t1=T_MAC[1],
                                  threshold=THRESHOLD).splitlines())
    (workdir / "tester-dut.yaml").write_text(
        ME17_TESTER_DUT.format(m0=LR_MAC[0], m1=LR_MAC[1], t0=T_MAC[0], t1=T_MAC[1]))
    runs = []
    try:
        # Normal traffic: nothing fires.
        gen, result = phase(bin_, tst, workdir, "background", streams(None),
                            seconds, load)
        gen.popen.wait(timeout=seconds + 60)
        em = r.cli_json("show", "event-manager")
        quiet = {x["name"]: x for x in em["rules"]}
        bg = {"streams": stream_counts(result()),
              "fired": {n: x["fired"] for n, x in quiet.items()},
              "flows_peak": quiet["flow-count"].get("flows", {}).get("peak")}
        used: set[int] = set()
        for k in range(rounds):
            infected, spoof, dst = attack_addresses(rng, used)
            fired0 = {n: x["fired"] for n, x in quiet.items()}
            logs0 = r.cli_json("show", "logging", "-n", "1")
            seq0 = logs0[0]["seq"] if logs0 else 0
            urpf0 = urpf_drops(r)
            rx0 = p0_rx(r)
            gen, result = phase(bin_, tst, workdir, f"attack-{k}",
                                streams((infected, spoof, dst)), seconds, load)
            # The attack's start: the first sample where p0 received anything.
            start = None
            while gen.running:
                rx = p0_rx(r)
                if start is None and rx > rx0:
                    start = time.time()
                time.sleep(0.05)
            em = r.cli_json("show", "event-manager")
            rules = {x["name"]: x for x in em["rules"]}
            logs = [x for x in r.cli_json("show", "logging", "-n", "500") if x["seq"] > seq0]
            worm = [x for x in logs if x["msgid"] == "WORM"]
            anomaly = [x for x in logs if x["msgid"] == "FLOW_ANOMALY"]
            named = sorted({x["text"].split(" from ")[1].split(" on ")[0] for x in worm})
            commit = rules["slammer"]["actions"][1]
            qos = r.cli_json("show", "qos")
            counts = stream_counts(result())
            runs.append({
                "infected": infected, "spoof_base": spoof, "worm_dst_base": dst,
                "attack_start_unix": start,
                "slammer_fired": rules["slammer"]["fired"] - fired0["slammer"],
                "flow_count_fired": rules["flow-count"]["fired"] - fired0["flow-count"],
                "named": named, "worm_records": [x["text"] for x in worm],
                "anomaly_records": [x["text"] for x in anomaly],
                "last_fired_unix": rules["slammer"]["last_fired_unix"],
                "event_to_dispatch_ms": rules["slammer"]["last_event_to_dispatch_ms"],
                "event_to_commit_ms": commit["last_event_to_done_ms"],
                "commit_detail": commit["last_detail"],
                "flows": rules["slammer"].get("flows"),
                "flow_count_figures": rules["flow-count"].get("flows"),
                "urpf_drops": urpf_drops(r) - urpf0,
                "streams": counts,
                "qos": qos,
            })
            quiet = rules
            # The attack's flows idle out (active-ms 2 s) and the rule resolves before the next.
            time.sleep(4.5)
        running = r.cli_json("show", "running-config")
    finally:
        r.stop()
    return report(bg, runs, running, seconds, load)


def report(bg: dict, runs: list[dict], running, seconds: int, load: float) -> dict:
    checks = [
        check("normal traffic fires nothing", "0 firings", bg["fired"],
              all(v == 0 for v in bg["fired"].values())),
        check("normal traffic is forwarded", "0 lost",
              bg["streams"]["background"][0] - bg["streams"]["background"][1],
              bg["streams"]["background"][0] == bg["streams"]["background"][1]),
    ]
    timeline = []
    for k, x in enumerate(runs):
        tag = f"attack {k + 1}"
        sp_tx, sp_rx = x["streams"]["spoofed"]
        worm_tx = sum(v[0] for n, v in x["streams"].items() if n.startswith("worm-"))
        worm_rx = sum(v[1] for n, v in x["streams"].items() if n.startswith("worm-"))
        bg_tx, bg_rx = x["streams"]["background"]
        policed_at = None
        if x["last_fired_unix"] and x["event_to_commit_ms"] is not None and x["attack_start_unix"]:
            policed_at = (x["last_fired_unix"] - x["attack_start_unix"]) * 1000 + \
                x["event_to_commit_ms"]
        checks += [
            check(f"{tag}: the abnormal flow count is logged", "a FLOW_ANOMALY record",
                  (x["anomaly_records"] or [None])[0], len(x["anomaly_records"]) >= 1),
            check(f"{tag}: the infected hosts are named, and only they", ", ".join(x["infected"]),
                  ", ".join(x["named"]), x["named"] == x["infected"]),
            check(f"{tag}: each is policed by a commit", "commit ... (after ...)",
                  x["commit_detail"], x["commit_detail"].startswith("commit ")),
            check(f"{tag}: policed within 2 s of the attack's first frame (target)", "<= 2000 ms",
                  None if policed_at is None else round(policed_at),
                  policed_at is not None and policed_at <= 2000),
            check(f"{tag}: the worm's traffic is cut by the policer", "under 30% of it forwarded",
                  f"{worm_rx} of {worm_tx}", worm_tx > 0 and worm_rx < 0.3 * worm_tx),
            check(f"{tag}: uRPF drops every spoofed frame", f"0 of {sp_tx} forwarded, drops "
                  "counted as uRPF", f"{sp_rx} forwarded, {x['urpf_drops']} uRPF drops",
                  sp_rx == 0 and x["urpf_drops"] >= sp_tx),
            check(f"{tag}: background traffic untouched", "0 lost", bg_tx - bg_rx,
                  bg_tx == bg_rx),
        ]
        if policed_at is not None:
            timeline.append((f"{tag}: last infected host policed (commit done)", policed_at))
    running_text = running.get("text", "") if isinstance(running, dict) else str(running)
    return {
        "scenario": "ME-18",
        "title": "Event manager: NetFlow anomaly (SQL Slammer)",
        "seed": {"outcome": "the EEM script logged the abnormal flow count, installed a QoS ACL "
                            "+ policer on the source interface for local attackers, and uRPF "
                            "blocked the spoofed sources; repeated with unknown addresses, it "
                            "named the right source each time"},
        "ours": {
            "traffic": f"{FRAME}-byte frames, {load}% of 10 Gbit/s, {seconds} s per phase; "
                       "background 40 hosts x 5 flows; per attack 3 infected hosts (~500 flows "
                       "to udp/1434) and 500 spoofed sources",
            "background": bg,
            "attacks": runs,
            "running_config_after": running_text,
        },
        "timeline_ms": timeline,
        "checks": checks,
        "verdict": "pass" if all(c["pass"] for c in checks) else "fail",
    }
