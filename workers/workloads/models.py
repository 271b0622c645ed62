"""The 12 model categories, self-contained in plain torch (no weights to download).

Tiny shapes: the smoke tier runs every category on a CPU in seconds; larger tiers scale the
same architectures up. Each ``make`` builds the model in eval mode and its inputs.
"""

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor, nn

from workers.harness import Case, Fn

SUITE = "benchwatch-models"
Made = tuple[Fn, tuple[Tensor, ...]]


def _block(channels: int) -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(channels, channels, 3, padding=1),
        nn.BatchNorm2d(channels),
        nn.ReLU(),
        nn.Conv2d(channels, channels, 3, padding=1),
        nn.BatchNorm2d(channels),
    )


class ResNet(nn.Module):
    """Residual blocks, then a pooled linear classifier (ResNet-50's shape, scaled down)."""

    def __init__(self, channels: int = 16, blocks: int = 2, classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, channels, 3, padding=1)
        self.blocks = nn.ModuleList(_block(channels) for _ in range(blocks))
        self.head = nn.Linear(channels, classes)

    def forward(self, x: Tensor) -> Tensor:
        x = torch.relu(self.stem(x))
        for block in self.blocks:
            x = torch.relu(x + block(x))
        return self.head(x.mean(dim=(2, 3)))


class Detector(nn.Module):
    """A conv backbone with per-anchor box and class heads."""

    def __init__(self, channels: int = 16, anchors: int = 3, classes: int = 5) -> None:
        super().__init__()
        self.backbone = nn.Sequential(
            nn.Conv2d(3, channels, 3, 2, 1),
            nn.ReLU(),
            nn.Conv2d(channels, channels, 3, 2, 1),
            nn.ReLU(),
        )
        self.boxes = nn.Conv2d(channels, anchors * 4, 1)
        self.classes = nn.Conv2d(channels, anchors * classes, 1)

    def forward(self, x: Tensor) -> Tensor:
        features = self.backbone(x)
        boxes = self.boxes(features).flatten(1)
        return torch.cat([boxes, self.classes(features).flatten(1).sigmoid()], dim=1)


class UNet(nn.Module):
    """Encoder, bottleneck and decoder with a skip connection (segmentation)."""

    def __init__(self, channels: int = 8, classes: int = 3) -> None:
        super().__init__()
        self.down = nn.Sequential(nn.Conv2d(3, channels, 3, padding=1), nn.ReLU())
        self.bottom = nn.Sequential(
            nn.MaxPool2d(2),
            nn.Conv2d(channels, channels, 3, padding=1),
            nn.ReLU(),
            nn.Upsample(scale_factor=2),
        )
        self.out = nn.Conv2d(2 * channels, classes, 1)

    def forward(self, x: Tensor) -> Tensor:
        skip = self.down(x)
        return self.out(torch.cat([skip, self.bottom(skip)], dim=1))


class Transformer(nn.Module):
    """Token embedding and a pre-norm transformer stack; ``causal`` makes it a decoder."""

    def __init__(
        self, vocab: int = 512, width: int = 64, layers: int = 2, causal: bool = False
    ) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        layer = nn.TransformerEncoderLayer(
            width, 4, 4 * width, dropout=0.0, batch_first=True, norm_first=True
        )
        self.stack = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(width, vocab)
        self.causal = causal

    def forward(self, tokens: Tensor) -> Tensor:
        mask = (
            nn.Transformer.generate_square_subsequent_mask(tokens.shape[1], device=tokens.device)
            if self.causal
            else None
        )
        return self.head(self.stack(self.embed(tokens), mask=mask, is_causal=self.causal))


class Generate(nn.Module):
    """Greedy decoding of ``steps`` tokens with a GPT-style decoder (growing sequence)."""

    def __init__(self, steps: int = 4) -> None:
        super().__init__()
        self.decoder = Transformer(causal=True)
        self.steps = steps

    def forward(self, tokens: Tensor) -> Tensor:
        for _ in range(self.steps):
            nxt = self.decoder(tokens)[:, -1].argmax(dim=-1, keepdim=True)
            tokens = torch.cat([tokens, nxt], dim=1)
        return tokens.float()


