"""The operators: small, self-contained kernels every stack runs, and the all-reduce collective."""

from typing import Any

import torch
import torch.nn.functional as F

from workers.collective import measure_allreduce
from workers.harness import Case, Fn, Plan

SUITE = "benchwatch-operators"
Made = tuple[Fn, tuple[torch.Tensor, ...]]


def _matmul(device: torch.device, dtype: torch.dtype) -> Made:
    a, b = torch.randn(256, 256, device=device), torch.randn(256, 256, device=device)
    return torch.matmul, (a.to(dtype), b.to(dtype))


def _conv(device: torch.device, dtype: torch.dtype) -> Made:
    weight = torch.randn(32, 16, 3, 3, device=device).to(dtype)
    x = torch.randn(8, 16, 32, 32, device=device).to(dtype)
    return lambda inp: F.conv2d(inp, weight, padding=1), (x,)


def _attention(device: torch.device, dtype: torch.dtype) -> Made:
    q, k, v = (torch.randn(4, 8, 64, 32, device=device).to(dtype) for _ in range(3))
    return lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), (q, k, v)


def _layer_norm(device: torch.device, dtype: torch.dtype) -> Made:
    x = torch.randn(64, 512, device=device).to(dtype)
    return lambda inp: F.layer_norm(inp, (512,)), (x,)


def _softmax(device: torch.device, dtype: torch.dtype) -> Made:
    x = torch.randn(64, 1024, device=device).to(dtype)
    return lambda inp: torch.softmax(inp, dim=-1), (x,)


def _embedding_bag(device: torch.device, dtype: torch.dtype) -> Made:
    weight = torch.randn(10_000, 64, device=device).to(dtype)
    indices = torch.randint(0, 10_000, (2048,), device=device)
    offsets = torch.arange(0, 2048, 32, device=device)
    return lambda idx, off: F.embedding_bag(idx, weight, off, mode="sum"), (indices, offsets)


def _all_reduce(device: torch.device, plan: Plan) -> list[dict[str, Any]]:
    """All-reduce across 2 processes (gloo on CPU, NCCL/RCCL on GPUs), per message size."""
    return measure_allreduce(device, repeats=plan.repeats, warmup=plan.warmup)


OPERATORS = (
    Case(SUITE, "matmul", "operator", 256, _matmul),
    Case(SUITE, "conv2d", "operator", 8, _conv),
    Case(SUITE, "attention", "operator", 4, _attention, batch_args=(0, 1, 2)),
    Case(SUITE, "layer_norm", "operator", 64, _layer_norm),
    Case(SUITE, "softmax", "operator", 64, _softmax),
    Case(SUITE, "embedding_bag", "operator", 64, _embedding_bag, batch_args=()),
)
# Measured across processes, in eager fp32 only.
COLLECTIVES = (
    Case(SUITE, "all_reduce", "operator", 0, None, batch_args=(), measured_by=_all_reduce),
)
