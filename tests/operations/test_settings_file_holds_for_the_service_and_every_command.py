"""A setting made once, in the data directory's ``upwatch.toml``, holds for ``upwatch run`` and
for every command; the environment beats it; a key no setting has is refused by name."""

from __future__ import annotations

from pathlib import Path

import aiohttp
import pytest

from engine.db.store import Store
from engine.runtime.settings import SYSTEM_FILE, load_settings
from tests.support.cli import upwatch
from tests.support.instances import Instance


class FileConfigured(Instance):
    """An instance that allows private targets only if its settings file says so."""

    def environment(self) -> dict[str, str]:
        env = super().environment()
        del env["UPWATCH_ALLOW_PRIVATE_TARGETS"]
        return env


async def test_private_targets_allowed_in_the_file_hold_for_run_and_the_cli(
    db_dsn: str, store: Store, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "upwatch.toml").write_text("allow_private_targets = true\n")
    _, token = await store.create_account("ops")
    inst = FileConfigured(db_dsn, tmp_path, data_dir=data)
    await inst.start(timeout=60)
    try:
        async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {token}"}) as http:
            async with http.post(f"{inst.base_url}/webapi/monitors",
                                 json={"url": "http://127.0.0.1:9/"}) as r:
                assert r.status == 201, await r.text()
    finally:
        assert await inst.stop() == 0
    assert "settings files: " + str(data / "upwatch.toml") in inst.log_text()

    # A command on the same data directory, from anywhere, without any export: the same rule.
    hook = "http://127.0.0.1:9/hook"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {"UPWATCH_DATA_DIR": str(data)}
    res = upwatch("account", "create", "--name", "a", "--webhook-url", hook, "--json",
                  dsn=db_dsn, env=env, cwd=elsewhere)
    assert res.returncode == 0, res.stderr
    res = upwatch("status", dsn=db_dsn, env=env, cwd=elsewhere)
    assert res.stdout.splitlines()[1] == f"Settings files: {data / 'upwatch.toml'}"

    # The environment beats the file; the refusal names the setting that allows it.
    res = upwatch("account", "create", "--name", "b", "--webhook-url", hook, dsn=db_dsn,
                  env={**env, "UPWATCH_ALLOW_PRIVATE_TARGETS": "false"}, cwd=elsewhere)
    assert res.returncode != 0
    assert "UPWATCH_ALLOW_PRIVATE_TARGETS" in res.stderr, res.stderr


def test_files_rank_below_the_environment_and_the_named_file_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("UPWATCH_PORT", "UPWATCH_CONFIG", "UPWATCH_DATA_DIR", "UPWATCH_REGION"):
        monkeypatch.delenv(name, raising=False)
    data = tmp_path / "data"
    data.mkdir()
    (data / "upwatch.toml").write_text('port = 9001\nregion = "from-data-dir"\n')
    named = tmp_path / "named.toml"
    named.write_text(f'data_dir = "{data}"\nport = 9002\n')
    settings = load_settings(str(named))
    # The named file gives the data directory and wins on port; the data directory's file
    # still gives what the named one does not say.
    assert settings.data_dir == data and settings.port == 9002
    assert settings.region == "from-data-dir"
    assert settings.files[:2] == (named, data / "upwatch.toml")
    monkeypatch.setenv("UPWATCH_PORT", "9003")
    assert load_settings(str(named)).port == 9003
    assert SYSTEM_FILE == Path("/etc/upwatch/upwatch.toml")


@pytest.mark.parametrize(
    ("text", "expect"),
    [
        ("alow_private_targets = true\n",
         "unknown setting 'alow_private_targets' (did you mean 'allow_private_targets'?)"),
        ('data_dir = "/elsewhere"\n', "data_dir cannot be set in the data directory's own file"),
        ("port = \n", "not valid TOML"),
    ],
)
def test_a_bad_settings_file_is_one_line_naming_the_file(
    tmp_path: Path, text: str, expect: str
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "upwatch.toml").write_text(text)
    res = upwatch("status", env={"UPWATCH_DATA_DIR": str(data)}, cwd=tmp_path)
    assert res.returncode == 2
    (line,) = res.stderr.strip().splitlines()
    assert line.startswith(f"upwatch: settings file {data / 'upwatch.toml'}: {expect}"), line
    assert not (data / "pg").exists()