class Conformer(nn.Module):
    """Conformer-style block over audio frames: feed-forward, attention, depthwise conv."""

    def __init__(self, features: int = 40, width: int = 64) -> None:
        super().__init__()
        self.project = nn.Linear(features, width)
        self.attention = nn.MultiheadAttention(width, 4, batch_first=True)
        self.conv = nn.Conv1d(width, width, 15, padding=7, groups=width)
        self.norm = nn.LayerNorm(width)
        self.ff = nn.Sequential(nn.Linear(width, 2 * width), nn.SiLU(), nn.Linear(2 * width, width))

    def forward(self, frames: Tensor) -> Tensor:
        x = self.project(frames)
        x = x + 0.5 * self.ff(self.norm(x))
        x = x + self.attention(x, x, x, need_weights=False)[0]
        return x + self.conv(x.transpose(1, 2)).transpose(1, 2)


class DLRM(nn.Module):
    """Sparse features through embedding bags, dense through an MLP, pairwise interaction."""

    def __init__(self, tables: int = 4, rows: int = 1000, width: int = 16) -> None:
        super().__init__()
        self.tables = nn.ModuleList(nn.EmbeddingBag(rows, width, mode="sum") for _ in range(tables))
        self.bottom = nn.Sequential(nn.Linear(13, width), nn.ReLU())
        self.top = nn.Sequential(
            nn.Linear((tables + 1) ** 2 + width, 32), nn.ReLU(), nn.Linear(32, 1)
        )

    def forward(self, dense: Tensor, indices: Tensor, offsets: Tensor) -> Tensor:
        x = self.bottom(dense)
        features = torch.stack([x, *(table(indices, offsets) for table in self.tables)], dim=1)
        interactions = torch.bmm(features, features.transpose(1, 2)).flatten(1)
        return self.top(torch.cat([x, interactions], dim=1))


class GCN(nn.Module):
    """Two graph-convolution layers over a normalised dense adjacency."""

    def __init__(self, features: int = 32, width: int = 32, classes: int = 4) -> None:
        super().__init__()
        self.first, self.second = nn.Linear(features, width), nn.Linear(width, classes)

    def forward(self, nodes: Tensor, adjacency: Tensor) -> Tensor:
        return adjacency @ self.second(torch.relu(adjacency @ self.first(nodes)))


class Video(nn.Module):
    """3-D convolutions over clips, pooled to class logits."""

    def __init__(self, channels: int = 8, classes: int = 10) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv3d(3, channels, 3, padding=1),
            nn.ReLU(),
            nn.Conv3d(channels, channels, 3, stride=2, padding=1),
            nn.ReLU(),
        )
        self.head = nn.Linear(channels, classes)

    def forward(self, clip: Tensor) -> Tensor:
        return self.head(self.body(clip).mean(dim=(2, 3, 4)))


class DiffusionUNet(nn.Module):
    """A denoising U-Net step: timestep embedding, conv blocks and self-attention."""

    def __init__(self, channels: int = 16) -> None:
        super().__init__()
        self.time = nn.Sequential(nn.Linear(1, channels), nn.SiLU())
        self.down = nn.Conv2d(4, channels, 3, padding=1)
        self.attention = nn.MultiheadAttention(channels, 4, batch_first=True)
        self.up = nn.Conv2d(channels, 4, 3, padding=1)

    def forward(self, latents: Tensor, timestep: Tensor) -> Tensor:
        x = torch.nn.functional.silu(self.down(latents))
        x = x + self.time(timestep)[:, :, None, None]
        b, c, h, w = x.shape
        tokens = x.flatten(2).transpose(1, 2)
        tokens = tokens + self.attention(tokens, tokens, tokens, need_weights=False)[0]
        return self.up(tokens.transpose(1, 2).reshape(b, c, h, w))


class ViT(nn.Module):
    """Patch embedding, a transformer encoder and a class-token head."""

    def __init__(self, patch: int = 8, width: int = 64, classes: int = 10) -> None:
        super().__init__()
        self.patches = nn.Conv2d(3, width, patch, stride=patch)
        self.cls = nn.Parameter(torch.zeros(1, 1, width))
        layer = nn.TransformerEncoderLayer(width, 4, 2 * width, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = nn.Linear(width, classes)

    def forward(self, images: Tensor) -> Tensor:
        tokens = self.patches(images).flatten(2).transpose(1, 2)
        tokens = torch.cat([self.cls.expand(tokens.shape[0], -1, -1), tokens], dim=1)
        return self.head(self.encoder(tokens)[:, 0])


class Sequence(nn.Module):
    """A two-layer LSTM over a sequence, last state to logits."""

    def __init__(self, features: int = 16, width: int = 32) -> None:
        super().__init__()
        self.lstm = nn.LSTM(features, width, num_layers=2, batch_first=True)
        self.head = nn.Linear(width, 1)

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.lstm(x)[0][:, -1])


