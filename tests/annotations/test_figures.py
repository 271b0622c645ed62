"""The series chart's annotations, from plain data (no database)."""

from datetime import UTC, datetime

from app.dashboard.figures import Line, Mark, Point, series_chart

AT = datetime(2026, 1, 5, 12, tzinfo=UTC)
LINE = Line(
    name="eager",
    unit="ms",
    points=[Point(AT, 1.0, "ok", None, None, 1, "abc", "2.6.0")],
    steps=[],
)


def test_an_event_is_a_dotted_line_and_a_span_a_band_each_with_its_text_on_hover() -> None:
    marks = [
        Mark(1, AT, None, "driver 550", "h100-8"),
        Mark(2, AT, datetime(2026, 1, 6, tzinfo=UTC), "<b>outage</b> " + "x" * 40, "everywhere"),
    ]
    layout = series_chart([LINE], "latency", "inference", "config", "ms", marks)["layout"]
    line, band = layout["shapes"]
    assert (line["type"], line["line"]["dash"], line["yref"]) == ("line", "dot", "paper")
    assert (band["type"], band["layer"]) == ("rect", "below")
    first, second = layout["annotations"]
    assert first["text"] == "⚑ driver 550"
    assert first["hovertext"] == "driver 550<br>2026-01-05 12:00 UTC<br>h100-8"
    assert second["text"].startswith("⚑ &lt;b&gt;outage&lt;/b&gt;")  # escaped, then shortened
    assert second["text"].endswith("…")
    assert "2026-01-05 12:00 to 2026-01-06 00:00 UTC" in second["hovertext"]


def test_without_marks_the_chart_has_no_shapes() -> None:
    layout = series_chart([LINE], "latency", "inference", "config", "ms")["layout"]
    assert "shapes" not in layout
    assert "annotations" not in layout
