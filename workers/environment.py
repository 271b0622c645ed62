"""The machine and software stack a suite runs on, as the native payload describes them."""

import os
import platform
import re
import socket
import sys
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path

import psutil
import torch

from app.benchmarks.vocabulary import Device, short_arch
from app.core.cpu_cores import format_cores
from app.runs.schemas import EnvironmentIn, MachineIn
from workers.compiler_settings import recorded_settings

CPU_SYSFS = Path("/sys/devices/system/cpu")
CPU_DIR = re.compile(r"cpu(\d+)")


def device_kind() -> Device:
    """``rocm`` for HIP builds with a GPU, ``cuda`` for CUDA, else ``cpu``."""
    if torch.cuda.is_available():
        return "rocm" if torch.version.hip else "cuda"
    return "cpu"


def cpu_name() -> str:
    """The processor's model name (Linux), or what the platform says."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cpu_governor(root: Path = CPU_SYSFS) -> str:
    """The CPUs' frequency governor, summarised over every CPU.

    ``performance``, ``powersave``..., ``mixed: ...`` or ``unavailable`` (no cpufreq, as in
    most VMs, where the host sets the clock). A governor other than ``performance`` lets the
    clock follow the load, so the first calls of a case run slower than the rest and a busy
    neighbour changes the figures.
    ``mixed`` names each governor with its CPUs (``mixed: performance 0-3, powersave 4-7``).
    """
    found: dict[str, list[int]] = {}
    cpus = root.iterdir() if root.is_dir() else iter(())
    for path in cpus:
        if (match := CPU_DIR.fullmatch(path.name)) is None:
            continue
        try:
            governor = (path / "cpufreq" / "scaling_governor").read_text(encoding="ascii")
        except (OSError, UnicodeDecodeError):
            continue
        name = governor.strip()[:32] or "unknown"
        found.setdefault(name, []).append(int(match.group(1)))
    if not found:
        return "unavailable"
    if len(found) == 1:
        return next(iter(found))
    parts = sorted(found.items(), key=lambda item: min(item[1]))
    return "mixed: " + ", ".join(f"{name} {format_cores(cpus)}" for name, cpus in parts)


def describe_machine(name: str | None = None) -> MachineIn:
    """This host: device kind, accelerator name and count, CPU, memory."""
    device = device_kind()
    cpu_count = os.cpu_count() or 0
    host_gb = round(psutil.virtual_memory().total / 1e9, 1)
    if device == "cpu":
        return MachineIn(
            name=name or f"cpu-{cpu_count}c",
            device="cpu",
            arch=cpu_name(),
            cpu=cpu_name(),
            cpu_count=cpu_count,
            host_memory_gb=host_gb,
            hostname=socket.gethostname(),
        )
    arch = torch.cuda.get_device_name(0)
    gpus = torch.cuda.device_count()
    memory = torch.cuda.get_device_properties(0).total_memory / 1e9
    return MachineIn(
        name=name or f"{short_arch(arch)}-{gpus}",
        device=device,
        arch=arch,
        gpu_count=gpus,
        gpu_memory_gb=round(memory, 1),
        cpu=cpu_name(),
        cpu_count=cpu_count,
        host_memory_gb=host_gb,
        hostname=socket.gethostname(),
    )


def _version(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return ""


def describe_environment(channel: str, env: Mapping[str, str] | None = None) -> EnvironmentIn:
    """Torch (version and git sha), triton, CUDA/HIP, Python, every installed package.

    And in ``compiler_options`` the compiler settings a compiled run here has that are not
    torch's defaults (``workers.compiler_settings``): the variables of ``env`` (the run's
    environment; this process's by default) and the config values this process changed.
    """
    packages = {
        dist.metadata["Name"].lower(): dist.version
        for dist in metadata.distributions()
        if dist.metadata["Name"]
    }
    triton = _version("triton") or _version("pytorch-triton") or _version("pytorch-triton-rocm")
    return EnvironmentIn(
        channel=channel,
        torch=torch.__version__,
        torch_git_sha=torch.version.git_version,
        triton=triton,
        python=platform.python_version(),
        cuda=torch.version.cuda or "",
        hip=torch.version.hip or "",
        packages=dict(sorted(packages.items())),
        compiler_options=recorded_settings(env),
        extra={
            "python_implementation": platform.python_implementation(),
            "platform": sys.platform,
            "cpu_governor": cpu_governor(),
        },
    )
