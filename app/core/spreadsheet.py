"""CSV that is safe to open in a spreadsheet.

A cell that begins with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return is a formula to
Excel, LibreOffice and Google Sheets (``=HYPERLINK(...)``, ``=cmd|...``): uploaded names are
anyone's text, so such a cell is written with a leading apostrophe, which the spreadsheet shows
as text. Numbers, negative ones included, are left as they are.
"""

import csv
import io
from collections.abc import Iterable
from typing import Any

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def neutralise(cell: Any) -> Any:
    """``cell``, with an apostrophe before text that a spreadsheet would run as a formula."""
    if not isinstance(cell, str) or not cell.startswith(FORMULA_STARTS):
        return cell
    try:
        float(cell)
    except ValueError:
        return "'" + cell
    return cell


def to_csv(rows: Iterable[Iterable[Any]]) -> str:
    """The rows as CSV text, every cell neutralised."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerows([neutralise(cell) for cell in row] for row in rows)
    return out.getvalue()