def _model(
    build: Callable[[], nn.Module],
    inputs: Callable[[torch.device, torch.dtype], tuple[Tensor, ...]],
) -> Callable[[torch.device, torch.dtype], Made]:
    def make(device: torch.device, dtype: torch.dtype) -> Made:
        return build().eval().to(device=device, dtype=dtype), inputs(device, dtype)

    return make


def _float(*shape: int) -> Callable[[torch.device, torch.dtype], tuple[Tensor, ...]]:
    return lambda device, dtype: (torch.randn(*shape, device=device).to(dtype),)


def _tokens(batch: int, length: int) -> Callable[[torch.device, torch.dtype], tuple[Tensor, ...]]:
    return lambda device, dtype: (torch.randint(0, 512, (batch, length), device=device),)


def _dlrm_inputs(device: torch.device, dtype: torch.dtype) -> tuple[Tensor, ...]:
    dense = torch.randn(32, 13, device=device).to(dtype)
    return (
        dense,
        torch.randint(0, 1000, (32 * 8,), device=device),
        torch.arange(0, 32 * 8, 8, device=device),
    )


def _graph_inputs(device: torch.device, dtype: torch.dtype) -> tuple[Tensor, ...]:
    adjacency = (torch.rand(128, 128, device=device) < 0.05).float() + torch.eye(128, device=device)
    adjacency = adjacency / adjacency.sum(dim=1, keepdim=True)
    return torch.randn(128, 32, device=device).to(dtype), adjacency.to(dtype)


def _diffusion_inputs(device: torch.device, dtype: torch.dtype) -> tuple[Tensor, ...]:
    return (
        torch.randn(2, 4, 16, 16, device=device).to(dtype),
        torch.rand(2, 1, device=device).to(dtype),
    )


def _case(
    model: str,
    category: str,
    batch_size: int,
    make: Callable[[torch.device, torch.dtype], Made],
    ao_int8_reason: str | None,
    **options: Any,
) -> Case:
    """A model case: it trains and quantizes, unless ``options`` says why not."""
    defaults = {"training_reason": None, "quantization_reason": None}
    return Case(
        SUITE,
        model,
        category,
        batch_size,
        make,
        ao_int8_reason=ao_int8_reason,
        **{**defaults, **options},
    )


TRANSFORMER_INT8 = (
    "nn.TransformerEncoderLayer's fast path cannot take dynamically quantized Linear layers"
)
MODELS = (
    _case("resnet", "image_classification", 8, _model(ResNet, _float(8, 3, 32, 32)), None),
    _case("detector", "object_detection", 4, _model(Detector, _float(4, 3, 64, 64)), None),
    _case("unet", "segmentation", 4, _model(UNet, _float(4, 3, 64, 64)), None),
    _case("bert", "text_encoder", 8, _model(Transformer, _tokens(8, 64)), TRANSFORMER_INT8),
    _case(
        "gpt",
        "language_model",
        8,
        _model(lambda: Transformer(causal=True), _tokens(8, 64)),
        TRANSFORMER_INT8,
    ),
    _case(
        "gpt_generate",
        "language_model",
        2,
        _model(Generate, _tokens(2, 16)),
        TRANSFORMER_INT8,
        training_reason="token generation is inference only (greedy decoding has no gradient)",
    ),
    _case("conformer", "speech", 4, _model(Conformer, _float(4, 100, 40)), None),
    _case("dlrm", "recommendation", 32, _model(DLRM, _dlrm_inputs), None, batch_args=()),
    _case("gcn", "graph", 128, _model(GCN, _graph_inputs), None, batch_args=()),
    _case("video3d", "video", 2, _model(Video, _float(2, 3, 8, 32, 32)), None),
    _case(
        "diffusion_unet",
        "diffusion",
        2,
        _model(DiffusionUNet, _diffusion_inputs),
        None,
        batch_args=(0, 1),
    ),
    _case("vit", "vision_transformer", 8, _model(ViT, _float(8, 3, 32, 32)), TRANSFORMER_INT8),
    _case("lstm", "sequence", 8, _model(Sequence, _float(8, 32, 16)), None),
)
