"""A finding's step chart as a small PNG, for receivers that can show an image (email).

Pure Python (``zlib`` and ``struct``): the service installs no imaging library, and a
line, some dots and a marker need none. The image is a palette PNG (colour type 3, 8 bits)
written row by row with filter 0; the same values always give the same bytes.
"""

import itertools
import math
import struct
import zlib
from collections.abc import Sequence

BACKGROUND = (248, 249, 251)
FRAME = (208, 213, 221)
MARKER = (140, 146, 156)
BEFORE = (31, 119, 180)
AFTER = (214, 39, 40)
PALETTE = (BACKGROUND, FRAME, MARKER, BEFORE, AFTER)
# Indexes into PALETTE: the pixel buffer holds these, one byte each.
_BACKGROUND, _FRAME, _MARKER, _BEFORE, _AFTER = range(len(PALETTE))

MIN_SIZE = 16
MAX_SIZE = 2_000  # a chart, not a poster: bounds the memory one call can take
MARGIN = 6  # pixels between the frame and the plotted area
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


class _Canvas:
    """A grid of palette indexes with the few drawing operations a step chart needs."""

    def __init__(self, width: int, height: int) -> None:
        self.width = width
        self.height = height
        self.pixels = bytearray([_BACKGROUND]) * (width * height)

    def dot(self, x: int, y: int, colour: int, radius: int = 0) -> None:
        for py in range(y - radius, y + radius + 1):
            for px in range(x - radius, x + radius + 1):
                if 0 <= px < self.width and 0 <= py < self.height:
                    self.pixels[py * self.width + px] = colour

    def line(self, x0: int, y0: int, x1: int, y1: int, colour: int) -> None:
        """Bresenham's line, two pixels thick so that it reads at a glance in a mail."""
        dx, dy = abs(x1 - x0), -abs(y1 - y0)
        sx, sy = (1 if x0 < x1 else -1), (1 if y0 < y1 else -1)
        error = dx + dy
        while True:
            self.dot(x0, y0, colour)
            self.dot(x0 + 1, y0, colour)
            self.dot(x0, y0 + 1, colour)
            if x0 == x1 and y0 == y1:
                return
            doubled = 2 * error
            if doubled >= dy:
                error += dy
                x0 += sx
            if doubled <= dx:
                error += dx
                y0 += sy

    def frame(self) -> None:
        for x in range(self.width):
            self.dot(x, 0, _FRAME)
            self.dot(x, self.height - 1, _FRAME)
        for y in range(self.height):
            self.dot(0, y, _FRAME)
            self.dot(self.width - 1, y, _FRAME)

    def dashed_vertical(self, x: int, colour: int) -> None:
        for y in range(1, self.height - 1):
            if y % 6 < 4:
                self.dot(x, y, colour)


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def _png(canvas: _Canvas) -> bytes:
    header = struct.pack(">IIBBBBB", canvas.width, canvas.height, 8, 3, 0, 0, 0)
    palette = b"".join(bytes(colour) for colour in PALETTE)
    stride = canvas.width
    raw = b"".join(
        b"\x00" + canvas.pixels[row * stride : (row + 1) * stride] for row in range(canvas.height)
    )
    return (
        PNG_SIGNATURE
        + _chunk(b"IHDR", header)
        + _chunk(b"PLTE", palette)
        + _chunk(b"IDAT", zlib.compress(raw, 9))
        + _chunk(b"IEND", b"")
    )


def step_chart_png(
    values: Sequence[float], first_bad_index: int, width: int = 480, height: int = 160
) -> bytes:
    """A step chart: the series as a line, the points from the step on in another colour.

    Values that are not finite (NaN, inf) are gaps: the line stops before them and starts
    again after. A dashed vertical marker stands between the last good point and the first
    bad one. The y axis spans the finite values with some room above and below; a flat series
    is drawn across the middle.

    Args:
        values: the series' recent values, oldest first.
        first_bad_index: the index in ``values`` of the first point of the new level.
        width: image width in pixels.
        height: image height in pixels.

    Returns:
        The PNG file's bytes.

    Raises:
        ValueError: a width or height outside 16..2000 pixels.
    """
    if not (MIN_SIZE <= width <= MAX_SIZE and MIN_SIZE <= height <= MAX_SIZE):
        raise ValueError(f"a chart is {MIN_SIZE} to {MAX_SIZE} pixels wide and high")
    canvas = _Canvas(width, height)
    canvas.frame()
    finite = [float(v) for v in values if math.isfinite(v)]
    if not finite:
        return _png(canvas)
    low, high = min(finite), max(finite)
    pad = (high - low) * 0.1 or abs(high) * 0.1 or 1.0
    low, high = low - pad, high + pad
    left, right = MARGIN, width - 1 - MARGIN
    top, bottom = MARGIN, height - 1 - MARGIN
    count = len(values)

    def x_of(index: float) -> int:
        return left + round(index * (right - left) / (count - 1)) if count > 1 else width // 2

    def y_of(value: float) -> int:
        return bottom - round((value - low) * (bottom - top) / (high - low))

    if 0 < first_bad_index < count:
        canvas.dashed_vertical(x_of(first_bad_index - 0.5), _MARKER)
    points = [
        (x_of(i), y_of(v), _AFTER if i >= first_bad_index else _BEFORE)
        if math.isfinite(v)
        else None
        for i, v in enumerate(values)
    ]
    for start, end in itertools.pairwise(points):
        if start is not None and end is not None:  # a segment takes the colour of its end
            canvas.line(start[0], start[1], end[0], end[1], end[2])
    for point in points:  # dots last, so that the jump does not paint over the last good one
        if point is not None:
            canvas.dot(*point, radius=2)
    return _png(canvas)
