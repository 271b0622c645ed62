"""Weight quantization for the int8 and int4 precisions.

With torchao installed: int8 is ``Int8DynamicActivationInt8WeightConfig`` (int8 weights,
activations quantized at run time); int4 is ``Int4WeightOnlyConfig`` on a GPU and int4
weights (a scale per output channel) with int8 dynamic activations on a CPU.
Without it, int8 falls back to torch's own dynamic quantization of the Linear layers (CPU
only) and int4 cannot run.
"""

import importlib.util
import warnings
from typing import Any

import torch

QUANTIZED = ("int8", "int4")


def has_torchao() -> bool:
    """Whether torchao is installed."""
    return importlib.util.find_spec("torchao") is not None


def unsupported(precision: str, device: torch.device) -> str | None:
    """Why this precision cannot run here (None: it can)."""
    if has_torchao():
        return None
    if precision == "int4":
        return "int4 needs torchao (pip install torchao)"
    if device.type != "cpu":
        return "int8 without torchao is torch's dynamic quantization: CPU backends only"
    return None


def method(precision: str, device: torch.device) -> str:
    """How the weights are quantized, as stored beside the results."""
    if not has_torchao():
        return "torch.ao.quantization.quantize_dynamic"
    return f"torchao {type(_torchao_config(precision, device)).__name__}"


def quantized(model: torch.nn.Module, precision: str, device: torch.device) -> torch.nn.Module:
    """The model with its weights quantized for ``precision`` (in place where torchao is)."""
    with warnings.catch_warnings():  # both libraries warn about their own deprecations
        warnings.simplefilter("ignore")
        if not has_torchao():
            ao: torch.nn.Module = torch.ao.quantization.quantize_dynamic(  # type: ignore[no-untyped-call]
                model, {torch.nn.Linear}, dtype=torch.qint8
            )
            return ao
        from torchao.quantization import quantize_

        quantize_(model, _torchao_config(precision, device), filter_fn=_quantizable)
    return model


def _quantizable(module: torch.nn.Module, _name: str) -> bool:
    """Whether torchao quantizes ``module``: the linear layers its own filter takes.

    Not attention's output projection (``NonDynamicallyQuantizableLinear``, as torchao's
    default filter), nor a layer of one input feature, whose scales torchao fails to reshape
    (a diffusion model's timestep projection) and which has nothing to gain anyway.
    """
    return (
        isinstance(module, torch.nn.Linear)
        and not isinstance(module, torch.nn.modules.linear.NonDynamicallyQuantizableLinear)
        and module.in_features > 1
    )


def _torchao_config(precision: str, device: torch.device) -> Any:
    from torchao import quantization

    if precision == "int8":
        return quantization.Int8DynamicActivationInt8WeightConfig()
    if device.type == "cuda":
        return quantization.Int4WeightOnlyConfig()
    from torchao.quantization.granularity import PerAxis

    int4 = getattr(torch, "int4")  # noqa: B009 (torch >= 2.6; its stubs lack the name)
    # One scale per output channel: any layer width works (groups need multiples of 32).
    return quantization.Int8DynamicActivationIntxWeightConfig(
        weight_dtype=int4, weight_granularity=PerAxis(0)
    )
