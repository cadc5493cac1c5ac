"""The event-manager scenarios of the ME 6524 report (TESTPLAN ME-16 ...), shared by the system
tests (tests/system/test_event_manager.py) and the scenario runner (benches/eem/run.py).

Each scenario builds its test bed, runs, and returns a report: a dict with the seed's outcome
beside ours, the named checks behind a top-level `verdict`, and the timings; `write_report`
writes it as .json, .md and an .svg chart.

The mailbox is a real SMTP server, aiosmtpd's (PyPI), started in the router's namespace on its
loopback and writing each mail to a maildir, as PEERS.md describes.
"""

from __future__ import annotations

import email
import json
import mailbox
import os
import shutil
import subprocess
import tempfile
import sys
import time
from pathlib import Path

from .l2 import LinerateDaemon
from .netns import Netns, Testbed, wait_until

SMTP_PORT = 8025


class Mailbox:
    """aiosmtpd in namespace `ns` on 127.0.0.1:`port`, delivering to a maildir."""

    def __init__(self, ns: Netns, workdir: Path, port: int = SMTP_PORT) -> None:
        self.dir = workdir / "maildir"
        workdir.mkdir(parents=True, exist_ok=True)
        mailbox.Maildir(self.dir, create=True)
        self.port = port
        self.proc = ns.popen([sys.executable, "-m", "aiosmtpd", "-n", "-l", f"127.0.0.1:{port}",
                              "-c", "aiosmtpd.handlers.Mailbox", str(self.dir)],
                             log=workdir / "smtpd.log", name="aiosmtpd")
        # Ready once it answers a connection (an SMTP banner).
        wait_until(lambda: ns.run(["bash", "-c", f"exec 3<>/dev/tcp/127.0.0.1/{port}"],
                                  check=False).returncode == 0 or not self.proc.running,
                   10, what="the SMTP server")
        if not self.proc.running:
            raise RuntimeError((workdir / "smtpd.log").read_text())

    def messages(self) -> list[tuple[float, email.message.Message]]:
        """Every mail delivered so far, with the time its file appeared (the arrival)."""
        out = []
        box = mailbox.Maildir(self.dir, factory=None, create=False)
        for key in box.keys():
            path = self.dir / "new" / key
            if not path.exists():
                path = next((self.dir / "cur").glob(key + "*"), path)
            arrived = path.stat().st_mtime if path.exists() else time.time()
            out.append((arrived, email.message_from_bytes(box.get_bytes(key))))
        out.sort(key=lambda m: m[0])
        return out

    def wait(self, n: int, timeout: float) -> list[tuple[float, email.message.Message]]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = self.messages()
            if len(m) >= n:
                return m
            time.sleep(0.01)
        return self.messages()

    def stop(self) -> None:
        self.proc.stop()


def check(name: str, expected: str, measured, ok: bool) -> dict:
    return {"name": name, "expected": expected, "measured": measured, "pass": bool(ok)}


def body_of(msg: email.message.Message) -> str:
    if msg.is_multipart():
        return "\n".join(body_of(p) for p in msg.get_payload())
    payload = msg.get_payload(decode=True)
    return payload.decode("utf-8", "replace") if payload else ""


ME16_CONFIG = """\
router: {{ workers: 1 }}
ports:
  - {{ name: p0, driver: af_packet, device: d0 }}
  - {{ name: p1, driver: af_packet, device: d1 }}
interfaces:
  - {{ name: p0, port: p0, mac: "02:00:00:00:0a:01", ipv4: [192.0.2.1/24] }}
  - {{ name: p1, port: p1, mac: "02:00:00:00:0b:01", ipv4: [198.51.100.1/24] }}
logging: {{ hostname: me16-dut }}
event-manager:
  poll-ms: 50
  mail: {{ server: "127.0.0.1:{port}", from: linerate@me16.example }}
  rules:
    - name: link-down-mail
      detector: {{ link: {{ port: any, state: down }} }}
      actions:
        - mail:
            to: [noc@me16.example]
            subject: "{{host}}: port {{port}} link down"
            body: "Port {{port}} of {{host}} lost its link at {{time}} ({{event}})."
            show: ["show link {{port}}", "show counters", "show interfaces"]
        - syslog: {{ severity: crit, msgid: NOC_PAGED, text: "port {{port}} down: NOC mailed" }}
      resolve-actions:
        - mail:
            to: [noc@me16.example]
            subject: "{{host}}: port {{port}} link up"
            body: "Port {{port}} of {{host}} has its link back ({{time}})."
"""


