"""Just enough of GitHub Actions and GitLab CI to run this repository's action and component.

Each runner reads the real file (``action.yml``, ``templates/benchwatch-upload.yml``),
substitutes the expressions those files may use, and runs their scripts as the CI would: a
composite step with ``bash --noprofile --norc -eo pipefail``, a GitLab job's script lines in
one ``sh -e``. An expression the runner does not know fails the test rather than being
guessed, so the files can use nothing these runners cannot check.
"""

import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
ACTION = ROOT / "action.yml"
COMPONENT = ROOT / "templates" / "benchwatch-upload.yml"
# What a CI job may see of this machine: its tools, and nothing of the test's own settings.
BASE_ENV = {
    k: v
    for k, v in os.environ.items()
    if k in ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "PIP_INDEX_URL", "PIP_CONFIG_FILE")
    or k.startswith(("PIP_", "XDG_"))
}
GITHUB_EXPRESSION = re.compile(r"\$\{\{\s*([^}]*?)\s*\}\}")
VARIABLE = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?")
GITLAB_INPUT = re.compile(r"\$\[\[\s*inputs\.([A-Za-z0-9_-]+)\s*\]\]")


def action_checkout(where: Path) -> Path:
    """What ``uses: org/benchwatch@ref`` checks out, as much as the action reads: its file and
    the client's source, copied so that no two jobs build one source folder at once (pip
    builds a folder in place)."""
    shutil.copy(ACTION, where / "action.yml")
    build_outputs = shutil.ignore_patterns("build", "*.egg-info", "__pycache__")
    shutil.copytree(ROOT / "client", where / "client", ignore=build_outputs)
    return where


@dataclass
class Finished:
    """A job's end: the status of its last step, what it printed, and what it set."""

    status: int
    log: str
    outputs: dict[str, str]
    summary: str


def read_outputs(path: Path) -> dict[str, str]:
    """``name=value`` lines, as GitHub reads ``$GITHUB_OUTPUT`` and GitLab a dotenv report."""
    if not path.exists():
        return {}
    pairs = (line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)
    return dict(pairs)


def run_action(with_: Mapping[str, str], env: Mapping[str, str], work: Path) -> Finished:
    """Run ``action.yml``'s steps as a composite action with the inputs ``with_``."""
    action: dict[str, Any] = yaml.safe_load(ACTION.read_text())
    declared = action["inputs"]
    unknown = set(with_) - set(declared)
    assert not unknown, f"inputs the action does not declare: {unknown}"
    missing = {n for n, spec in declared.items() if spec.get("required") and n not in with_}
    assert not missing, f"required inputs not given: {missing}"
    context: dict[str, Any] = {
        "github": {"token": env.get("GITHUB_TOKEN_FOR_ACTION", "")},
        "steps": {},
    }
    # A default may be an expression (github.token), which GitHub evaluates.
    context["inputs"] = {
        n: with_[n] if n in with_ else _github(str(spec.get("default", "")), context)
        for n, spec in declared.items()
    }
    checkout = action_checkout(Path(tempfile.mkdtemp(dir=work)))
    shared_env = {**BASE_ENV, **env, "GITHUB_ACTION_PATH": str(checkout)}
    github_env = work / "github_env"
    summary = work / "step_summary.md"
    log, status = [], 0
    for number, step in enumerate(action["runs"]["steps"]):
        assert step.get("shell") == "bash", "every step runs bash"
        assert "run" in step, "every step runs a script"
        assert "if" not in step, "the runner knows no conditions"
        outputs = work / f"output_{number}"
        step_env = {
            **shared_env,
            **read_outputs(github_env),
            **{k: _github(str(v), context) for k, v in (step.get("env") or {}).items()},
            "GITHUB_ENV": str(github_env),
            "GITHUB_OUTPUT": str(outputs),
            "GITHUB_STEP_SUMMARY": str(summary),
        }
        # The script is the file's text: an expression inside it would be spliced as shell.
        assert not GITHUB_EXPRESSION.search(step["run"]), "a script holds an expression"
        script = work / f"step_{number}.sh"
        script.write_text(step["run"])
        done = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
            cwd=work,
            env=step_env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        log.append(done.stdout + done.stderr)
        if "id" in step:
            context["steps"][step["id"]] = {"outputs": read_outputs(outputs)}
        status = done.returncode
        if status:
            break
    declared_outputs = {n: _github(o["value"], context) for n, o in action["outputs"].items()}
    text = summary.read_text() if summary.exists() else ""
    return Finished(status, "\n".join(log), declared_outputs, text)


def _github(text: str, context: Mapping[str, Any]) -> str:
    def value(match: re.Match[str]) -> str:
        found: Any = context
        for part in match.group(1).split("."):
            assert isinstance(found, Mapping), f"unknown expression {match.group(0)}"
            if part not in found and isinstance(found, dict) and "outputs" in match.group(1):
                return ""  # a step output never set reads as empty, as on GitHub
            assert part in found, f"unknown expression {match.group(0)}"
            found = found[part]
        return str(found)

    return GITHUB_EXPRESSION.sub(value, text)


def _text(value: object) -> str:
    """An input's value as GitLab writes it into the configuration (booleans lower-case)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def run_component(inputs: Mapping[str, str], env: Mapping[str, str], work: Path) -> Finished:
    """Run the GitLab component's job: its inputs interpolated, its script in ``sh -e``."""
    spec, jobs = list(yaml.safe_load_all(COMPONENT.read_text()))
    declared = spec["spec"]["inputs"]
    unknown = set(inputs) - set(declared)
    assert not unknown, f"inputs the component does not declare: {unknown}"
    values = {n: _text(inputs.get(n, (s or {}).get("default", ""))) for n, s in declared.items()}
    missing = {n for n, s in declared.items() if "default" not in (s or {}) and n not in inputs}
    assert not missing, f"required inputs not given: {missing}"

    def interpolate(node: Any) -> Any:
        if isinstance(node, str):
            return GITLAB_INPUT.sub(lambda m: values[m.group(1)], node)
        if isinstance(node, list):
            return [interpolate(item) for item in node]
        if isinstance(node, dict):
            return {interpolate(k): interpolate(v) for k, v in node.items()}
        return node

    (job,) = interpolate(jobs).values()
    lines = [*job.get("before_script", []), *job["script"]]
    for line in lines:
        assert "$[[" not in line, f"uninterpolated: {line}"
    script = work / "job.sh"
    script.write_text("\n".join(lines) + "\n")
    shell_env = {**BASE_ENV, **env}
    # GitLab expands the variables a job's variable names (a token given as $BENCHWATCH_TOKEN).
    variables = {
        k: VARIABLE.sub(lambda m: shell_env.get(m.group(1), ""), str(v))
        for k, v in (job.get("variables") or {}).items()
    }
    done = subprocess.run(
        ["sh", "-e", str(script)],
        cwd=work,
        env={**shell_env, **variables},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    dotenv = job["artifacts"]["reports"]["dotenv"]
    summary_file = work / "benchwatch-summary.md"
    return Finished(
        done.returncode,
        done.stdout + done.stderr,
        read_outputs(work / dotenv),
        summary_file.read_text() if summary_file.exists() else "",
    )
