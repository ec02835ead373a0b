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
