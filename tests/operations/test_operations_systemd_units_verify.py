"""deploy/ systemd units pass ``systemd-analyze verify`` with no warning at all."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
ANALYZE = shutil.which("systemd-analyze")


def _installed(tmp_path: Path, unit: str, name: str | None = None) -> Path:
    """The unit with ExecStart pointing at this venv's upwatch (verify checks it exists)."""
    text = (DEPLOY / unit).read_text()
    upwatch = Path(sys.executable).parent / "upwatch"
    assert "/opt/upwatch/.venv/bin/upwatch" in text
    out = tmp_path / (name or unit)
    out.write_text(text.replace("/opt/upwatch/.venv/bin/upwatch", str(upwatch)))
    return out


@pytest.mark.skipif(ANALYZE is None, reason="systemd-analyze is not installed")
@pytest.mark.parametrize(("unit", "name"), [("upwatch.service", None),
                                            ("upwatch@.service", "upwatch@eu.service")])
def test_unit_verifies_cleanly(tmp_path: Path, unit: str, name: str | None) -> None:
    path = _installed(tmp_path, unit, name)
    res = subprocess.run([ANALYZE, "verify", str(path)], capture_output=True, text=True,
                         timeout=60, check=False)
    findings = [line for line in (res.stdout + res.stderr).splitlines() if path.name in line]
    assert res.returncode == 0 and findings == [], res.stdout + res.stderr


def test_units_ask_for_notify_watchdog_and_hardening() -> None:
    for unit in ("upwatch.service", "upwatch@.service"):
        text = (DEPLOY / unit).read_text()
        for directive in ("Type=notify", "WatchdogSec=", "DynamicUser=yes",
                          "ProtectSystem=strict", "NoNewPrivileges=yes", "EnvironmentFile="):
            assert directive in text, f"{unit} lacks {directive}"


def _admin_lines() -> list[list[str]]:
    """The ``systemd-run`` commands of deploy/README.md, each as its words."""
    import re
    import shlex

    text = (DEPLOY / "README.md").read_text()
    blocks = re.findall(r"```sh\n(sudo systemd-run .*?)```", text, re.S)
    return [shlex.split(block.replace("\\\n", " ")) for block in blocks]


def test_the_admin_line_runs_as_the_units_user_on_their_state_directory(tmp_path: Path) -> None:
    """The README's admin command gets the service's uid and data only if its User=,
    DynamicUser= and StateDirectory= are the unit's; its properties form a unit that
    systemd accepts."""
    lines = _admin_lines()
    assert len(lines) == 2
    for words, unit, instance in zip(lines, ("upwatch.service", "upwatch@.service"),
                                     ("", "eu"), strict=True):
        props = [words[i + 1] for i, w in enumerate(words) if w == "-p"]
        env = [words[i + 1] for i, w in enumerate(words) if w == "-E"]
        text = (DEPLOY / unit).read_text().replace("%i", instance)
        for wanted in ("DynamicUser=yes", "User=upwatch", "StateDirectory="):
            (line,) = [p for p in props if p.startswith(wanted)]
            assert line in text.splitlines(), (unit, line)
        (data_dir,) = [e for e in env if e.startswith("UPWATCH_DATA_DIR=")]
        assert f"Environment={data_dir}" in text.splitlines()
        if ANALYZE is not None:
            command = [str(Path(sys.executable).parent / "upwatch"),
                       *words[words.index("/opt/upwatch/.venv/bin/upwatch") + 1:]]
            service = tmp_path / f"upwatch-admin{instance}.service"
            service.write_text("[Service]\nType=oneshot\n" + "".join(f"{p}\n" for p in props)
                               + "".join(f"Environment={e}\n" for e in env)
                               + f"ExecStart={' '.join(command)}\n")
            res = subprocess.run([ANALYZE, "verify", str(service)], capture_output=True,
                                 text=True, timeout=60, check=False)
            assert res.returncode == 0 and service.name not in res.stdout + res.stderr, \
                res.stdout + res.stderr
