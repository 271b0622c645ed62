"""Generated code: kept compressed per case of a run, and diffed kernel by kernel.

Kernels are matched under their normalised identity (``identity``), as in the kernel diff;
inside a kernel's source its own name (with the graph id a C++ kernel records itself under)
is replaced by ``KERNEL`` first, so a kernel that was only renumbered reads the same. A kernel
changed when its source differs (a Triton kernel's launch heuristics are in it); the diff is
unified, line by line (``difflib``), at most ``DIFF_LINES`` lines, for the ``DIFFS_SHOWN``
first changed kernels (a reader's request stays cheap): the API names the others, and one of
them is diffed when asked by name.
"""

import difflib
import json
import re
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.bulk import insert_missing
from app.core.errors import NotFound
from app.kernels.identity import Identity, identity_of
from app.kernels.models import KernelCode

CODE_BYTES = 4 * 2**20  # compressed, per case: past it the graphs' code goes, kernels stay
DECOMPRESSED_BYTES = 64 * 2**20  # more than any stored document holds
DIFFS_SHOWN = 50
DIFF_LINES = 400
PLACEHOLDER = "KERNEL"

CodeChange = Literal["appeared", "disappeared", "changed", "same"]


@dataclass(frozen=True)
class CaseCode:
    """One case's generated code, as ingestion hands it over."""

    benchmark_id: int
    graphs: Sequence[str]
    kernels: Sequence[dict[str, str]]  # {name, source, launch}


@dataclass(frozen=True)
class KernelCodeChange:
    """One identity's code across two runs."""

    identity: str  # as str(Identity) spells it: fused_add_mul
    kind: str
    name: str
    change: CodeChange
    names: list[str]  # as Inductor named them, head's then base's
    diff: str | None  # unified; None where not computed (past DIFFS_SHOWN) or not changed
    source: str | None = None  # the kernel's source where it appeared or disappeared
    launch: tuple[str, str] = field(default=("", ""))  # base's and head's heuristics


def store(session: Session, run_id: int, codes: Sequence[CaseCode]) -> None:
    """Keep the run's generated code per case; a case holding some already keeps its own."""
    rows = []
    for code in codes:
        document: dict[str, Any] = {"graphs": list(code.graphs), "kernels": list(code.kernels)}
        text = json.dumps(document)
        blob = zlib.compress(text.encode(), 6)
        if len(blob) > CODE_BYTES:  # the kernels are what a diff reads: the graphs go first
            document["graphs"] = []
            text = json.dumps(document)
            blob = zlib.compress(text.encode(), 6)
        if len(blob) > CODE_BYTES:
            continue  # more than a case's share even without them: not kept
        rows.append(
            {
                "run_id": run_id,
                "benchmark_id": code.benchmark_id,
                "graphs": len(document["graphs"]),
                "kernels": len(document["kernels"]),
                "size": len(text),
                "compressed": blob,
            }
        )
    if rows:
        insert_missing(session, KernelCode, rows, ["run_id", "benchmark_id"])


def read(session: Session, run_id: int, benchmark_id: int) -> dict[str, Any] | None:
    """A case's generated code in a run (``{"graphs", "kernels"}``), if kept."""
    query = select(KernelCode.compressed).where(
        KernelCode.run_id == run_id, KernelCode.benchmark_id == benchmark_id
    )
    blob = session.scalar(query)
    if blob is None:
        return None
    text = zlib.decompressobj().decompress(blob, DECOMPRESSED_BYTES)
    document: dict[str, Any] = json.loads(text)
    return document


def case_code_diff(
    session: Session,
    base_run: int,
    head_run: int,
    benchmark_id: int,
    head_benchmark_id: int | None = None,
    only: str | None = None,
) -> list[KernelCodeChange]:
    """One case's generated code from one run to another; NotFound names a side without it.

    ``head_benchmark_id``: the head side's case where it is another (two configs of a case).
    """
    sides = []
    head_case = head_benchmark_id or benchmark_id
    for side, run_id, case in (("base", base_run, benchmark_id), ("head", head_run, head_case)):
        document = read(session, run_id, case)
        if document is None:
            raise NotFound(f"run {run_id} ({side}) kept no generated code of benchmark {case}")
        sides.append(document)
    base, head = sides
    return code_diff(base, head, only)


def code_diff(
    base: dict[str, Any], head: dict[str, Any], only: str | None = None
) -> list[KernelCodeChange]:
    """Each identity's code from ``base`` to ``head``, changed ones first.

    ``only``: one identity (as ``str(Identity)``) to diff, whatever its place.
    """
    before, after = _by_identity(base["kernels"]), _by_identity(head["kernels"])
    changes = []
    diffed = 0
    for key in sorted(set(before) | set(after)):
        old, new = before.get(key), after.get(key)
        label = str(Identity(*key))
        names = [*(k["name"] for k in new or []), *(k["name"] for k in old or [])]
        names = list(dict.fromkeys(names))
        if old is None or new is None:
            kind: CodeChange = "appeared" if old is None else "disappeared"
            source = "\n".join(_normalised(k) for k in (new or old or []))
            changes.append(KernelCodeChange(label, *key, kind, names, None, source))
            continue
        old_text, new_text = _joined(old), _joined(new)
        launch = (_launches(old), _launches(new))
        if old_text == new_text:
            changes.append(KernelCodeChange(label, *key, "same", names, None, launch=launch))
            continue
        wanted = (only is None and diffed < DIFFS_SHOWN) or only == label
        diffed += wanted
        text = _unified(old_text, new_text) if wanted else None
        changes.append(KernelCodeChange(label, *key, "changed", names, text, launch=launch))
    order = {"changed": 0, "appeared": 1, "disappeared": 2, "same": 3}
    return sorted(changes, key=lambda c: (order[c.change], c.kind, c.name))


def _by_identity(kernels: Sequence[dict[str, str]]) -> dict[tuple[str, str], list[dict[str, str]]]:
    found: dict[tuple[str, str], list[dict[str, str]]] = {}
    for kernel in kernels:
        identity = identity_of(kernel["name"])
        found.setdefault((identity.kind, identity.name), []).append(kernel)
    return found


def _normalised(kernel: dict[str, str]) -> str:
    """The kernel's source with its own name as ``KERNEL`` (renumbering is no change).

    A C++ kernel profiled by name records itself as ``graph_<id>_<name>``: the graph's id
    goes too.
    """
    name = kernel["name"]
    source = re.sub(rf"graph_\d+_{re.escape(name)}", PLACEHOLDER, kernel["source"])
    return source.replace(name, PLACEHOLDER)


def _launches(kernels: Sequence[dict[str, str]]) -> str:
    return "\n".join(k.get("launch", "") for k in kernels)


def _joined(kernels: Sequence[dict[str, str]]) -> str:
    return "\n".join(_normalised(k) for k in kernels)


def _unified(old: str, new: str) -> str:
    lines = difflib.unified_diff(
        old.splitlines(), new.splitlines(), "base", "head", lineterm="", n=2
    )
    shown = [line for _, line in zip(range(DIFF_LINES), lines, strict=False)]
    return "\n".join(shown)
