"""Real models: the field's packages at their published architectures, with random weights.

Nothing is downloaded: torchvision and timm build their architectures with ``weights=None`` /
``pretrained=False``, Hugging Face transformers and diffusers from configs written here (the
published ones' sizes, ``HF_HUB_OFFLINE`` set). A model that is on PyTorch's HUD dashboard keeps
its suite and name there (``torchbench``, ``huggingface``, ``timm_models``), so the results sit
beside HUD's; the others carry the name of the package that defines them as their suite.

The packages are imported when a model is built, not when this module is: the tier table
(``workers.tiers``) lists these cases without loading transformers. Dropout, layer drop and
spec-augment masking are off (the probabilities set to 0), so a training step is deterministic
and the eager and compiled steps can be compared.
"""

import importlib
import itertools
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import torch
from torch import Tensor, nn

from workers.harness import Case

Inputs = Callable[[int, bool], tuple[Tensor, ...]]  # (batch, tiny) -> CPU inputs
TV_SUITE, HF_SUITE, TIMM_SUITE = "torchbench", "huggingface", "timm_models"
# torchvision's own C++ ops, defined here when its extension cannot load (a wheel built for
# another torch: the CUDA wheel beside a CPU torch); kept alive for the process.
_FALLBACK_OPS: list[torch.library.Library] = []


@dataclass(frozen=True)
class RealModel:
    """A real model: where it comes from, how to build it, and inputs at a given batch."""

    suite: str
    model: str
    category: str
    source: str  # the package (and architecture) it is built from, for the docs and tests
    build: Callable[[], nn.Module]
    inputs: Inputs
    batch_size: int = 1
    batch_args: tuple[int, ...] = (0,)
    # Allowed error, times the harness's precision tolerance (benchmarks/dynamo keeps such
    # per-model tolerances too): deep stacks whose compiled kernels reorder sums.
    tolerance_scale: float = 1.0

    def case(self, *, tiny: bool = False) -> Case:
        """The harness case; ``tiny``: the smallest inputs the architecture takes (tests)."""
        build, inputs, batch = self.build, self.inputs, self.batch_size

        def make(device: torch.device, dtype: torch.dtype) -> tuple[nn.Module, tuple[Tensor, ...]]:
            model = _without_dropout(build()).eval().to(device=device, dtype=dtype)
            made = inputs(batch, tiny)
            return model, tuple(
                t.to(device=device, dtype=dtype) if t.is_floating_point() else t.to(device)
                for t in made
            )

        return Case(
            self.suite,
            self.model,
            self.category,
            batch,
            make,
            quantization_reason=None,
            ao_int8_reason=None,
            batch_args=self.batch_args,
            training_reason=None,
            tolerance_scale=self.tolerance_scale,
        )


def _without_dropout(model: nn.Module) -> nn.Module:
    for module in model.modules():
        if isinstance(module, nn.Dropout):
            module.p = 0.0
    return model


def _quiet(config: Any) -> Any:
    """A Hugging Face config with every dropout and layer-drop probability at 0."""
    for name, value in list(vars(config).items()):
        if ("dropout" in name or "layerdrop" in name) and isinstance(value, float):
            setattr(config, name, 0.0)
    return config


def torchvision() -> ModuleType:
    """Import torchvision, also where its C++ extension cannot load.

    PyPI's torchvision wheel is built against CUDA torch; beside a CPU build of the same torch
    its extension fails to load and the import stops at the first fake kernel it registers
    (``torchvision::nms``). The classification, segmentation and video models need none of
    those ops, so their schemas are defined (without kernels) and the import is retried.
    """
    try:
        return importlib.import_module("torchvision")
    except RuntimeError as exc:
        if "torchvision::" not in str(exc):
            raise
    for name in [n for n in sys.modules if n == "torchvision" or n.startswith("torchvision.")]:
        del sys.modules[name]
    library = torch.library.Library("torchvision", "DEF")  # type: ignore[no-untyped-call]
    for op in ("nms", "qnms"):
        library.define(f"{op}(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")  # type: ignore[no-untyped-call]
    _FALLBACK_OPS.append(library)
    return importlib.import_module("torchvision")


def _package(name: str) -> ModuleType:
    """Import one of the field's packages, torchvision first.

    timm, transformers and diffusers import torchvision themselves; its import must already
    have got past its extension (``torchvision()``), or theirs fails, in a process (a
    shard's) that builds none of torchvision's own models first.
    """
    torchvision()
    return importlib.import_module(name)


def _transformers() -> ModuleType:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    return _package("transformers")


class Logits(nn.Module):
    """A model whose output holds its result under a name (``logits``, ``out``, ``sample``)."""

    def __init__(self, model: nn.Module, field: str) -> None:
        super().__init__()
        self.model, self.field = model, field

    def forward(self, *args: Tensor) -> Tensor:
        out = self.model(*args)
        return out[self.field] if isinstance(out, dict) else getattr(out, self.field)