def me16(bin_: Path, tb: Testbed, workdir: Path, traffic_s: float = 1.0) -> dict:
    """ME-16: a link goes down; the NOC gets an email with the interface's counters and link
    diagnostics within 5 s (the seed's), the event manager acting within 100 ms (ours)."""
    dut, (h1, h2) = tb.hosts_around(2)
    h1.addr("eth0", "192.0.2.2/24")
    h2.addr("eth0", "198.51.100.2/24")
    h1.route("default", "via", "192.0.2.1")
    h2.route("default", "via", "198.51.100.1")
    box = Mailbox(dut, workdir)
    r = LinerateDaemon(bin_, dut, workdir / "dut", ME16_CONFIG.format(port=SMTP_PORT).splitlines())
    try:
        # Traffic first, so that the counters the mail carries are not all zero.
        if not h1.ping("198.51.100.2", count=3, timeout=3):
            raise RuntimeError("no path through the router: " + r.log.read_text())
        h1.run(["ping", "-q", "-c", str(max(1, int(traffic_s * 50))), "-i", "0.02",
                "198.51.100.2"], check=False, timeout=traffic_s + 30)
        before = len(box.messages())
        # The cable pull: the far end goes down, so d1 loses its carrier.
        t_down = time.time()
        h2.run(["ip", "link", "set", "eth0", "down"])
        mails = box.wait(before + 1, timeout=10)
        t_wait_end = time.time()
        got = mails[before:] if len(mails) > before else []
        em = r.cli_json("show", "event-manager")
        logs = r.cli_json("show", "logging", "-n", "200")
        # And back: the resolve mail.
        h2.run(["ip", "link", "set", "eth0", "up"])
        back = box.wait(before + 2, timeout=10)
        em_after = r.cli_json("show", "event-manager")
    finally:
        r.stop()
        box.stop()
    rule = next(x for x in em["rules"] if x["name"] == "link-down-mail")
    mail_action = rule["actions"][0]
    down_mail = got[0][1] if got else None
    body = body_of(down_mail) if down_mail else ""
    arrival_ms = (got[0][0] - t_down) * 1000 if got else None
    link_rec = next((x for x in logs if x["msgid"] == "LINK_DOWN" and "p1" in x["text"]), None)
    paged = next((x for x in logs if x["msgid"] == "NOC_PAGED"), None)
    rule_after = next(x for x in em_after["rules"] if x["name"] == "link-down-mail")
    up_mail = back[before + 1][1] if len(back) > before + 1 else None
    dispatch_ms = rule["last_event_to_dispatch_ms"]
    diag_ok = "carrier changes" in body and "operstate" in body and "d1" in body
    done_ms = mail_action["last_event_to_done_ms"]
    checks = [
        check("mail arrives within 5 s of the link going down (seed)", "<= 5000 ms",
              None if arrival_ms is None else round(arrival_ms, 1),
              arrival_ms is not None and arrival_ms <= 5000),
        check("the mail names the port and the router", "subject has p1 and me16-dut",
              down_mail["Subject"] if down_mail else None,
              bool(down_mail) and "p1" in down_mail["Subject"]
              and "me16-dut" in down_mail["Subject"]),
        check("the mail carries the interface's counters", "show counters in the body",
              "present" if "--- show counters" in body and "RX frames" in body else "absent",
              "--- show counters" in body and "RX frames" in body),
        check("the mail carries link diagnostics", "carrier, operstate, carrier changes of d1",
              "present" if diag_ok else "absent", diag_ok),
        check("event to action (dispatch) under 100 ms (target)", "< 100 ms",
              dispatch_ms, dispatch_ms is not None and dispatch_ms < 100),
        check("the syslog action ran", "NOC_PAGED record", paged["text"] if paged else None,
              paged is not None),
        check("the rule resolves when the link returns, and says so", "resolved 1, link-up mail",
              f"resolved {rule_after['resolved']}, "
              f"{'mail: ' + up_mail['Subject'] if up_mail else 'no mail'}",
              rule_after["resolved"] >= 1 and up_mail is not None
              and "up" in up_mail["Subject"]),
    ]
    return {
        "scenario": "ME-16",
        "title": "Event manager: link failure mails the NOC",
        "seed": {"outcome": "e-mail with the interface's counters and cable (TDR) diagnostics "
                            "within 5 s of the link failure"},
        "ours": {
            "link_down_to_mail_ms": None if arrival_ms is None else round(arrival_ms, 1),
            "event_to_dispatch_ms": dispatch_ms,
            "event_to_mail_sent_ms": done_ms,
            "link_record": link_rec["text"] if link_rec else None,
            "subject": down_mail["Subject"] if down_mail else None,
            "body": body,
            "mail_detail": mail_action["last_detail"],
            "waited_s": round(t_wait_end - t_down, 3),
        },
        "timeline_ms": [
            ("link down (h2's end)", 0.0),
            ("router logs LINK_DOWN, rule dispatched", dispatch_ms),
            ("mail accepted by the relay", done_ms),
            ("mail in the mailbox", None if arrival_ms is None else round(arrival_ms, 1)),
        ],
        "checks": checks,
        "verdict": "pass" if all(c["pass"] for c in checks) else "fail",
    }


