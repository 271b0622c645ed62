"""The figure builders, on values: data in, Plotly figure dict out, no database, no HTTP."""

import json
from datetime import UTC, datetime, timedelta

import plotly.graph_objects as go
import pytest

from app.dashboard import figures, page_figures
from app.dashboard.figures import Line, Point, Step

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def at(day: int) -> datetime:
    return T0 + timedelta(days=day)


def point(day: int, value: float | None, **fields: object) -> Point:
    defaults: dict[str, object] = {
        "status": "ok",
        "low": None,
        "high": None,
        "run_id": day + 1,
        "commit": "abc123",
        "torch": "2.6.0",
    }
    return Point(at=at(day), value=value, **(defaults | fields))  # type: ignore[arg-type]


def step(**fields: object) -> Step:
    defaults: dict[str, object] = {
        "id": 7,
        "label": "dynamic",
        "at": at(2),
        "direction": "regression",
        "rel_change": 0.1,
        "before": 10.0,
        "after": 11.0,
        "status": "new",
        "group_id": 3,
        "unit": "ms",
    }
    return Step(**(defaults | fields))  # type: ignore[arg-type]


def test_the_compare_scatter_puts_the_base_on_x_and_each_other_side_on_y() -> None:
    fig = figures.compare_scatter(
        ["default", "dynamic", "cudagraphs"],
        [[10.0, 12.0, 8.0], [5.0, None, 4.0], [None, 3.0, 3.0], [2.0, 2.5, None]],
        ["a", "b", "c", "d"],
        "latency",
        "ms",
    )
    dynamic, cudagraphs, diagonal = fig["data"]
    assert (dynamic["name"], dynamic["x"], dynamic["y"]) == ("dynamic", [10.0, 2.0], [12.0, 2.5])
    assert dynamic["hovertext"] == ["a", "d"]  # c has no base value: not drawn
    assert (cudagraphs["x"], cudagraphs["y"]) == ([10.0, 5.0], [8.0, 4.0])
    assert (diagonal["name"], diagonal["x"], diagonal["y"]) == (
        "no change",
        [2.0, 12.0],
        [2.0, 12.0],
    )
    assert fig["layout"]["xaxis"]["type"] == fig["layout"]["yaxis"]["type"] == "log"
    assert fig["layout"]["xaxis"]["title"]["text"] == "default: latency (ms)"
    assert fig["layout"]["title"]["text"] == "default (x) vs the others (y)"


def test_a_compare_scatter_without_positive_values_has_no_diagonal() -> None:
    fig = figures.compare_scatter(["a", "b"], [[0.0, 0.0]], ["m"], "speedup", "")
    assert [t["name"] for t in fig["data"]] == ["b"]
    assert fig["layout"]["yaxis"]["title"]["text"] == "speedup"


def test_the_series_chart_draws_band_line_and_step_markers_per_line() -> None:
    sampled = Line(
        "dynamic",
        "ms",
        [
            point(0, 10.0, low=9.5, high=10.5),
            point(1, 10.2, low=9.9, high=10.4),
            point(2, 11.0, status="failed", torch=None),
        ],
        [step(), step(id=8, direction="improvement", rel_change=-0.2, after=8.0)],
    )
    plain = Line("default", "ms", [point(0, 20.0)], [])
    fig = figures.series_chart([sampled, plain], "latency", "inference", "config", "ms")
    high, low, line, markers, other = fig["data"]
    assert (high["y"], high["showlegend"]) == ([10.5, 10.4, None], False)
    assert (low["y"], low["fill"]) == ([9.5, 9.9, None], "tonexty")
    assert low["fillcolor"] == "rgba(31,119,180,0.15)"  # the line's colour, see-through
    assert (line["name"], line["mode"]) == ("dynamic", "lines+markers")
    assert line["y"] == [10.0, 10.2, None]  # a failed run is a gap
    assert line["hovertext"][0] == "10 ms<br>commit abc123<br>torch 2.6.0<br>run 1"
    assert line["hovertext"][2].endswith("torch ?<br>run 3<br>failed")
    assert markers["name"] == "dynamic: steps"
    assert markers["marker"]["symbol"] == ["triangle-up", "triangle-down"]
    assert markers["marker"]["color"] == [figures.REGRESSION, figures.IMPROVEMENT]
    assert markers["y"] == [11.0, 8.0]
    assert markers["hovertext"][0] == "regression +10.0%<br>10 ms → 11 ms<br>status new"
    assert (other["name"], other["y"]) == ("default", [20.0])
    assert other["marker"]["color"] == figures.PALETTE[1]
    assert fig["layout"]["title"]["text"] == "latency · inference · by config"
    assert fig["layout"]["yaxis"]["title"]["text"] == "latency (ms)"
    buttons = fig["layout"]["xaxis"]["rangeselector"]["buttons"]
    assert [b["label"] for b in buttons] == ["7d", "30d", "all"]