class Detections(nn.Module):
    """DETR's class logits and boxes side by side: a fixed-size output, no NMS to vary."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, pixels: Tensor) -> Tensor:
        out = self.model(pixel_values=pixels)
        return torch.cat([out.logits.flatten(1), out.pred_boxes.flatten(1)], dim=1)


def _images(size: int, tiny_size: int = 64, frames: int = 0) -> Inputs:
    """Images (or clips of ``frames``) at ``size``; tiny: ``tiny_size``, 4 frames."""

    def inputs(batch: int, tiny: bool) -> tuple[Tensor, ...]:
        side = tiny_size if tiny else size
        clip = (4 if tiny else frames,) if frames else ()
        return (torch.randn(batch, 3, *clip, side, side),)

    return inputs


def _tokens(vocab: int, length: int, count: int = 1) -> Inputs:
    def inputs(batch: int, tiny: bool) -> tuple[Tensor, ...]:
        size = (batch, 8 if tiny else length)
        return tuple(torch.randint(0, vocab, size) for _ in range(count))

    return inputs


def _audio(batch: int, tiny: bool) -> tuple[Tensor, ...]:
    return (torch.randn(batch, 1600 if tiny else 16000),)  # 0.1 s or 1 s at 16 kHz


def _graph(batch: int, tiny: bool) -> tuple[Tensor, ...]:
    nodes, edges = (64, 256) if tiny else (2708, 10556)  # Cora's size
    return torch.randn(nodes, 1433), torch.randint(0, nodes, (2, edges))


def _recommendation(batch: int, tiny: bool) -> tuple[Tensor, ...]:
    rows = 8 if tiny else batch
    return torch.randn(rows, 13), torch.randint(0, DLRM_ROWS, (rows, 26))


def _diffusion(batch: int, tiny: bool) -> tuple[Tensor, ...]:
    side = 8 if tiny else 32
    return torch.randn(batch, 3, side, side), torch.randint(0, 1000, (batch,))


def _vision(name: str, **kwargs: Any) -> Callable[[], nn.Module]:
    return lambda: getattr(torchvision().models, name)(weights=None, **kwargs)


def _deeplab() -> nn.Module:
    segmentation = torchvision().models.segmentation
    model = segmentation.deeplabv3_mobilenet_v3_large(
        weights=None, weights_backbone=None, num_classes=21, aux_loss=False
    )
    return Logits(model, "out")


def _r3d() -> nn.Module:
    return torchvision().models.video.r3d_18(weights=None)


def _timm(name: str) -> Callable[[], nn.Module]:
    return lambda: _package("timm").create_model(name, pretrained=False)


def _bert() -> nn.Module:
    t = _transformers()
    return Logits(t.BertForMaskedLM(_quiet(t.BertConfig())), "logits")  # bert-base-uncased


def _gpt2() -> nn.Module:
    t = _transformers()
    config = _quiet(t.GPT2Config(num_labels=2, pad_token_id=50256))  # gpt2 (124M)
    return Logits(t.GPT2ForSequenceClassification(config), "logits")


def _t5() -> nn.Module:
    t = _transformers()
    config = t.T5Config(  # t5-small
        vocab_size=32128, d_model=512, d_kv=64, d_ff=2048, num_layers=6, num_heads=8
    )
    model = t.T5ForConditionalGeneration(_quiet(config))
    return _Seq2Seq(model)


class _Seq2Seq(nn.Module):
    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, source: Tensor, target: Tensor) -> Tensor:
        return self.model(input_ids=source, decoder_input_ids=target).logits


def _llama() -> nn.Module:
    t = _transformers()
    config = t.LlamaConfig(  # SmolLM-135M's Llama architecture, 4 of its 30 layers
        vocab_size=49152,
        hidden_size=576,
        intermediate_size=1536,
        num_hidden_layers=4,
        num_attention_heads=9,
        num_key_value_heads=3,
        max_position_embeddings=2048,
        rope_theta=10000.0,
        tie_word_embeddings=True,
    )
    return Logits(t.LlamaForCausalLM(_quiet(config)), "logits")


def _wav2vec2() -> nn.Module:
    t = _transformers()
    config = _quiet(t.Wav2Vec2Config(vocab_size=32, apply_spec_augment=False))  # wav2vec2-base
    return Logits(t.Wav2Vec2ForCTC(config), "logits")


def _detr() -> nn.Module:
    t = _transformers()
    backbone = t.ResNetConfig(out_features=["stage4"])  # ResNet-50
    config = t.DetrConfig(
        use_timm_backbone=False, use_pretrained_backbone=False, backbone_config=backbone
    )
    return Detections(t.DetrForObjectDetection(_quiet(config)))  # detr-resnet-50


def _unet() -> nn.Module:
    diffusers = _package("diffusers")
    model = diffusers.UNet2DModel(  # google/ddpm-cifar10-32
        sample_size=32,
        in_channels=3,
        out_channels=3,
        layers_per_block=2,
        block_out_channels=(128, 256, 256, 256),
        down_block_types=("DownBlock2D", "AttnDownBlock2D", "DownBlock2D", "DownBlock2D"),
        up_block_types=("UpBlock2D", "UpBlock2D", "AttnUpBlock2D", "UpBlock2D"),
    )
    return Logits(model, "sample")


def _gcn() -> nn.Module:
    geometric = _package("torch_geometric.nn")
    # Kipf and Welling's GCN on Cora: 1433 features, 16 hidden, 7 classes
    return geometric.GCN(in_channels=1433, hidden_channels=16, num_layers=2, out_channels=7)


DLRM_ROWS = 10_000  # rows per table: the Criteo tables hashed down to fit any machine


class DLRM(nn.Module):
    """DLRM (Naumov et al.) at the Criteo Kaggle configuration: 13 dense, 26 sparse features.

    Bottom MLP 13-512-256-64, 26 embedding tables of width 64, pairwise dot interaction, top
    MLP 512-256-1, as the reference implementation's Kaggle run; no package ships it without
    GPU-only kernels (torchrec needs fbgemm), so it is written here in plain torch.
    """

    def __init__(self, tables: int = 26, width: int = 64) -> None:
        super().__init__()
        self.embeddings = nn.ModuleList(nn.Embedding(DLRM_ROWS, width) for _ in range(tables))
        self.bottom = _mlp(13, 512, 256, width)
        pairs = (tables + 1) * tables // 2
        self.top = _mlp(width + pairs, 512, 256, 1)
        self.pairs = torch.triu_indices(tables + 1, tables + 1, offset=1)

    def forward(self, dense: Tensor, sparse: Tensor) -> Tensor:
        x = self.bottom(dense)
        features = torch.stack(
            [x, *(table(sparse[:, i]) for i, table in enumerate(self.embeddings))], dim=1
        )
        dots = torch.bmm(features, features.transpose(1, 2))
        return self.top(torch.cat([x, dots[:, self.pairs[0], self.pairs[1]]], dim=1))


def _mlp(*widths: int) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i, (a, b) in enumerate(itertools.pairwise(widths)):
        layers += [nn.Linear(a, b), *([nn.ReLU()] if i < len(widths) - 2 else [])]
    return nn.Sequential(*layers)


REAL_MODELS = (
    RealModel(
        TV_SUITE,
        "resnet50",
        "image_classification",
        "torchvision",
        _vision("resnet50"),
        _images(224),
    ),
    RealModel(
        TV_SUITE,
        "mobilenet_v3_large",
        "image_classification",
        "torchvision",
        _vision("mobilenet_v3_large"),
        _images(224),
    ),
    RealModel(
        TIMM_SUITE,
        "convnext_base",
        "image_classification",
        "timm",
        _timm("convnext_base"),
        _images(224),
    ),
    RealModel(
        TIMM_SUITE,
        "tf_efficientnet_b0",
        "image_classification",
        "timm",
        _timm("tf_efficientnet_b0"),
        _images(224),
    ),
    RealModel(
        TIMM_SUITE,
        "vit_base_patch16_224",
        "vision_transformer",
        "timm",
        _timm("vit_base_patch16_224"),
        _images(224, tiny_size=224),
    ),
    RealModel(
        "transformers",
        "DetrForObjectDetection",
        "object_detection",
        "transformers (detr-resnet-50)",
        _detr,
        _images(384),
    ),
    RealModel(
        "torchvision",
        "deeplabv3_mobilenet_v3_large",
        "segmentation",
        "torchvision",
        _deeplab,
        _images(224),
    ),
    RealModel(
        HF_SUITE,
        "BertForMaskedLM",
        "text_encoder",
        "transformers (bert-base-uncased)",
        _bert,
        _tokens(30522, 128),
    ),
    RealModel(
        HF_SUITE,
        "GPT2ForSequenceClassification",
        "language_model",
        "transformers (gpt2)",
        _gpt2,
        _tokens(50257, 128),
    ),
    RealModel(
        "transformers",
        "LlamaForCausalLM",
        "language_model",
        "transformers (SmolLM-135M's Llama, 4 layers)",
        _llama,
        _tokens(49152, 128),
    ),
    RealModel(
        HF_SUITE,
        "T5Small",
        "sequence",
        "transformers (t5-small)",
        _t5,
        _tokens(32128, 128, count=2),
        batch_args=(0, 1),
    ),
    RealModel(
        "transformers",
        "Wav2Vec2ForCTC",
        "speech",
        "transformers (wav2vec2-base)",
        _wav2vec2,
        _audio,
    ),
    RealModel(
        "torch_geometric",
        "GCN",
        "graph",
        "torch_geometric (GCN on Cora's shape)",
        _gcn,
        _graph,
        batch_size=2708,
        batch_args=(),
    ),
    RealModel(
        "torchvision",
        "r3d_18",
        "video",
        "torchvision",
        _r3d,
        _images(112, 32, frames=8),
    ),
    RealModel(
        "diffusers",
        "UNet2DModel",
        "diffusion",
        "diffusers (ddpm-cifar10-32)",
        _unet,
        _diffusion,
        batch_args=(0, 1),
    ),
    RealModel(
        "torch",
        "dlrm_criteo_kaggle",
        "recommendation",
        "torch (DLRM reference, Kaggle)",
        DLRM,
        _recommendation,
        batch_size=2048,
        batch_args=(0, 1),
    ),
)