LR_MAC = ["02:00:00:00:0a:01", "02:00:00:00:0b:01"]
T_MAC = ["02:00:00:00:00:02", "02:00:00:00:01:02"]

ME17_DUT = """\
router: {{ workers: 1 }}
ports:
  - {{ name: p0, driver: af_packet, device: d0 }}
  - {{ name: p1, driver: af_packet, device: d1 }}
interfaces:
  - {{ name: p0, port: p0, mac: "{m0}", ipv4: [198.18.0.1/24] }}
  - {{ name: p1, port: p1, mac: "{m1}", ipv4: [198.18.1.1/24] }}
control-plane:
  taps: true
  punt:
    # Unprotected at first, as the seed's route processor took what came.
    local: {{ rate: 1000000, burst: 100000 }}
qos:
  classes:
    - {{ name: to-router, match: ["dst host 198.18.0.1"] }}
  policies:
    - name: cp-guard
      classes:
        - {{ class: to-router, police: {{ cir: 2m, violate: drop }} }}
event-manager:
  poll-ms: 50
  rules:
    - name: cpu-guard
      detector: {{ cpu: {{ of: control, above: {threshold} }} }}
      keep-firing-for-ms: 3000
      actions:
        - syslog: {{ severity: alert, msgid: CPU_GUARD, text: "control-plane CPU {{value}}%: limiting what reaches it" }}
        - commit:
            set:
              "control-plane.punt.local": "{{ rate: 2000, burst: 200 }}"
              "interfaces[name=p0].qos-in": cp-guard
      resolve-actions:
        - syslog: {{ msgid: CPU_GUARD, text: "control-plane CPU back to {{value}}%" }}
"""

ME17_TESTER_DUT = """\
ports:
  - {{ name: p0, driver: af_packet, device: d0 }}
  - {{ name: p1, driver: af_packet, device: d1 }}
interfaces:
  - {{ name: p0, port: p0, mac: "{m0}", ipv4: [198.18.0.1/24] }}
  - {{ name: p1, port: p1, mac: "{m1}", ipv4: [198.18.1.1/24] }}
neighbors:
  - {{ interface: p0, ip: 198.18.0.2, mac: "{t0}" }}
  - {{ interface: p1, ip: 198.18.1.2, mac: "{t1}" }}
"""

ME17_FLOOD = """\
streams:
  # TTL 1 to the router's own address: every frame goes up to the control plane.
  - {{ name: flood, from: p0, to: p1, ipv4: {{ src: 198.18.0.2, dst: 198.18.0.1 }},
      udp: {{ src: 1024, dst: 9 }}, ttl: 1,
      vary: [ {{ field: src-port, count: 1000 }} ] }}
"""


def two_links(tb: Testbed, workdir: Path):
    """The tester's namespace and the router's, joined by t0-d0 and t1-d1 (IPv6 off, so the
    kernel adds nothing to the links), the router's loopback up; `workdir` made."""
    tst, dut = tb.netns("tester"), tb.netns("dut")
    tb.veth(tst, "t0", dut, "d0")
    tb.veth(tst, "t1", dut, "d1")
    tst.sysctl({"net.ipv6.conf.t0.disable_ipv6": 1, "net.ipv6.conf.t1.disable_ipv6": 1})
    for d in ("d0", "d1"):
        dut.sysctl({f"net.ipv6.conf.{d}.disable_ipv6": 1})
        dut.up(d)
    dut.up("lo")
    workdir.mkdir(parents=True, exist_ok=True)
    return tst, dut


