"""The package build compiles the per-probe modules with mypyc (engine/runtime/compiled.py) when it
can, and builds a working pure-Python package when it cannot."""

from __future__ import annotations

import importlib.machinery
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import orjson
import pytest

from engine.runtime.compiled import MODULES, compiled_modules, is_stale, stale_modules

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(
    os.environ.get("UPWATCH_PURE_PYTHON", "") not in ("", "0") or shutil.which("cc") is None,
    reason="built as pure Python (UPWATCH_PURE_PYTHON, or no C compiler)",
)
def test_the_installed_hot_path_runs_compiled_and_current() -> None:
    assert compiled_modules() == dict.fromkeys(MODULES, True)
    assert stale_modules() == []


def test_pure_python_at_run_time_loads_every_source() -> None:
    """UPWATCH_PURE_PYTHON=1 at run time: the sources, all of them (tls.py subclasses
    _net's connection, so a mix would not even import), and a probe module works."""
    code = (
        "import orjson, engine.probes.tls, engine.scheduler.engine\n"
        "from engine.runtime.compiled import compiled_modules\n"
        "print(orjson.dumps(compiled_modules()).decode())\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], env=dict(os.environ, UPWATCH_PURE_PYTHON="1"),
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=True,
    )
    assert orjson.loads(run.stdout) == dict.fromkeys(MODULES, False)


def test_without_a_c_compiler_the_build_is_pure_python(tmp_path: Path) -> None:
    """CC=false: mypyc generates its C, every compile fails, and the wheel still builds,
    with every module as source and no extension left behind."""
    src = tmp_path / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(
        ".venv", ".git", "build", "*.so", "*.egg-info", "tests", "test-artifacts", ".*cache"))
    env = dict(os.environ, CC="false", LDSHARED="false")
    env.pop("UPWATCH_PURE_PYTHON", None)
    run = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
         "--disable-pip-version-check", "-v", "-w", str(tmp_path / "dist"), str(src)],
        env=env, capture_output=True, text=True, timeout=300, check=False,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "the C compile failed" in run.stdout + run.stderr
    (wheel,) = (tmp_path / "dist").glob("upwatch-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert not [n for n in names if n.endswith(".so")]
    for module in MODULES:
        assert module.replace(".", "/") + ".py" in names


def test_an_installed_copy_is_never_called_stale_but_an_edited_checkout_is(
    tmp_path: Path,
) -> None:
    """A regular install copies each .py a few microseconds after its extension: no alarm.
    In a checkout (pyproject.toml beside the package) a source newer than its build is."""
    suffix = next(s for s in importlib.machinery.EXTENSION_SUFFIXES if s.startswith(".cpython"))
    for root, checkout in ((tmp_path / "site-packages", False), (tmp_path / "src", True)):
        pkg = root / "engine" / "probes"
        pkg.mkdir(parents=True)
        if checkout:
            (root / "pyproject.toml").write_text("[project]\nname = 'upwatch'\n")
        built = pkg / f"http{suffix}"
        built.write_bytes(b"")
        source = pkg / "http.py"
        source.write_text("# copied after the extension\n")
        os.utime(built, ns=(1_000_000_000_000_000_000, 1_000_000_000_000_000_000))
        os.utime(source, ns=(1_000_000_000_000_005_000, 1_000_000_000_000_005_000))  # +5 us
        assert is_stale("engine.probes.http", built) is checkout
        os.utime(source, ns=(999_999_999_000_000_000, 999_999_999_000_000_000))  # older
        assert is_stale("engine.probes.http", built) is False
