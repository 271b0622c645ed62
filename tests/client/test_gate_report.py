"""The pull-request gate's client side: exit status, table, Markdown and summaries (posting to
GitHub is tested in test_gate_github.py)."""

import argparse
import io
import re
from pathlib import Path
from typing import Any

import pytest
from benchwatch_client import gate_judge, gate_render
from benchwatch_client import gate_report as gate
from benchwatch_client.gate_judge import GateOptions, judge
from benchwatch_client.gate_verdicts import parse_verdicts
from benchwatch_client.upload import OK, REGRESSED, UNREACHABLE
from markdown_it import MarkdownIt


def item(model: str, verdict: str, **changes: Any) -> dict[str, Any]:
    fields = {
        "suite": "torchbench",
        "model": model,
        "config": "inductor",
        "precision": "amp",
        "mode": "inference",
        "batch_size": 32,
        "metric": "latency",
        "unit": "ms",
        "higher_is_better": False,
        "verdict": verdict,
        "new": 10.0,
        "base": 10.0,
        "rel_change": 0.0,
        "p_value": 0.5,
        "threshold": 0.05,
        "reason": "within noise",
        "series_url": f"https://bw.example/series/{len(model)}?branch=feature-x",
    }
    return {**fields, **changes}


def document(*extra: Any) -> dict[str, Any]:
    items = [
        item("resnet50", "pass"),
        item("bert", "improvement", new=9.0, rel_change=-0.1, p_value=0.0002),
        item(
            "alexnet",
            "regression",
            new=12.3,
            base=10.2,
            rel_change=0.206,
            p_value=0.0004,
            reason="20.6% slower than main at def456 (p = 0.0004)",
        ),
        *[item(f"model{i}", "pass") for i in range(9)],
        *[item(f"fresh{i}", "no_baseline", base=None, rel_change=None) for i in range(3)],
        item("broken", "error", new=None, reason="the series has no samples"),
        *extra,
    ]
    counts: dict[str, int] = {}
    for i in items:
        if isinstance(i, dict):
            counts[i["verdict"]] = counts.get(i["verdict"], 0) + 1
    return {
        "run_id": 42,
        "branch": "feature-x",
        "commit": "c" * 40,
        "default_branch": "main",
        "baseline": {"how": "merge-base", "commit": "d" * 40, "run_ids": [40, 41]},
        "counts": counts,
        "items": items,
        "url": "https://bw.example/runs/42/verdicts",
    }


def outcome(doc: dict[str, Any] | None = None, **options: Any) -> gate_judge.Outcome:
    return judge(parse_verdicts(doc or document()), GateOptions(**options))


# ---- the gate's decision


def test_a_gating_regression_exits_3_and_the_rest_never_fail() -> None:
    judged = outcome()
    assert judged.exit_status == gate_judge.GATE_FAILED == REGRESSED == 3
    assert [i.model for i in judged.gating] == ["alexnet"]
    assert judged.conclusion == "failure"
    assert dict(judged.counts) == {
        "regression": 1,
        "improvement": 1,
        "error": 1,
        "no_baseline": 3,
        "pass": 10,
    }


def test_no_baseline_and_errors_pass() -> None:
    doc = document()
    doc["items"] = [i for i in doc["items"] if i["verdict"] != "regression"]
    judged = outcome(doc)
    assert judged.exit_status == gate_judge.PASSED == OK
    assert judged.conclusion == "success"
    assert judged.counts["error"] == 1
    assert "errors and missing baselines never fail the gate" in gate_render.render_table(judged)


def test_report_only_says_what_would_have_failed_and_passes() -> None:
    judged = outcome(report_only=True)
    assert judged.exit_status == 0
    assert judged.conclusion == "neutral"
    assert gate_render.headline(judged) == "report only: would have failed on 1 regression"


@pytest.mark.parametrize(
    ("options", "status"),
    [
        ({"suites": ("torchbench",)}, 3),
        ({"suites": ("torch*",)}, 3),
        ({"suites": ("huggingface",)}, 0),
        ({"metrics": ("latency",)}, 3),
        ({"metrics": ("compile_*", "memory")}, 0),
        ({"suites": ("torchbench",), "metrics": ("memory",)}, 0),
        ({"suites": ("TorchBench",)}, 0),  # case-sensitive, as names are stored
    ],
)
def test_gating_can_be_limited_by_suite_and_metric_globs(
    options: dict[str, Any], status: int
) -> None:
    assert outcome(**options).exit_status == status


def test_a_regression_outside_the_gate_is_shown_as_not_gating() -> None:
    judged = outcome(suites=("huggingface",))
    table = gate_render.render_table(judged)
    assert "not gating" in table
    assert "warning: --gate-suite huggingface matches no benchmark" in table
    assert "none gating" in table
    markdown = gate_render.render_markdown(judged)
    assert "🟡 regression, not gating" in markdown
    assert markdown.startswith("### ✅ benchwatch: passed")