def control_cpu(r: LinerateDaemon) -> float:
    """The control-plane threads' CPU over the last second, % of one CPU."""
    rows = r.cli_json("show", "processes", "cpu")["rows"]
    return sum(x["cpu_1s"] for x in rows if x["kind"] == "control")


def me17(bin_: Path, tb: Testbed, workdir: Path, load_pct: float = 2.0, seconds: int = 12,
         threshold: float = 90.0) -> dict:
    """ME-17: a flood to the control plane drives its CPU above the threshold; a rule applies
    a rate limiter on the receiving interface (and lowers the punt rate) by a commit; the CPU
    returns to normal. Reports the CPU before, at the peak and after, and the times."""
    tst, dut = two_links(tb, workdir)
    r = LinerateDaemon(bin_, dut, workdir / "dut",
                       ME17_DUT.format(m0=LR_MAC[0], m1=LR_MAC[1],
                                       threshold=threshold).splitlines())
    tdut = workdir / "tester-dut.yaml"
    tdut.write_text(ME17_TESTER_DUT.format(m0=LR_MAC[0], m1=LR_MAC[1], t0=T_MAC[0], t1=T_MAC[1]))
    flood = workdir / "flood.yaml"
    flood.write_text(ME17_FLOOD.format())
    samples: list[tuple[float, float]] = []
    try:
        time.sleep(2.5)  # two CPU samples before the flood
        idle = control_cpu(r)
        t_flood = time.time()
        gen = tst.popen([str(bin_), "bench", "external", "--dut", str(tdut), "--port", "p0=t0",
                         "--port", "p1=t1", "--streams", str(flood), "--sizes", "64",
                         "--load", str(load_pct), "--seconds", str(seconds), "--core", "0",
                         "--out", str(workdir / "flood")],
                        log=workdir / "flood.log", name="tester")
        while gen.running:
            samples.append((time.time() - t_flood, control_cpu(r)))
            time.sleep(0.25)
        em = r.cli_json("show", "event-manager")
        logs = r.cli_json("show", "logging", "-n", "300")
        hist = r.cli_json("config", "history")
        time.sleep(4.5)  # keep-firing-for, then the resolve
        em_after = r.cli_json("show", "event-manager")
        after_idle = control_cpu(r)
        punt = r.cli_json("show", "punt")
    finally:
        r.stop()
    rule = em["rules"][0]
    commit = rule["actions"][1]
    fired_at = (rule["last_fired_unix"] - t_flood) if rule["last_fired_unix"] else None
    dispatch_ms = rule["last_event_to_dispatch_ms"]
    commit_ms = commit["last_event_to_done_ms"]
    mitigated_at = None if fired_at is None or commit_ms is None else fired_at + commit_ms / 1000
    peak = max((c for _, c in samples), default=0.0)
    # "After": the samples from 2 s after the commit (the sampler's window has moved past it)
    # until the flood stops.
    after = [c for t, c in samples if mitigated_at is not None and t > mitigated_at + 2.0
             and t < seconds - 0.5]
    after_avg = sum(after) / len(after) if after else None
    first_above = next((t for t, c in samples if c > threshold), None)
    guard = next((x for x in logs if x["msgid"] == "CPU_GUARD"), None)
    committed = next((h for h in hist if h["comment"] == "event-manager rule cpu-guard"), None)
    local = next(c for c in punt["classes"] if c["class"] == "local")
    checks = [
        check("the flood drives the control-plane CPU above the threshold", f"> {threshold}%",
              round(peak, 1), peak > threshold),
        check("the rule fires", "fired once", rule["fired"], rule["fired"] == 1),
        check("mitigated within 1 s of the threshold (target)",
              "commit done <= 1000 ms after the sample above the threshold",
              commit_ms, commit_ms is not None and commit_ms <= 1000),
        check("the remedy is a commit: interface policer and punt rate", "cp-guard on p0, "
              "local 2000/s", (committed["summary"] if committed else None),
              committed is not None and local["rate"] == 2000),
        check("the CPU returns to normal under the flood", f"< {threshold / 2:g}%",
              None if after_avg is None else round(after_avg, 1),
              after_avg is not None and after_avg < threshold / 2),
        check("logged", "CPU_GUARD record", guard["text"] if guard else None, guard is not None),
        check("the rule resolves once the CPU stays low", "resolved 1",
              em_after["rules"][0]["resolved"], em_after["rules"][0]["resolved"] >= 1),
    ]
    return {
        "scenario": "ME-17",
        "title": "Event manager: control-plane CPU protection",
        "seed": {"outcome": "a TTL=1 flood drove the route processor's CPU above 90%; an EEM "
                            "policy applied a rate limiter and the CPU returned to normal"},
        "ours": {
            "flood": f"64-byte UDP, TTL 1, to 198.18.0.1, {load_pct}% of 10 Gbit/s offered",
            "cpu_idle_pct": round(idle, 1),
            "cpu_peak_pct": round(peak, 1),
            "cpu_after_pct": None if after_avg is None else round(after_avg, 1),
            "cpu_idle_after_pct": round(after_idle, 1),
            "first_sample_above_s": first_above,
            "fired_s_after_flood": None if fired_at is None else round(fired_at, 3),
            "event_to_dispatch_ms": dispatch_ms,
            "event_to_commit_done_ms": commit_ms,
            "commit": committed,
            "samples": samples,
        },
        "timeline_ms": [
            ("tester starts (priming, then the flood)", 0.0),
            ("show processes cpu first above the threshold",
             None if first_above is None else first_above * 1000),
            ("the rule fires (CPU sample above it)",
             None if fired_at is None else fired_at * 1000),
            ("commit applied (policer, punt rate)",
             None if mitigated_at is None else mitigated_at * 1000),
        ],
        "checks": checks,
        "verdict": "pass" if all(c["pass"] for c in checks) else "fail",
    }


