"""`benchwatch detect FILE`: JSON out, clear errors and a non-zero exit for bad files."""

import json
from pathlib import Path

import numpy as np
import pytest

from workers.cli import main

SERIES = Path(__file__).parent.parent / "data" / "series"


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["detect", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_csv_with_timestamps(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, str(SERIES / "latency_step_at_57.csv"))
    assert code == 0
    result = json.loads(out)
    (change,) = result["change_points"]
    assert change["index"] == 57
    assert change["timestamp"] == "2026-01-29T12:00:00+00:00"
    assert set(change) >= {"before", "after", "rel_change", "p_value"}
    assert result["points"] == 120


def test_json_list_with_missing_points_and_options(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    values = [10.0] * 30 + [None] + [10.2] * 30
    path = tmp_path / "series.json"
    path.write_text(json.dumps(values))
    code, out, _ = run(capsys, str(path))  # no noise at all: 2% is a step
    assert code == 0
    assert json.loads(out)["change_points"][0]["index"] == 31
    fixed = ("--min-rel-floor", "0.03")  # 3% whatever the noise
    assert json.loads(run(capsys, str(path), *fixed)[1])["change_points"] == []
    code, out, _ = run(capsys, str(path), *fixed, "--min-rel-change", "0.01")
    assert code == 0
    assert json.loads(out)["change_points"][0]["index"] == 31


def test_a_series_whose_noise_grows_fourfold_is_a_shape_change(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    noise = np.random.default_rng(3).standard_normal(90)
    values = 100 + noise * np.where(np.arange(90) < 50, 0.5, 2.0)
    path = tmp_path / "series.json"
    path.write_text(json.dumps(values.tolist()))
    code, out, _ = run(capsys, str(path))
    assert code == 0
    result = json.loads(out)
    assert result["change_points"] == []  # the level did not move
    (shape,) = result["shape_changes"]
    assert (shape["kind"], abs(shape["index"] - 50) <= 5) == ("noise", True)
    assert shape["after_spread"] > 2 * shape["before_spread"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("value\n1\n2\nfast\n", "line 4: value 'fast' is not a number"),
        ("latency\n1\n", "no 'value' column"),
        ("timestamp,value\nyesterday,1\n", "line 2: timestamp 'yesterday' is not ISO 8601"),
        ('[1, 2, "x"]', "index 2: 'x' is not a number"),
        ("[1, 2,", "invalid JSON"),
        ('{"value": 1}', "expected a JSON list"),
        ("value\ninf\n", "line 2: inf is not a finite number"),
    ],
)
def test_bad_files(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, content: str, message: str
) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(content)
    code, out, err = run(capsys, str(path))
    assert code == 1
    assert out == ""
    assert message in err
    assert str(path) in err


def test_missing_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(capsys, str(tmp_path / "nope.csv"))
    assert code == 1
    assert "cannot read" in err


def test_detect_all_rescans_the_configured_database(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    env = {**os.environ, "BENCHWATCH_DATABASE_URL": f"sqlite:///{tmp_path}/bw.db"}
    cli = [sys.executable, "-m", "workers.cli"]
    subprocess.run([*cli, "migrate"], env=env, check=True, capture_output=True)
    done = subprocess.run(
        [*cli, "detect", "--all"], env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"new": {}, "reverted": 0}
    neither = subprocess.run([*cli, "detect"], env=env, capture_output=True, text=True, check=False)
    assert neither.returncode == 2
    assert "--all" in neither.stderr

    def backtest(field: str) -> subprocess.CompletedProcess[str]:
        thresholds = json.dumps({"suite:torchbench": {field: 0.1}})
        command = [*cli, "detect", "--backtest", thresholds]
        return subprocess.run(command, env=env, capture_output=True, text=True, check=False)

    tried = backtest("min_rel_change")
    assert tried.returncode == 0, tried.stderr
    report = json.loads(tried.stdout)
    assert (report["series"], report["kept"], report["added"], report["removed"]) == (0, 0, 0, 0)
    refused = backtest("min_rel_chnge")
    assert refused.returncode == 2
    assert "min_rel_chnge" in refused.stderr