def test_the_step_chart_draws_the_levels_either_side_of_the_first_bad_run() -> None:
    points = [(at(day), 10.0 if day < 3 else 11.0) for day in range(6)]
    fig = figures.step_chart(points, at(3), (10.0, 11.0), "latency", "bert · dynamic", "ms")
    series, before, after = fig["data"]
    assert series["y"] == [10.0, 10.0, 10.0, 11.0, 11.0, 11.0]
    assert (before["x"], before["y"]) == ([at(0), at(2)], [10.0, 10.0])
    assert (after["x"], after["y"]) == ([at(3), at(5)], [11.0, 11.0])
    assert after["line"]["color"] == figures.REGRESSION
    assert (fig["layout"]["height"], fig["layout"]["showlegend"]) == (240, False)
    no_after = figures.step_chart(points[:2], at(3), (10.0, 11.0), "latency", "t", "ms")
    assert no_after["data"][2]["x"] == []
    # Written without graph objects, it is what they would make of it: valid, and the same.
    checked = go.Figure(data=fig["data"], layout=fig["layout"]).to_dict()
    assert checked == fig
    assert json.loads(figures.embed(fig))["layout"]["template"]["layout"]["font"]


def test_the_shape_chart_puts_the_distributions_either_side_beside_the_series() -> None:
    points = [(at(day), 10.0 + (day % 2) * (0.1 if day < 4 else 0.8)) for day in range(8)]
    fig = figures.shape_chart(points, at(4), "noise", "latency", "bert · eager", "ms")
    series, mark, before, after = fig["data"]
    assert series["y"] == [y for _, y in points]
    assert mark["x"] == [at(4), at(4)]
    assert (before["type"], after["type"]) == ("histogram", "histogram")
    assert before["y"] == [10.0, 10.1, 10.0, 10.1]
    assert after["y"] == [10.0, 10.8, 10.0, 10.8]
    assert (before["xaxis"], fig["layout"]["barmode"]) == ("x2", "overlay")
    checked = go.Figure(data=fig["data"], layout=fig["layout"]).to_dict()  # valid Plotly
    assert checked["data"][2]["type"] == "histogram"


def test_the_hardware_chart_has_a_panel_per_metric() -> None:
    assert page_figures.hardware_chart({}) is None
    fig = page_figures.hardware_chart(
        {"power": [("a", 300.0), ("b", 310.0)], "temperature": [("a", 60.0)]}
    )
    assert fig is not None
    power, temperature = fig["data"]
    assert (power["x"], power["y"], power["hovertext"]) == ([0, 1], [300.0, 310.0], ["a", "b"])
    assert (temperature["xaxis"], temperature["yaxis"]) == ("x2", "y2")
    assert [a["text"] for a in fig["layout"]["annotations"]] == ["power", "temperature"]
    assert fig["layout"]["height"] == 160 * 2 + 60
    assert fig["layout"]["xaxis2"]["title"]["text"] == "case, in run order"


def test_embedding_keeps_a_figure_inside_its_script_element() -> None:
    fig = figures.compare_scatter(
        ["</script><script>alert(1)</script>", "b"], [[1.0, 2.0]], ["&"], "m", ""
    )
    text = figures.embed(fig)
    assert not {"<", ">", "&"} & set(text)
    assert json.loads(text)["data"][0]["hovertext"] == ["&amp;"]  # Plotly draws "&"
    assert json.loads(figures.embed({"x": [at(0)]})) == {"x": ["2026-01-01T00:00:00+00:00"]}


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([1.0], ""),
        ([None, 1.0, None], ""),
        ([1.0, 2.0], "0.0,20.0 90.0,2.0"),
        ([3.0, None, 3.0], "0.0,11.0 90.0,11.0"),  # flat: through the middle
    ],
)
def test_sparkline(values: list[float | None], expected: str) -> None:
    assert figures.sparkline(values) == expected