def svg_timeline(title: str, points: list[tuple[str, float | None]], limit_ms: float) -> str:
    """A horizontal bar per step, its length the time from the event (ms), against a limit."""
    w, left, row = 720, 300, 28
    h = 60 + row * len(points)
    top = max([limit_ms] + [v for _, v in points if v is not None]) or 1.0
    scale = (w - left - 40) / top
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
           f'font-family="sans-serif" font-size="12">',
           f'<text x="10" y="20" font-size="14">{title}</text>']
    for i, (name, v) in enumerate(points):
        y = 40 + i * row
        out.append(f'<text x="10" y="{y + 14}">{name}</text>')
        if v is None:
            out.append(f'<text x="{left}" y="{y + 14}" fill="#b00">not seen</text>')
            continue
        out.append(f'<rect x="{left}" y="{y}" width="{max(1.0, v * scale):.1f}" height="18" '
                   f'fill="#4a7bd0"/>')
        out.append(f'<text x="{left + max(1.0, v * scale) + 4:.1f}" y="{y + 14}">{v:.1f} ms'
                   '</text>')
    x = left + limit_ms * scale
    out.append(f'<line x1="{x:.1f}" y1="32" x2="{x:.1f}" y2="{h - 10}" stroke="#b00" '
               'stroke-dasharray="4"/>')
    out.append(f'<text x="{x - 60:.1f}" y="{h - 2}" fill="#b00">limit {limit_ms:g} ms</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def write_report(rep: dict, out: Path, limit_ms: float) -> None:
    """`out`.json, `out`.md and `out`.svg."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(rep, indent=2, default=str) + "\n")
    out.with_suffix(".svg").write_text(svg_timeline(f"{rep['scenario']}: {rep['title']}",
                                                    rep["timeline_ms"], limit_ms))
    md = [f"# {rep['scenario']}: {rep['title']}", "",
          f"Verdict: **{rep['verdict']}**", "", "| | seed | Linerate |", "|---|---|---|",
          f"| outcome | {rep['seed']['outcome']} | see the checks and timeline below |", "",
          "| step | ms from the event |", "|---|---:|"]
    md += [f"| {n} | {'-' if v is None else f'{v:.1f}'} |" for n, v in rep["timeline_ms"]]
    md += ["", "| check | expected | measured | pass |", "|---|---|---|---|"]
    md += [f"| {c['name']} | {c['expected']} | {c['measured']} | {'yes' if c['pass'] else 'NO'} |"
           for c in rep["checks"]]
    body = rep.get("ours", {}).get("body")
    if body:
        md += ["", "The mail's body:", "", "```", body.rstrip(), "```"]
    md.append("")
    out.with_suffix(".md").write_text("\n".join(md))



FASTPATH_FLOW = """\
streams:
  - { name: fwd, from: p0, to: p1, ipv4: { src: 198.18.0.2, dst: 198.18.1.2 },
      vary: [ { field: src-port, count: 1000 } ] }
"""


def fastpath_rules(n: int, poll_ms: int) -> str:
    """`n` metric rules over the port, drop and punt counters that never fire, sampled every
    `poll_ms`: the event manager at work beside the forwarding."""
    if n == 0:
        return ""
    lines = [f"event-manager:\n  poll-ms: {poll_ms}\n  rules:"]
    names = ["linerate_port_rx_packets_total", "linerate_port_tx_packets_total",
             "linerate_drops_total", "linerate_punt_frames_total"]
    for i in range(n):
        lines.append(f"    - name: r{i}\n      detector: {{ metric: {{ name: {names[i % 4]}, "
                     f"kind: rate, above: 1e12, window-ms: 1000 }} }}\n"
                     f"      actions: [ {{ syslog: {{ text: x }} }} ]")
    return "\n".join(lines) + "\n"


def fastpath_flow_rules(n: int, poll_ms: int, cache_size: int, scan_ms: int) -> str:
    """Flow accounting into a `cache_size` cache and `n` flows rules that never fire (each a
    different match), their scans a pass every `scan_ms`."""
    out = [f"flow-export: {{ collectors: [\"127.0.0.1:2055\"], cache-size: {cache_size} }}"]
    if n == 0:
        return "\n".join(out) + "\n"
    out += [f"event-manager:\n  poll-ms: {poll_ms}\n  flow-scan-ms: {scan_ms}\n  rules:"]
    for i in range(n):
        out.append(f"    - name: f{i}\n      detector: {{ flows: {{ match: [\"udp dport {1000 + i}\", "
                   f"\"tcp dport {2000 + i}\"], per: source, above: 1e9 }} }}\n"
                   f"      actions: [ {{ syslog: {{ text: x }} }} ]")
    return "\n".join(out) + "\n"


def fastpath_once(bin_: Path, tb: Testbed, workdir: Path, rules: int, poll_ms: int,
                  load_pct: float, seconds: int, flows: bool = False,
                  cache_size: int = 2_000_000, scan_ms: int = 250) -> dict:
    """One fixed-load trial through a daemon with `rules` metric rules (with `flows`: flow
    accounting on both ports into a `cache_size` cache, and `rules` flows rules whose scans
    take `scan_ms` a pass): the DUT's own ns per frame (its workers' busy time), loss, and the
    event manager's poll cost."""
    tst, dut = two_links(tb, workdir)
    fl = ", flow: in" if flows else ""
    cfg = (f"router: {{ workers: 1 }}\nports:\n"
           f"  - {{ name: p0, driver: af_packet, device: d0 }}\n"
           f"  - {{ name: p1, driver: af_packet, device: d1 }}\ninterfaces:\n"
           f"  - {{ name: p0, port: p0, mac: \"{LR_MAC[0]}\", ipv4: [198.18.0.1/24]{fl} }}\n"
           f"  - {{ name: p1, port: p1, mac: \"{LR_MAC[1]}\", ipv4: [198.18.1.1/24]{fl} }}\n"
           + (fastpath_flow_rules(rules, poll_ms, cache_size, scan_ms) if flows
              else fastpath_rules(rules, poll_ms)))
    r = LinerateDaemon(bin_, dut, workdir / "dut", cfg.splitlines())
    tdut = workdir / "tester-dut.yaml"
    tdut.write_text(ME17_TESTER_DUT.format(m0=LR_MAC[0], m1=LR_MAC[1], t0=T_MAC[0], t1=T_MAC[1]))
    flow = workdir / "flow.yaml"
    flow.write_text(FASTPATH_FLOW)
    try:
        p = tst.run([str(bin_), "bench", "external", "--dut", str(tdut), "--port", "p0=t0",
                     "--port", "p1=t1", "--streams", str(flow), "--sizes", "64", "--load",
                     str(load_pct), "--seconds", str(seconds), "--core", "0", "--dut-api",
                     str(r.sock), "--out", str(workdir / "trial")], check=False,
                    timeout=seconds + 120)
        if p.returncode != 0:
            raise RuntimeError(p.stdout + p.stderr)
        em = r.cli_json("show", "event-manager")
    finally:
        r.stop()
    rep = json.loads((workdir / "trial" / "external.json").read_text())
    t = rep["rows"][0]["trials"][0]
    return {"rules": rules, "flows": flows, "poll_ms": poll_ms, "tx": t["tx"], "rx": t["rx"],
            "lost": t["lost"], "rx_fps": t["rx_fps"],
            "dut_busy_ns_per_frame": t["cpu"]["dut_busy_ns_per_frame"],
            "polls": em.get("polls", 0), "last_poll_us": em.get("last_poll_us", 0),
            "max_poll_us": em.get("max_poll_us", 0)}


