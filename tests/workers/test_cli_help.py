"""The command line as a tool: every option says its default, light commands start light."""

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from workers.cli import build_parser

SERIES = Path(__file__).parent.parent / "data" / "series"
# Run the CLI's main in a fresh interpreter, then list which of the named modules it loaded.
PROBE = """
import json, sys
from workers.cli import main
heavy = sys.argv.pop(1).split(",")
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print(json.dumps([name for name in heavy if name in sys.modules]), file=sys.stderr)
"""
WEB_AND_ML = ["torch", "fastapi", "uvicorn", "starlette", "sqlalchemy", "httpx"]


def parsers(
    parser: argparse.ArgumentParser, name: str = "benchwatch"
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                yield from parsers(sub, f"{name} {sub_name}")


def test_every_command_has_a_one_line_help() -> None:
    for name, parser in parsers(build_parser()):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                helps = {choice.dest: choice.help for choice in action._choices_actions}
                assert set(helps) == set(action.choices), name
                assert all(helps.values()), f"{name}: a command without help: {helps}"


def test_every_option_says_its_default() -> None:
    checked = 0
    for name, parser in parsers(build_parser()):
        formatter = parser._get_formatter()
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
                continue
            flag = "/".join(action.option_strings) or action.dest
            assert action.help, f"{name} {flag} has no help"
            text = formatter._expand_help(action)
            has_default = action.option_strings and not action.required
            if has_default or action.nargs in ("?", "*"):
                assert "(default: " in text, f"{name} {flag}: {text!r} names no default"
                checked += 1
    assert checked > 40  # every command's options were built, not only the top level


def test_env_backed_options_name_their_variable_and_never_show_a_secret(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("BENCHWATCH_TOKEN", "bw_secret_value")
    monkeypatch.setenv("BENCHWATCH_SERVER", "https://bench.example")
    for command in ("upload", "run-suite"):
        text = dict(parsers(build_parser(command)))[f"benchwatch {command}"].format_help()
        assert "$BENCHWATCH_TOKEN" in text
        assert "bw_secret_value" not in text
    upload = build_parser("upload").parse_args(["upload", "result.json"])
    assert (upload.token, upload.server) == ("bw_secret_value", "https://bench.example")


@pytest.mark.parametrize(
    ("args", "unwanted"),
    [
        (["--help"], [*WEB_AND_ML, "numpy", "scipy", "app.core.config"]),
        (["detect", str(SERIES / "latency_step_at_57.csv")], [*WEB_AND_ML, "app.core.config"]),
        (["detect", "--help"], [*WEB_AND_ML, "scipy"]),
    ],
    ids=["help", "detect FILE", "detect --help"],
)
def test_light_commands_import_only_what_they_need(args: list[str], unwanted: list[str]) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BENCHWATCH_")}
    done = subprocess.run(
        [sys.executable, "-c", PROBE, ",".join(unwanted), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    loaded = json.loads(done.stderr.splitlines()[-1])
    assert loaded == [], f"benchwatch {' '.join(args)} imported {loaded}"
    assert done.stdout


def test_help_works_with_a_broken_setting() -> None:
    env = {**os.environ, "BENCHWATCH_SCHEDULES": "not json"}
    for args in (["--help"], ["detect", str(SERIES / "noisy_flat.csv")]):
        done = subprocess.run(
            [sys.executable, "-m", "workers.cli", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