def test_the_verdict_chart_draws_the_history_the_fork_point_and_the_branch_result() -> None:
    points = [point(day, 10.0 + 0.01 * day) for day in range(6)]
    points[2] = point(2, None, status="failed")
    judged = page_figures.BranchResult(
        at=at(4),
        value=12.0,
        verdict="regression",
        base=10.02,
        band=(9.9, 10.1),
        label="feature-x (this run)",
        hover=("regression +20%",),
    )
    fig = page_figures.verdict_chart(points, 4, judged, "bert · latency", "nightly", "ms")  # day 3
    traces = {t.get("name"): t for t in fig["data"]}
    upper, lower = (t for t in fig["data"] if t.get("legendgroup") == "band")
    assert (upper["y"], lower["y"], lower["fill"]) == ([10.1, 10.1], [9.9, 9.9], "tonexty")
    assert upper["x"] == [at(0), at(5)]  # across every point and the result
    assert traces["baseline median"]["y"] == [10.02, 10.02]
    line, context = traces["nightly"], traces["nightly after the fork"]
    assert line["y"] == [10.0, 10.01, None, 10.03]  # up to the fork point; a failure is a gap
    assert context["y"] == [10.03, 10.04, 10.05]  # from the fork point on, dotted
    assert context["line"]["dash"] == "dot"
    assert traces["fork point"]["x"] == [at(3)]
    ours = traces["feature-x (this run)"]
    assert (ours["x"], ours["y"], ours["marker"]["color"]) == ([at(4)], [12.0], figures.REGRESSION)
    assert fig["layout"]["title"]["text"] == "bert · latency"


def test_the_verdict_chart_without_a_fork_point_or_a_band() -> None:
    judged = page_figures.BranchResult(at(9), 8.0, "improvement", None, None, "x", ("improvement",))
    fig = page_figures.verdict_chart([point(0, 10.0)], None, judged, "t", "nightly", "ms")
    assert [t["name"] for t in fig["data"]] == ["nightly", "x"]
    assert fig["data"][-1]["marker"]["color"] == figures.IMPROVEMENT
    alone = page_figures.verdict_chart([], None, judged, "t", "nightly", "ms")
    assert [t["name"] for t in alone["data"]] == ["x"]


LINK = '<a href="https://evil.example/login">sign in again</a>'


def test_figure_text_from_urls_and_uploads_draws_no_markup() -> None:
    """Issue 26 point 5: a crafted /compare?base_config=<a href=...> drew a live off-site
    link in the chart title; stored model, metric and case names did the same."""
    fig = figures.compare_scatter(
        [LINK, f"other {LINK}"], [[10.0, 12.0]], [f"case {LINK}"], f"m{LINK}", "ms"
    )
    step = figures.step_chart(
        [(datetime(2026, 12, 1, tzinfo=UTC), 1.0), (datetime(2026, 12, 2, tzinfo=UTC), 2.0)],
        datetime(2026, 12, 2, tzinfo=UTC),
        (1.0, 2.0),
        f"latency{LINK}",
        f"model {LINK}",
        "ms",
    )
    for figure in (fig, step):
        drawn = json.dumps(figure, default=str)
        assert "<a" not in drawn
        assert "&lt;a href=" in drawn  # drawn as typed
    assert fig["layout"]["title"]["text"].startswith("&lt;a href=")
    assert fig["data"][0]["name"].startswith("other &lt;a")


def test_the_verdict_hardware_and_series_charts_draw_stored_strings_as_typed() -> None:
    """Issue 26 point 5: the verdict chart's branch label, reason, channel and fork commit,
    the hardware panels' titles and case labels, a line's steps and an annotation's text
    reached Plotly unescaped, so a stored <a href> drew a live link."""
    points = [point(day, 10.0, commit=f"c{LINK}") for day in range(4)]
    judged = page_figures.BranchResult(
        at(5), 12.0, "regression", 10.0, (9.9, 10.1), f"b{LINK}", ("regression", f"why {LINK}")
    )
    verdict = page_figures.verdict_chart(points, 2, judged, f"t{LINK}", f"ch{LINK}", "ms")
    hardware = page_figures.hardware_chart({f"gpu{LINK}": [(f"case{LINK}", 1.0), ("b", 2.0)]})
    mark = figures.Mark(1, at(1), None, f"deploy {LINK}", f"h100 {LINK}")
    series = figures.series_chart(
        [Line(f"line{LINK}", "ms", points, [step(status=f"s{LINK}")])],
        "m",
        "inference",
        "x",
        "ms",
        [mark],
    )
    for figure in (verdict, hardware, series):
        # legendgroup is an identifier that ties traces together, never drawn
        drawn = json.dumps(
            [{k: v for k, v in t.items() if k != "legendgroup"} for t in figure["data"]]
            + [figure["layout"]],
            default=str,
        )
        assert "<a" not in drawn
        assert "&lt;a href=" in drawn
    assert verdict["data"][-1]["hovertext"] == f"regression<br>why {figures.text(LINK)}"
