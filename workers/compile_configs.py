"""How each of PyTorch's dashboard configs compiles a callable, as ``benchmarks/dynamo`` does.

- ``default``, ``dynamic``, ``cudagraphs``, ``max_autotune``, ``max_autotune_no_cudagraphs``:
  ``torch.compile`` (inductor) with the mode the name says; CUDA graphs come from
  ``reduce-overhead`` on a GPU.
- ``cpp_wrapper``: inductor with ``cpp_wrapper=True`` (the generated wrapper is C++).
- ``freezing``: inductor with ``freezing=True`` (weights folded into constants; inference).
- ``export``: ``torch.export.export`` on the first call's inputs, then the exported module runs.
- ``aot_inductor``: export, then AOTInductor compiles and packages it (a ``.pt2``), the package
  is loaded and the loaded model runs.

Export and AOTInductor compile on the first call, like ``torch.compile``: the harness's
compile time (first compiled call minus first eager call) covers the export and the build.

CUDA graphs on ROCm are HIP graphs: the config keeps its dashboard name ``cudagraphs`` (one
series across vendors; an upload's ``hipgraphs`` folds to it) and its rows carry
``extra.graphs = "hipgraphs"`` (``graphs_label``).
"""

import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

Fn = Callable[..., torch.Tensor]

# Configs that cannot run on a CPU, and why.
GPU_ONLY = {
    "cudagraphs": "CUDA/HIP graphs need a GPU",
    "max_autotune": "max-autotune needs a GPU",
    "max_autotune_no_cudagraphs": "max-autotune needs a GPU",
}
# Configs that measure inference only, and why (benchmarks/dynamo runs them so too).
INFERENCE_ONLY = {
    "export": "torch.export is measured in inference (as benchmarks/dynamo --export)",
    "aot_inductor": "AOTInductor compiles an inference graph (as benchmarks/dynamo)",
    "freezing": "freezing folds the weights into constants: inference only",
}
EXPORTED = ("export", "aot_inductor")
# torch.compile's inductor options per config (passed as ``options``, never with ``mode``).
_INDUCTOR_OPTIONS = {"cpp_wrapper": {"cpp_wrapper": True}, "freezing": {"freezing": True}}
_MODES = {
    "max_autotune": "max-autotune",
    "max_autotune_no_cudagraphs": "max-autotune-no-cudagraphs",
}


def compile_options(config: str, device: torch.device) -> dict[str, Any]:
    """torch.compile's arguments for a dashboard config (CUDA graphs: ``reduce-overhead``)."""
    if config in _INDUCTOR_OPTIONS:
        return {"options": _INDUCTOR_OPTIONS[config]}
    graphs = device.type == "cuda" and config in ("cudagraphs", "dynamic")
    mode = _MODES.get(config, "reduce-overhead" if graphs else None)
    return {"mode": mode, "dynamic": True if config == "dynamic" else None}


def inductor_options(config: str) -> dict[str, Any]:
    """The Inductor options a config compiles with, beyond its mode (``cpp_wrapper``...)."""
    return dict(_INDUCTOR_OPTIONS.get(config, {}))


@contextmanager
def kernels_named(device: torch.device) -> Iterator[None]:
    """Compile under it (the first calls), and a CPU profile names Inductor's C++ kernels.

    On a GPU each generated kernel is a device kernel the profiler names. On the CPU a C++
    kernel is a loop in the compiled graph's library, invisible to the profiler unless
    Inductor wraps it in a record function (``cpp.enable_kernel_profile``). A patch around the
    compiling calls, not a global setting: it must not reach other compilations of the
    process, nor the settings a run records (it only names kernels).
    """
    if device.type != "cpu":
        yield
        return
    from torch._inductor import config

    with config.patch({"cpp.enable_kernel_profile": True}):
        yield


def compiled(fn: Fn, config: str, device: torch.device) -> Fn:
    """``fn`` under a compiled config: torch.compile, or export / AOTInductor on first call."""
    if config not in EXPORTED:
        return torch.compile(fn, **compile_options(config, device))
    module = fn if isinstance(fn, torch.nn.Module) else _Function(fn)
    runner: list[Fn] = []

    def call(*args: torch.Tensor) -> torch.Tensor:
        if not runner:
            program = torch.export.export(module, args)
            runner.append(program.module() if config == "export" else _aoti(program))
        return runner[0](*args)

    return call


class _Function(torch.nn.Module):
    """A function (an operator case) as the module that torch.export takes."""

    def __init__(self, fn: Fn) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *args: torch.Tensor) -> torch.Tensor:
        """Call the function."""
        return self.fn(*args)


def _aoti(program: torch.export.ExportedProgram) -> Fn:
    """AOTInductor: compile and package the exported program, load the package."""
    with tempfile.TemporaryDirectory(prefix="benchwatch-aoti-") as folder:
        package = torch._inductor.aoti_compile_and_package(
            program, package_path=str(Path(folder) / "model.pt2")
        )
        loaded = torch._inductor.aoti_load_package(package)

    def call(*args: torch.Tensor) -> torch.Tensor:
        out = loaded(*args)
        return out[0] if isinstance(out, list | tuple) and len(out) == 1 else out  # type: ignore[no-any-return]

    return call


def graphs_label(config: str) -> dict[str, Any]:
    """``{"graphs": "hipgraphs"}`` for a CUDA-graphs config on ROCm, else nothing."""
    if config in ("cudagraphs", "dynamic") and torch.version.hip:
        return {"graphs": "hipgraphs"}
    return {}
