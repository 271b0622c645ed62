"""The step chart is a valid PNG that shows the step: decoded here by a reader of the spec."""

import math
import struct
import zlib
from dataclasses import dataclass

import pytest

from app.notifications.receivers.chart import AFTER, BACKGROUND, BEFORE, MARKER, step_chart_png

HISTORY = [10.0, 10.1, 9.9, 10.0, 10.05, 13.4, 13.5, 13.45]


@dataclass
class Image:
    width: int
    height: int
    rows: list[list[tuple[int, int, int]]]

    def where(self, colour: tuple[int, int, int]) -> list[tuple[int, int]]:
        return [
            (x, y)
            for y, row in enumerate(self.rows)
            for x, pixel in enumerate(row)
            if pixel == colour
        ]


def decode(png: bytes) -> Image:
    """A palette PNG (the only kind the chart writes), checked chunk by chunk."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    chunks: list[tuple[bytes, bytes]] = []
    at = 8
    while at < len(png):
        (length,) = struct.unpack(">I", png[at : at + 4])
        kind, data = png[at + 4 : at + 8], png[at + 8 : at + 8 + length]
        (crc,) = struct.unpack(">I", png[at + 8 + length : at + 12 + length])
        assert crc == zlib.crc32(kind + data), f"bad CRC in {kind!r}"
        chunks.append((kind, data))
        at += 12 + length
    kinds = [kind for kind, _ in chunks]
    assert kinds[0] == b"IHDR"
    assert kinds[-1] == b"IEND"
    width, height, depth, colour_type, compression, filtering, interlace = struct.unpack(
        ">IIBBBBB", chunks[0][1]
    )
    assert (depth, colour_type, compression, filtering, interlace) == (8, 3, 0, 0, 0)
    plte = next(data for kind, data in chunks if kind == b"PLTE")
    palette = [tuple(plte[i : i + 3]) for i in range(0, len(plte), 3)]
    raw = zlib.decompress(b"".join(data for kind, data in chunks if kind == b"IDAT"))
    assert len(raw) == height * (width + 1)
    rows = []
    for y in range(height):
        line = raw[y * (width + 1) : (y + 1) * (width + 1)]
        assert line[0] == 0, "filter type 0 (None) expected"
        rows.append([palette[index] for index in line[1:]])  # IndexError: outside the palette
    return Image(width, height, rows)  # type: ignore[arg-type]


def test_a_valid_png_of_the_asked_size() -> None:
    image = decode(step_chart_png(HISTORY, 5, width=300, height=100))
    assert (image.width, image.height) == (300, 100)
    assert image.rows[50][150] in (BACKGROUND, MARKER, BEFORE, AFTER)


def test_the_points_after_the_step_have_the_after_colour_and_stand_higher() -> None:
    image = decode(step_chart_png(HISTORY, 5))
    marker_x = {x for x, _ in image.where(MARKER)}
    assert len(marker_x) == 1, "one vertical marker"
    (step_x,) = marker_x
    after, before = image.where(AFTER), image.where(BEFORE)
    spacing = (480 - 1 - 2 * 6) / (len(HISTORY) - 1)
    last_good_x = 6 + round(4 * spacing)
    assert before
    assert all(x < step_x for x, _ in before)
    # The jump from the last good point is drawn in the "after" colour, right of its dot.
    assert after
    assert all(x > last_good_x for x, _ in after)
    assert sum(x > step_x for x, _ in after) > 0.7 * len(after)
    # Higher values stand higher (smaller y): latency went from ~10 to ~13.5.
    assert mean_y(after) < mean_y(before) - 40
    # The last point, at the right edge, is an "after" dot.
    assert image.rows[min(y for x, y in after if x >= 472)][472] == AFTER


def mean_y(points: list[tuple[int, int]]) -> float:
    return sum(y for _, y in points) / len(points)


def test_nan_values_are_gaps_in_the_line() -> None:
    values = [1.0, 1.0, math.nan, math.nan, math.nan, 2.0, 2.0, 2.0]
    image = decode(step_chart_png(values, 5, width=160, height=40))
    xs = sorted({x for x, _ in image.where(BEFORE)})
    # Index 1 stands at x = 6 + 147/7 = 27 (dot radius 2); index 5 (after) at 111.
    assert max(xs) <= 30
    assert not [x for x, _ in image.where(AFTER) if x < 100]


def test_the_same_values_give_the_same_bytes() -> None:
    assert step_chart_png(HISTORY, 5) == step_chart_png(list(HISTORY), 5)
    assert step_chart_png(HISTORY, 5) != step_chart_png(HISTORY, 6)


@pytest.mark.parametrize(
    ("values", "first_bad"),
    [([], 0), ([math.nan, math.inf], 1), ([3.0], 0), ([2.0, 2.0, 2.0], 1), ([1.0, 5.0], 9)],
)
def test_degenerate_series_still_make_a_png(values: list[float], first_bad: int) -> None:
    image = decode(step_chart_png(values, first_bad, width=40, height=20))
    assert (image.width, image.height) == (40, 20)


def test_a_step_outside_the_series_has_no_marker() -> None:
    assert not decode(step_chart_png([1.0, 5.0], 9, width=40, height=20)).where(MARKER)
    assert not decode(step_chart_png([1.0, 5.0], 0, width=40, height=20)).where(MARKER)


@pytest.mark.parametrize(("width", "height"), [(0, 100), (100, 15), (5000, 100)])
def test_absurd_sizes_are_refused(width: int, height: int) -> None:
    with pytest.raises(ValueError, match="pixels"):
        step_chart_png(HISTORY, 5, width=width, height=height)
