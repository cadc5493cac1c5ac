"""How a benchmark splits this machine's CPUs between the tester and the device under test:
receive work steered by RPS, threaded NAPI pinned where XDP puts it, processes at the highest
priority, and the machine's busy cores measured from /proc/stat."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from .netns import Netns

BOOST = 'echo -20 > /proc/self/autogroup; exec nice -n -20 "$@"'


def boosted(argv: list[str], on: bool) -> list[str]:
    """`argv` at the highest CPU priority, when `on`: nice -20 and, since the kernel schedules
    each session as a group (autogroup), its session's group at -20 too (the process must be in
    a session of its own: `setsid` or popen's new session). On a machine shared with other
    work (compilers), the tester and the device would otherwise lose their cores to it for
    milliseconds at a time, and measure that."""
    return ["sh", "-c", BOOST, "sh", *argv] if on else argv


def busy_cores(seconds: float) -> float:
    """The machine's busy cores over `seconds`: every CPU's time not idle, waiting for I/O or
    stolen (exact on a tickless kernel, unlike the tick-sampled user + system)."""
    def read():
        f = [int(x) for x in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
        return f[3] + f[4] + f[7], time.monotonic()
    hz = os.sysconf("SC_CLK_TCK")
    ncpu = os.cpu_count() or 1
    (a, t0) = read()
    time.sleep(seconds)
    (b, t1) = read()
    return max(0.0, ncpu - (b - a) / hz / (t1 - t0))


def rps(ns: Netns, devs, cpu: int) -> None:
    """Steers the receive work of `devs` (on a veth: the sender's softirq) to `cpu`."""
    mask = format(1 << cpu, "x")
    for d in devs:
        ns.run(f"for q in /sys/class/net/{d}/queues/rx-*; do echo {mask} > $q/rps_cpus; done")


def napi_on_core(ns: Netns, devs, core: int) -> None:
    """With an XDP program attached, a veth receives in NAPI on the sending CPU (the tester's),
    where RPS cannot move it. Threaded NAPI pinned to the device's core puts that work where a
    NIC's IRQ affinity would."""
    for d in devs:
        ns.run(f"echo 1 > /sys/class/net/{d}/threaded")
    pattern = "^napi/(" + "|".join(devs) + ")-"
    pids: list[str] = []
    for _ in range(50):
        pids = subprocess.run(["pgrep", pattern], capture_output=True, text=True).stdout.split()
        if len(pids) >= len(devs):
            break
        time.sleep(0.1)
    if not pids:
        raise RuntimeError(f"no NAPI threads of {', '.join(devs)} after enabling threaded NAPI")
    for pid in pids:
        subprocess.run(["taskset", "-p", "-c", str(core), pid], check=True, capture_output=True)
        # Real-time, as a softirq would be: the polling worker on that core must not starve
        # its own receive path.
        subprocess.run(["chrt", "-f", "-p", "50", pid], check=True, capture_output=True)
    print(f"  threaded NAPI on {', '.join(devs)} ({len(pids)} threads) pinned to CPU {core}",
          file=sys.stderr)
