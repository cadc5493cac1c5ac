"""The CLI into a pipe whose reader leaves early (`| head -1`): a quiet end, not a panic."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

BROKEN_PIPE_STATUS = 141  # 128 + SIGPIPE, what a shell reports for `yes | head -1`'s `yes`


def first_line_then_close(cmd: list[str]) -> tuple[bytes, int, str]:
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdout is not None and p.stderr is not None
    first = p.stdout.readline()
    p.stdout.close()
    err = p.stderr.read().decode(errors="replace")
    return first, p.wait(timeout=60), err


def test_show_into_a_closed_pipe_ends_quietly(linerate_bin: Path, tmp_path: Path) -> None:
    routes = tmp_path / "many.routes"
    routes.write_text("".join(f"10.{i >> 8}.{i & 255}.0/24 via 198.51.100.2\n" for i in range(20000)))
    config = tmp_path / "router.yaml"
    config.write_text(
        "ports:\n  - { name: p0, driver: mem }\n"
        "interfaces:\n  - { name: p0, port: p0, mac: \"02:00:00:00:00:01\", ipv4: [198.51.100.1/24] }\n"
        "neighbors:\n  - { interface: p0, ip: 198.51.100.2, mac: \"02:00:00:00:00:02\" }\n"
        f"route-files:\n  - {{ path: {routes} }}\n"
    )
    sock = tmp_path / "api.sock"
    d = subprocess.Popen(
        [str(linerate_bin), "daemon", "--config", str(config), "--no-state", "--socket", str(sock)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        for _ in range(400):
            ok = subprocess.run(
                [str(linerate_bin), "--socket", str(sock), "show", "system"], capture_output=True
            )
            if ok.returncode == 0:
                break
            assert d.poll() is None, d.stderr.read() if d.stderr else ""
            time.sleep(0.05)
        else:
            raise AssertionError("daemon did not answer")
        first, rc, err = first_line_then_close(
            [str(linerate_bin), "--socket", str(sock), "show", "ip", "route", "--limit", "0"]
        )
        assert first.strip()
        assert "panicked" not in err and err.strip() == "", err
        assert rc == BROKEN_PIPE_STATUS, rc
    finally:
        d.terminate()
        d.wait(timeout=20)