class Terminal:
    """A program in a real terminal (tmux): keys in, the screen out."""

    def __init__(self, name: str, argv: list[str], width: int = 200, height: int = 60) -> None:
        self.name = name
        subprocess.run(["tmux", "kill-session", "-t", name], capture_output=True)
        subprocess.run(["tmux", "new-session", "-d", "-s", name, "-x", str(width), "-y",
                        str(height), " ".join(argv)], check=True)

    def keys(self, *keys: str) -> None:
        subprocess.run(["tmux", "send-keys", "-t", self.name, *keys], check=True)

    def screen(self) -> str:
        return subprocess.run(["tmux", "capture-pane", "-p", "-t", self.name, "-S", "-200"],
                              capture_output=True, text=True, check=True).stdout

    def wait_for(self, text: str, timeout: float = 10.0) -> str:
        # The screen comes without trailing blanks.
        text = text.rstrip()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            s = self.screen()
            if text in s:
                return s
            time.sleep(0.05)
        raise TimeoutError(f"{text!r} not on the screen:\n{self.screen()}")

    def close(self) -> None:
        subprocess.run(["tmux", "kill-session", "-t", self.name], capture_output=True)


# One port on d0, the punt class `local` at 1,000/s: what the smaller tests add rules to.
ONE_PORT = """\
router: { workers: 1, idle-sleep-us: 50 }
ports:
  - { name: p0, driver: af_packet, device: d0 }
interfaces:
  - { name: p0, port: p0, mac: "02:00:00:00:0a:01", ipv4: [192.0.2.1/24] }
control-plane:
  punt:
    local: { rate: 1000, burst: 100 }
"""

