"""Every option of every command has help text, ``upwatch --help`` names the settings a newcomer
needs first, and config/upwatch.example.toml lists every setting with its default."""

from __future__ import annotations

import argparse
import re
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.cli import _parser
from engine.runtime.settings import Settings, load_settings
from tests.support.cli import upwatch

EXAMPLE = Path(__file__).resolve().parents[2] / "config" / "upwatch.example.toml"


def _parsers(parser: argparse.ArgumentParser, path: str) -> Iterator[tuple[str, Any]]:
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, f"{path} {name}")


def test_every_option_and_argument_of_every_command_has_help() -> None:
    seen, missing = 0, []
    for path, parser in _parsers(_parser(), "upwatch"):
        if path == "upwatch bench":  # handed whole to the bench's own parser
            continue
        for action in parser._actions:
            if isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
                continue
            seen += 1
            if isinstance(action, argparse._SubParsersAction):
                missing += [f"{path} {n}" for n, c in _choices_help(action).items() if not c]
            elif not (action.help or "").strip():
                missing.append(f"{path} {'/'.join(action.option_strings) or action.dest}")
    assert seen > 30
    assert missing == []


def _choices_help(action: argparse._SubParsersAction[Any]) -> dict[str, str]:
    helps = {a.dest: a.help or "" for a in action._choices_actions}
    return {name: helps.get(name, "") for name in action.choices}


def test_upwatch_help_names_the_first_settings() -> None:
    res = upwatch("--help")
    assert res.returncode == 0
    for words in ("UPWATCH_DATA_DIR", "UPWATCH_PORT", "UPWATCH_ALLOW_PRIVATE_TARGETS",
                  "/etc/upwatch/upwatch.toml", "<data dir>/upwatch.toml"):
        assert words in res.stdout, words


def test_the_example_settings_are_the_defaults_and_name_every_setting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("UPWATCH_CONFIG", "UPWATCH_DATA_DIR", "UPWATCH_SECRET_KEY"):
        monkeypatch.delenv(name, raising=False)
    text = EXAMPLE.read_text()
    from_example = load_settings(str(EXAMPLE))
    defaults = Settings()
    assert from_example.model_dump() == defaults.model_dump()
    # Every setting is there, set to its default or (no default) commented out.
    named = set(re.findall(r"^(?:# )?([a-z_]+) *=", text, re.M))
    named |= {"plans"} if "[plans.default]" in text else set()
    assert set(Settings.model_fields) - named == set()
    # The plans it shows are the ones `account create --plan` knows.
    assert set(tomllib.loads(text)["plans"]) == set(defaults.plans)
