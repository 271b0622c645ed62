"""PyTorch's dashboard configs in the harness: export, AOTInductor, freezing, cpp_wrapper.

Inductor's C++ builds take minutes on 2 cores (the cpp wrapper and AOTInductor compile a
shared library), so those configs are checked here up to torch's compile and package calls,
which are stood in for; export runs for real. The real builds run in the ``models`` tier.
"""

from pathlib import Path
from typing import Any

import pytest
import torch

from workers import compile_configs
from workers.harness import _labelled, measure
from workers.workloads.models import MODELS

from .test_harness import CPU, QUICK, by_metric

GCN = next(c for c in MODELS if c.model == "gcn")  # two linear layers: quick to export


def test_export_runs_the_exported_module_and_matches_eager() -> None:
    rows = by_metric(measure(GCN, "export", "fp32", CPU, QUICK))
    assert rows["accuracy"]["text_value"] == "pass"
    assert rows["compilation_latency"]["value"] > 0  # the export, on the first call
    assert rows["latency"]["value"] > 0


@pytest.mark.parametrize(
    ("config", "options"),
    [("freezing", {"freezing": True}), ("cpp_wrapper", {"cpp_wrapper": True})],
)
def test_inductor_options_configs_compile_with_their_option(
    monkeypatch: pytest.MonkeyPatch, config: str, options: dict[str, Any]
) -> None:
    seen: list[dict[str, Any]] = []

    def compile_(fn: Any, **kwargs: Any) -> Any:
        seen.append(kwargs)
        return fn

    monkeypatch.setattr(torch, "compile", compile_)
    rows = by_metric(measure(GCN, config, "fp32", CPU, QUICK))
    assert seen == [{"options": options}]
    assert rows["accuracy"]["text_value"] == "pass"


def test_aot_inductor_packages_the_exported_program_and_runs_the_loaded_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    packaged: list[tuple[Any, str]] = []

    def package(program: Any, package_path: str) -> str:
        packaged.append((program, package_path))
        return package_path

    def load(path: str) -> Any:
        return packaged[-1][0].module()

    monkeypatch.setattr(torch._inductor, "aoti_compile_and_package", package)
    monkeypatch.setattr(torch._inductor, "aoti_load_package", load)
    rows = by_metric(measure(GCN, "aot_inductor", "fp32", CPU, QUICK))
    assert rows["accuracy"]["text_value"] == "pass"
    [(program, path)] = packaged
    assert isinstance(program, torch.export.ExportedProgram)
    assert Path(path).suffix == ".pt2"


@pytest.mark.parametrize(
    ("config", "mode", "reason"),
    [
        ("max_autotune_no_cudagraphs", "inference", "max-autotune needs a GPU"),
        ("export", "training", "torch.export is measured in inference"),
        ("aot_inductor", "training", "AOTInductor compiles an inference graph"),
        ("freezing", "training", "freezing folds the weights into constants: inference only"),
    ],
)
def test_what_a_config_cannot_run_is_skipped_with_its_reason(
    config: str, mode: Any, reason: str
) -> None:
    rows = measure(GCN, config, "fp32", CPU, QUICK, mode)
    assert {r["status"] for r in rows} == {"skipped"}
    assert all(reason in r["reason"] for r in rows)


def test_cuda_graphs_on_rocm_are_labelled_hip_graphs(monkeypatch: pytest.MonkeyPatch) -> None:
    latency = {"metric": "latency", "value": 1.0}
    monkeypatch.setattr(torch.version, "hip", None)
    assert compile_configs.graphs_label("cudagraphs") == {}
    monkeypatch.setattr(torch.version, "hip", "6.4.0")
    assert compile_configs.graphs_label("default") == {}
    for config in ("cudagraphs", "dynamic"):
        label = compile_configs.graphs_label(config)
        assert _labelled(latency, label)["extra"] == {"graphs": "hipgraphs"}
    assert _labelled({"metric": "speedup", "value": 2.0}, label) == {
        "metric": "speedup",
        "value": 2.0,
    }
