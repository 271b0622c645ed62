"""What Inductor generated for a compiled case: each graph's output code and its kernels.

``captured_code`` collects the output code of every graph compiled (or loaded from Inductor's
FX graph cache) while it is open: the Python wrapper, or C++ with ``cpp_wrapper``, holding
each kernel's source as a string. ``kernels_of`` cuts the kernels out of it: Triton kernels
(``async_compile.triton``) with their launch heuristics (the ``@triton_heuristics`` decorator:
size hints, the Triton and Inductor meta), and C++ kernels (``async_compile.cpp_pybinding``).
Block sizes and warps a GPU autotuner picks at the first launch are not in the code: the
heuristics and the configs it chooses from are.

Everything is capped (``GRAPHS_KEPT`` graphs of ``GRAPH_CHARS``, ``KERNELS_KEPT`` kernels of
``SOURCE_CHARS``) and cut in one pass over the text, without backtracking.
"""

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

log = logging.getLogger(__name__)

GRAPHS_KEPT = 16
GRAPH_CHARS = 512_000
KERNELS_KEPT = 400
SOURCE_CHARS = 64_000
LAUNCH_CHARS = 4_000
_DEFINITIONS = (" = async_compile.triton(", " = async_compile.cpp_pybinding(")
_QUOTES = ("'''", '"""')
_HEURISTICS = "@triton_heuristics."
_JIT = "@triton.jit"


@contextmanager
def captured_code() -> Iterator[list[str]]:
    """The output code of each graph compiled, or loaded from the cache, while it is open.

    It wraps ``CompiledFxGraph.post_compile``, which a graph passes through either way (a
    private hook of Inductor's: where a torch build lacks it, nothing is captured).
    """
    codes: list[str] = []
    try:
        from torch._inductor.output_code import CompiledFxGraph
    except ImportError:  # a torch without Inductor's output code module
        yield codes
        return
    original = getattr(CompiledFxGraph, "post_compile", None)
    if original is None:
        yield codes
        return

    def post_compile(self: Any, *args: Any, **kwargs: Any) -> Any:
        code = getattr(self, "source_code", None)
        if isinstance(code, str) and code not in codes and len(codes) < GRAPHS_KEPT:
            codes.append(code[:GRAPH_CHARS])
        return original(self, *args, **kwargs)

    CompiledFxGraph.post_compile = post_compile  # type: ignore[method-assign]
    try:
        yield codes
    finally:
        CompiledFxGraph.post_compile = original  # type: ignore[method-assign]


def kernels_of(codes: list[str]) -> list[dict[str, str]]:
    """The kernels the graphs' code defines: name, source and (Triton) launch heuristics."""
    kernels: list[dict[str, str]] = []
    for code in codes:
        at = 0
        while len(kernels) < KERNELS_KEPT:
            found = _next_definition(code, at)
            if found is None:
                break
            name, body_start, body_end = found
            source = code[body_start:body_end]
            kernels.append(
                {"name": name, "source": source[:SOURCE_CHARS], "launch": _launch(source)}
            )
            at = body_end
    return kernels


def _next_definition(code: str, at: int) -> tuple[str, int, int] | None:
    """The next ``name = async_compile.x(..., '''source''')`` after ``at``: name and bounds."""
    starts = [(i, d) for d in _DEFINITIONS if (i := code.find(d, at)) >= 0]
    if not starts:
        return None
    start, definition = min(starts)
    line_start = code.rfind("\n", 0, start) + 1
    name = code[line_start:start].strip()
    opened = [(i, q) for q in _QUOTES if (i := code.find(q, start + len(definition))) >= 0]
    if not opened:
        return None
    body_start, quote = min(opened)
    body_start += len(quote)
    body_end = code.find(quote, body_start)
    if body_end < 0:
        body_end = len(code)
    return name, body_start, body_end


def _launch(source: str) -> str:
    """A Triton kernel's heuristics decorator (size hints, meta, configs); "" for C++."""
    start = source.find(_HEURISTICS)
    if start < 0:
        return ""
    end = source.find(_JIT, start)
    return source[start : end if end >= 0 else len(source)].strip()[:LAUNCH_CHARS]