ME19_CONFIG = ONE_PORT + """\
logging: { hostname: me19-dut }
event-manager:
  rules:
    - name: config-attempts
      detector: { command: { pattern: "^(configure|config apply)" } }
      actions:
        - syslog: { severity: notice, msgid: CONFIG_ATTEMPT,
                    text: "configuration by {user} from {terminal}: {command}" }
"""


def me19(bin_: Path, tb: Testbed, workdir: Path) -> dict:
    """ME-19: every attempt to enter configuration mode (interactive, or a config applied
    through the API) is logged with who and from where, by a rule on the commands."""
    dut, _ = tb.hosts_around(1)
    # A folder anyone may enter, for the socket and a copy of the binary: the read-only user
    # (nobody) must reach both; the test's own folders are root's alone.
    pub = Path(tempfile.mkdtemp(prefix="lr-me19-"))
    pub.chmod(0o755)
    ro_bin = pub / "linerate"
    shutil.copy(bin_, ro_bin)
    ro_bin.chmod(0o755)
    r = LinerateDaemon(bin_, dut, workdir / "dut", ME19_CONFIG.splitlines(),
                       sock=pub / "api.sock")
    term = Terminal("lr-me19", [str(bin_), "--socket", str(r.sock), "cli"])
    seen: dict[str, str] = {}
    try:
        term.wait_for("me19-dut# ")
        # Completion and help from the command tree.
        term.keys("show int", "Tab")
        seen["completed"] = term.wait_for("show interfaces ")
        term.keys("Enter")
        seen["interfaces"] = term.wait_for("192.0.2.1/24")
        term.keys("show ?")
        seen["help"] = term.wait_for("event-manager")
        term.keys("C-u", "sh int | include p0", "Enter")
        seen["filtered"] = term.wait_for("me19-dut# ", 5)
        # Configure mode: a change, its diff, a commit.
        term.keys("configure", "Enter")
        seen["configure"] = term.wait_for("me19-dut(config)# ")
        term.keys("set control-plane.punt.local.rate 500", "Enter")
        term.keys("show | compare", "Enter")
        seen["compare"] = term.wait_for("rate: 500")
        term.keys("commit comment from the CLI", "Enter")
        seen["commit"] = term.wait_for("commit ")
        term.keys("exit", "Enter")
        time.sleep(0.3)
        term.keys("exit", "Enter")
        # A config applied through the API (the one-shot CLI): an attempt too.
        running = json.loads(subprocess.run(
            [str(bin_), "--socket", str(r.sock), "show", "running-config", "--json"],
            capture_output=True, text=True, check=True).stdout)["text"]
        f = pub / "api.yaml"
        f.write_text(running.replace("rate: 500", "rate: 600"))
        f.chmod(0o644)
        api_apply = subprocess.run([str(bin_), "--socket", str(r.sock), "config", "apply",
                                    str(f)], capture_output=True, text=True)
        # A user who may not: refused, and logged as refused.
        os.chmod(r.sock, 0o666)
        ro = subprocess.run(["runuser", "-u", "nobody", "--", str(ro_bin), "--socket",
                             str(r.sock), "config", "apply", str(f)],
                            capture_output=True, text=True)
        time.sleep(0.5)
        logs = r.cli_json("show", "logging", "-n", "300")
        punt = r.cli_json("show", "punt")
        em = r.cli_json("show", "event-manager")
    finally:
        term.close()
        r.stop()
        shutil.rmtree(pub, ignore_errors=True)
    attempts = [x for x in logs if x["msgid"] == "CONFIG_ATTEMPT"]
    modes = [x for x in logs if x["msgid"] == "CONFIG_MODE"]
    refused = [x for x in logs if x["msgid"] == "COMMAND"
               and any(k == "refused" for k, _ in x.get("params", []))]
    local = next(c for c in punt["classes"] if c["class"] == "local")
    tty = next((x["text"].split(" on ", 1)[1].split(":", 1)[0] for x in modes), None)
    checks = [
        check("tab completes from the command tree", "`show int` -> `show interfaces`",
              "completed" if "show interfaces" in seen.get("completed", "") else "no",
              "show interfaces" in seen.get("completed", "")),
        check("`?` lists what may follow", "show's words with their help",
              "listed" if "event-manager" in seen.get("help", "") else "no",
              "event-manager" in seen.get("help", "")),
        check("entering configure mode is logged with user and terminal",
              "CONFIG_MODE: root on pts/N", modes[0]["text"] if modes else None,
              bool(modes) and modes[0]["text"].startswith("root on pts/")),
        check("the candidate's commit changed the router", "local punt rate 500 then 600 "
              "(API)", local["rate"], local["rate"] == 600 and api_apply.returncode == 0),
        check("the rule logs every attempt: interactive and API",
              ">= 3 CONFIG_ATTEMPT (configure, config apply, refused apply)",
              [a["text"] for a in attempts], len(attempts) >= 3
              and any("configure" in a["text"] and "pts/" in a["text"] for a in attempts)
              and any("config apply" in a["text"] and "nobody" in a["text"]
                      for a in attempts)),
        check("a read-only user is refused and the refusal logged", "exit 1, COMMAND refused",
              f"exit {ro.returncode}: {ro.stderr.strip()[:80]}",
              ro.returncode != 0 and "read-only" in ro.stderr and bool(refused)),
    ]
    rule = em["rules"][0]
    return {
        "scenario": "ME-19",
        "title": "Event manager: every attempt to enter configuration mode is logged",
        "seed": {"outcome": "an EEM applet on the CLI pattern logged each `configure terminal`"},
        "ours": {"terminal": tty, "attempts": [a["text"] for a in attempts],
                 "config_mode": [m["text"] for m in modes], "fired": rule["fired"],
                 "event_to_dispatch_ms": rule["last_event_to_dispatch_ms"],
                 "screen": seen.get("compare", "")[-1500:]},
        "timeline_ms": [("command received", 0.0),
                        ("rule dispatched", rule["last_event_to_dispatch_ms"])],
        "checks": checks,
        "verdict": "pass" if all(c["pass"] for c in checks) else "fail",
    }
