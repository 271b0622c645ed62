"""The real models: every category, HUD's names, and a few built and run at tiny inputs.

Building all of them takes minutes on 2 cores (transformers, timm and diffusers imports and
the random initialisation of 100M-parameter models), and compiling one with inductor close to
a minute: the tests build one model per package family that is cheap to build, and check
eager against compiled through dynamo and AOT autograd (``aot_eager``). The whole set, under
inductor, is the ``models`` tier (``benchwatch run-suite --tier models``).
"""

import subprocess
import sys
from typing import Any

import pytest
import torch

from workers import compile_configs
from workers.harness import Plan, measure
from workers.tiers import TIERS, tier_measurements
from workers.workloads.real_models import REAL_MODELS

from .test_models import CATEGORIES, by_metric

CPU = torch.device("cpu")
ONCE = Plan(repeats=2, warmup=0)
# PyTorch's HUD dashboard names of the same models (benchmarks/dynamo's model lists).
HUD = {
    ("torchbench", "resnet50"),
    ("torchbench", "mobilenet_v3_large"),
    ("timm_models", "convnext_base"),
    ("timm_models", "tf_efficientnet_b0"),
    ("timm_models", "vit_base_patch16_224"),
    ("huggingface", "BertForMaskedLM"),
    ("huggingface", "GPT2ForSequenceClassification"),
    ("huggingface", "T5Small"),
}


def real(name: str) -> Any:
    return next(model for model in REAL_MODELS if model.model == name)


def test_the_real_models_cover_the_twelve_categories_under_hud_names() -> None:
    assert {model.category for model in REAL_MODELS} == CATEGORIES
    named = {(model.suite, model.model) for model in REAL_MODELS}
    assert named >= HUD
    # the rest carry the package that defines them, never a dashboard suite
    for suite, _ in named - HUD:
        assert suite not in ("torchbench", "huggingface", "timm_models"), suite


def test_the_models_tier_runs_every_real_model_and_can_be_narrowed() -> None:
    tier = TIERS["models"]
    assert {m.case.model for m in tier_measurements(tier)} == {m.model for m in REAL_MODELS}
    only = tier_measurements(tier, only="T5Small", configs=["eager"], precisions=["fp32"])
    assert [(m.case.suite, m.case.model, m.config) for m in only] == [
        ("huggingface", "T5Small", "eager")
    ]


@pytest.mark.parametrize(
    ("name", "shape"), [("mobilenet_v3_large", (1, 1000)), ("LlamaForCausalLM", (1, 8, 49152))]
)
def test_a_real_model_builds_and_runs_at_a_tiny_batch(name: str, shape: tuple[int, ...]) -> None:
    model, inputs = real(name).case(tiny=True).make(CPU, torch.float32)
    with torch.no_grad():
        out = model(*inputs)
    assert tuple(out.shape) == shape
    assert torch.isfinite(out).all()
    assert not model.training  # built for inference, dropout off
    assert all(m.p == 0 for m in model.modules() if isinstance(m, torch.nn.Dropout))


def test_a_real_model_compiled_matches_eager(monkeypatch: pytest.MonkeyPatch) -> None:
    """Dynamo's graph of DLRM (through AOT autograd, without codegen) matches eager in fp32."""
    monkeypatch.setattr(compile_configs, "compile_options", lambda *_: {"backend": "aot_eager"})
    case = real("dlrm_criteo_kaggle").case(tiny=True)
    rows = by_metric(measure(case, "default", "fp32", CPU, ONCE))
    assert rows["accuracy"]["text_value"] == "pass", rows.get("max_error")
    assert rows["graph_breaks"]["value"] == 0
    assert rows["speedup"]["value"] > 0


def test_a_process_that_builds_only_a_timm_model_gets_past_torchvision() -> None:
    """A shard builds its own model only: timm imports torchvision, whose extension does not
    load beside a CPU torch, so the shim must come first there too (it once came only with
    torchvision's own models, and every timm and transformers shard failed on its own)."""
    code = (
        "import torch\n"
        "from workers.workloads.real_models import REAL_MODELS\n"
        "case = next(m for m in REAL_MODELS if m.model == 'tf_efficientnet_b0').case(tiny=True)\n"
        "model, inputs = case.make(torch.device('cpu'), torch.float32)\n"
        "print(tuple(model(*inputs).shape))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "(1, 1000)"