def test_an_unknown_or_unreadable_verdict_is_an_error_not_a_failure() -> None:
    doc = document({**item("odd", "slower"), "verdict": "slower"}, "not an object")
    doc["items"] = [i for i in doc["items"] if not isinstance(i, dict) or i["model"] != "alexnet"]
    judged = outcome(doc)
    assert judged.exit_status == 0
    assert judged.counts["error"] == 3
    reasons = [i.reason for i in judged.report.items if i.verdict == "error"]
    assert any("unknown verdict 'slower'" in r for r in reasons)
    assert any("not an object" in r for r in reasons)


@pytest.mark.parametrize("answer", [None, [], {"items": "x"}, {"run_id": 1}])
def test_no_verdicts_document_is_no_verdict(answer: object) -> None:
    err = io.StringIO()
    assert gate.run_gate(answer, GateOptions(), {}, io.StringIO(), err) == UNREACHABLE == 2
    assert "no verdict" in err.getvalue()


def test_the_flags_make_the_options() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--channel")
    gate.add_gate_arguments(parser)
    args = ["--gate-suite", "torchbench", "--gate-suite", "hf_*", "--gate-metric", "latency"]
    args += ["--report-only", "--post-check", "--summary-file", "s.md", "--channel", "nightly"]
    options = gate.gate_options(parser.parse_args(args))
    assert options == GateOptions(
        suites=("torchbench", "hf_*"),
        metrics=("latency",),
        report_only=True,
        summary_file="s.md",
        post_check=True,
        channel="nightly",
    )
    assert gate.gate_options(parser.parse_args([])) == GateOptions()
    for action in parser._actions[2:]:
        assert "(default: " in (action.help or ""), action.option_strings


# ---- the terminal table


def test_the_table_lists_regressions_then_improvements_then_errors_aligned() -> None:
    table = gate_render.render_table(outcome())
    lines = table.splitlines()
    assert lines[0] == (f"benchwatch gate, run 42 (feature-x {'c' * 12}): failed: 1 regression")
    assert lines[1] == f"compared with main at {'d' * 12} (the merge base; runs 40, 41)"
    rows = [line for line in lines if line.startswith("  ")]
    assert [r.split()[0] for r in rows] == ["verdict", "regression", "improvement", "error"]
    assert "+20.6%" in rows[1]
    assert "4.0e-04" in rows[1]
    assert "the series has no samples" in rows[3]
    # Aligned: each column starts at the same place on every row.
    starts = {r.index("torchbench/") for r in rows[1:]}
    assert starts == {rows[0].index("benchmark")}
    assert len({r.index("%") for r in rows[1:3]}) == 1
    assert "1 regression · 1 improvement · 1 error · 3 no baseline · 10 pass" in table
    assert "resnet50" not in table  # passes are counted, not listed
    assert table.endswith("all verdicts: https://bw.example/runs/42/verdicts\n")


def test_the_table_caps_its_rows() -> None:
    slower = [item(f"slow{i}", "regression", rel_change=0.1 + i / 100) for i in range(30)]
    table = gate_render.render_table(outcome(document(*slower)), max_rows=5)
    rows = [line for line in table.splitlines() if line.startswith("  ")]
    assert len(rows) == 1 + 5 + 1
    assert rows[-1] == "  and 28 more"
    assert "slow29" in rows[1]  # the largest change first


def test_the_terminal_gets_no_escape_sequences() -> None:
    hostile = item("\x1b[2J\x1b[31mevil\u202egnp.exe\nnext", "regression", reason="\x07bell")
    table = gate_render.render_table(outcome(document(hostile)))
    assert "\x1b" not in table
    assert "\u202e" not in table
    assert "\x07" not in table
    assert all(line.isprintable() for line in table.splitlines())


def test_the_server_listing_only_some_verdicts_is_said() -> None:
    doc = document()
    doc["counts"] = {"pass": 500, "regression": 1}
    assert "the server listed 16 of 501 verdicts" in gate_render.render_table(outcome(doc))


# ---- Markdown


def render(markdown: str) -> str:
    return MarkdownIt("commonmark").enable("table").render(markdown)


def test_the_markdown_summary() -> None:
    markdown = gate_render.render_markdown(outcome())
    assert markdown.startswith("### ❌ benchwatch: failed: 1 regression on feature\\-x\n")
    assert "compared with main at dddddddddddd (the merge base; runs 40, 41)" in markdown
    page = render(markdown)
    assert page.count("<table>") == 2
    main, rest = page.split("<details>")
    assert "🔴 regression" in main
    assert "10.2 → 12.3" in main
    assert "+20.6%" in main
    assert "🟢 improvement" in main
    assert '<a href="https://bw.example/series/7?branch=feature-x">torchbench/alexnet' in main
    assert "resnet50" not in main
    assert "<summary>14 more (1 error, 3 no baseline, 10 pass)</summary>" in rest
    assert "the series has no samples" in rest
    assert "All verdicts for run 42" in page


def test_report_only_markdown() -> None:
    markdown = gate_render.render_markdown(outcome(report_only=True))
    assert markdown.startswith("### ⚠️ benchwatch: report only: would have failed on 1")


