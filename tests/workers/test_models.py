"""Every model category builds, runs and matches its fp32 reference on the CPU."""

from typing import Any

import pytest
import torch

from workers.harness import Plan, measure
from workers.workloads.models import MODELS

CPU = torch.device("cpu")
ONCE = Plan(repeats=2, warmup=0)
CATEGORIES = {
    "image_classification",
    "object_detection",
    "segmentation",
    "text_encoder",
    "language_model",
    "speech",
    "recommendation",
    "graph",
    "video",
    "diffusion",
    "vision_transformer",
    "sequence",
}


def by_metric(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {row["metric"]: row for row in rows}


def test_the_twelve_categories_are_covered() -> None:
    assert {case.category for case in MODELS} == CATEGORIES


@pytest.mark.parametrize("case", MODELS, ids=lambda c: c.model)
def test_model_runs_eager_fp32_and_bf16(case: Any) -> None:
    fp32 = by_metric(measure(case, "eager", "fp32", CPU, ONCE))
    assert fp32["accuracy"]["text_value"] == "pass"
    assert fp32["latency"]["value"] > 0
    bf16 = by_metric(measure(case, "eager", "bf16", CPU, ONCE))
    assert bf16["latency"].get("status", "ok") == "ok", bf16["latency"]
    if case.model != "gpt_generate":  # greedy decoding may pick other tokens in bf16
        assert bf16["accuracy"]["text_value"] == "pass", bf16.get("max_error")


@pytest.mark.parametrize("precision", ["int8", "int4"])
def test_torchao_quantizes_the_weights(precision: str) -> None:
    for model in ("dlrm", "bert"):
        case = next(c for c in MODELS if c.model == model)
        rows = by_metric(measure(case, "eager", precision, CPU, ONCE))
        assert rows["accuracy"]["text_value"] == "pass", (model, rows["accuracy"])
        assert rows["max_error"]["value"] > 0  # the weights really were quantized
        assert rows["latency"]["extra"]["quantization"].startswith("torchao Int8DynamicActivation")


@pytest.mark.parametrize("precision", ["int8", "int4"])
def test_a_linear_layer_of_one_input_feature_stays_float(precision: str) -> None:
    """The UNet's timestep projection (1 -> 16): torchao failed to reshape its scales."""
    case = next(c for c in MODELS if c.model == "diffusion_unet")
    rows = by_metric(measure(case, "eager", precision, CPU, ONCE))
    assert rows["latency"].get("status", "ok") == "ok", rows["latency"].get("reason")
    assert rows["accuracy"]["text_value"] == "pass"


def test_without_torchao_int8_falls_back_and_int4_says_why_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("workers.harness.has_torchao", lambda: False)
    monkeypatch.setattr("workers.quantize.has_torchao", lambda: False)
    mlp = next(c for c in MODELS if c.model == "dlrm")
    rows = by_metric(measure(mlp, "eager", "int8", CPU, ONCE))
    assert rows["accuracy"]["text_value"] == "pass"
    assert rows["latency"]["extra"]["quantization"] == "torch.ao.quantization.quantize_dynamic"
    bert = next(c for c in MODELS if c.model == "bert")
    skipped = measure(bert, "eager", "int8", CPU, ONCE)
    assert {r["status"] for r in skipped} == {"skipped"}
    assert "quantized Linear" in skipped[0]["reason"]
    int4 = measure(mlp, "eager", "int4", CPU, ONCE)
    assert {r["reason"] for r in int4} == {"int4 needs torchao (pip install torchao)"}


def test_a_model_compiles_with_inductor() -> None:
    # The cheapest model case to compile (about a fifth of resnet's C++ build on 2 cores):
    # what is checked is the harness's compiled path on a model, whichever model it is.
    gcn = next(c for c in MODELS if c.model == "gcn")
    rows = by_metric(measure(gcn, "default", "fp32", CPU, ONCE))
    assert rows["speedup"]["value"] > 0
    assert rows["unique_graphs"]["value"] >= 1
    assert rows["accuracy"]["text_value"] == "pass"


def test_a_quantized_case_still_gets_the_other_skip_reasons() -> None:
    dlrm = next(c for c in MODELS if c.model == "dlrm")  # no batch dimension
    rows = measure(dlrm, "dynamic", "int8", CPU, ONCE)
    assert {r["reason"] for r in rows} == {"no batch dimension to vary for dynamic shapes"}