def test_no_baseline_at_all() -> None:
    doc = document()
    doc["baseline"] = {"how": "none", "commit": None, "run_ids": []}
    doc["items"] = [item("x", "no_baseline")]
    judged = outcome(doc)
    assert judged.exit_status == 0
    assert "no baseline on main to compare with" in gate_render.render_table(judged)
    assert "<table>" in render(gate_render.render_markdown(judged))  # inside the details


def test_hostile_names_cannot_inject_markdown_html_links_or_mentions() -> None:
    hostile = item(
        "<img src=x onerror=alert(1)> | @perf/admins [x](javascript:alert(1))\n# head `code`",
        "regression",
        unit="ms</td><script>",
        reason="**bold** <details><summary>x",
        series_url="javascript:alert(2)",
    )
    doc = document(hostile)
    doc["branch"] = "main](https://evil.example) <b>"
    page = render(gate_render.render_markdown(outcome(doc)))
    assert "<img" not in page
    assert "<script" not in page
    assert "<b>" not in page
    assert "<strong>" not in page
    assert "<h1>" not in page
    assert "<code>" not in page
    assert "javascript" not in " ".join(re.findall(r'href="([^"]*)"', page))
    assert "evil.example" not in " ".join(re.findall(r'href="([^"]*)"', page))
    assert "@perf/admins" not in page
    assert page.count("<details>") == 1
    # The pipe stayed inside its cell: every row of the first table has six cells.
    first = page.split("<details>")[0]
    assert all(row.count("<td") == 6 for row in first.split("<tr>")[2:])


def test_a_long_report_is_cut_to_the_limit_with_a_note() -> None:
    many = [item(f"m{i}" * 20, "pass") for i in range(2000)]
    judged = outcome(document(*many))
    whole = gate_render.render_markdown(judged)
    assert len(whole.encode()) > gate.COMMENT_CHARS
    cut = gate_render.render_markdown(judged, gate.COMMENT_CHARS, "<!-- benchwatch-gate perf -->")
    assert len(cut.encode()) <= gate.COMMENT_CHARS
    assert cut.startswith("<!-- benchwatch-gate perf -->\n### ❌")
    assert "Cut to fit GitHub's limit of 65536 bytes" in cut
    assert "[All verdicts](https://bw.example/runs/42/verdicts)" in cut
    page = render(cut)
    assert page.count("<details>") == page.count("</details>") == 1
    assert "🔴 regression" in page  # what matters comes first


# ---- summaries


def test_the_step_summary_is_appended(tmp_path: Path) -> None:
    summary = tmp_path / "step_summary"
    summary.write_text("## earlier step\n")
    notes = gate.write_step_summary("# report\n", {"GITHUB_STEP_SUMMARY": str(summary)})
    assert summary.read_text() == "## earlier step\n\n# report\n"
    assert notes == [f"summary appended to {summary}"]


def test_the_step_summary_stays_within_github_s_limit(tmp_path: Path) -> None:
    summary = tmp_path / "step_summary"
    summary.write_text("x" * (gate.STEP_SUMMARY_BYTES - 50_000))
    many = [item(f"m{i}" * 20, "pass") for i in range(2000)]
    markdown = gate_render.render_markdown(outcome(document(*many)))
    gate.write_step_summary(markdown, {"GITHUB_STEP_SUMMARY": str(summary)})
    size = summary.stat().st_size
    assert gate.STEP_SUMMARY_BYTES - 50_000 < size <= gate.STEP_SUMMARY_BYTES
    assert "Cut to fit" in summary.read_text()


def test_a_full_step_summary_is_left_alone(tmp_path: Path) -> None:
    summary = tmp_path / "step_summary"
    summary.write_text("x" * gate.STEP_SUMMARY_BYTES)
    notes = gate.write_step_summary("# report\n", {"GITHUB_STEP_SUMMARY": str(summary)})
    assert summary.stat().st_size == gate.STEP_SUMMARY_BYTES
    assert "near GitHub's 1 MiB" in notes[0]


def test_gitlab_gets_a_summary_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert gate.write_step_summary("# one\n", {"GITLAB_CI": "true"}) == [
        "summary written to benchwatch-summary.md"
    ]
    gate.write_step_summary("# two\n", {"GITLAB_CI": "true"})
    assert (tmp_path / "benchwatch-summary.md").read_text() == "# two\n"
    chosen = {"GITLAB_CI": "true", "BENCHWATCH_SUMMARY_FILE": str(tmp_path / "env.md")}
    gate.write_step_summary("# three\n", chosen)
    assert (tmp_path / "env.md").read_text() == "# three\n"
    gate.write_step_summary("# four\n", chosen, summary_file=str(tmp_path / "flag.md"))
    assert (tmp_path / "flag.md").read_text() == "# four\n"


def test_outside_ci_no_summary_is_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert gate.write_step_summary("# report\n", {}) == []
    assert not list(tmp_path.iterdir())


def test_a_summary_that_cannot_be_written_is_reported(tmp_path: Path) -> None:
    env = {"GITHUB_STEP_SUMMARY": str(tmp_path / "missing" / "summary")}
    (note,) = gate.write_step_summary("# report\n", env)
    assert note.startswith("step summary not written:")
