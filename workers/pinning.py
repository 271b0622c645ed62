"""Pin a shard's process to CPU cores, and its torch threads to match (Linux).

A timed call that the scheduler moves between cores, or that shares its core with the OS and
the worker, is slower some of the time: pinning takes that out of the samples.
``BENCHWATCH_PIN_CORES`` says how (``app.core.cpu_cores.parse_pin_cores``):

- ``auto``: every physical core the process may use (``os.sched_getaffinity``) but the one
  holding the lowest CPU, left to the OS and the worker; one logical CPU per physical core
  (an SMT sibling shares the core's units, so two threads there time each other), on the NUMA
  node that has most of them (a thread pool across sockets adds remote memory to the
  samples). On a 2-core box that is core 1 and one thread; on a 16-core box without SMT,
  cores 1-15 and 15 threads. A process that may use one core keeps it, with one thread.
- a core list: those cores, every one of which the process must be allowed to use.
- ``off``: nothing changes.

Elsewhere than Linux nothing changes either, and the record says why.
"""

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.core.cpu_cores import SETTING, format_cores, parse_cores, parse_pin_cores

SYSFS = Path("/sys/devices/system")


@dataclass(frozen=True)
class Pinning:
    """The cores to pin to (empty: none) and the torch threads to use, or why not."""

    cores: tuple[int, ...] = ()
    threads: int | None = None
    how: str = ""  # how the cores were chosen, or why nothing was pinned

    def record(self) -> dict[str, Any]:
        """What a result's ``extra["cpu_pinning"]`` says: the cores and threads, or why none."""
        if not self.cores:
            return {"cores": "", "why": self.how}
        return {"cores": format_cores(self.cores), "threads": self.threads, "how": self.how}


def plan_pinning(
    setting: str,
    available: frozenset[int] | None = None,
    sysfs: Path = SYSFS,
    source: str = SETTING,
) -> Pinning:
    """The pinning ``setting`` asks for, on the cores this process may use.

    Args:
        setting: ``BENCHWATCH_PIN_CORES``.
        available: the CPUs the process may use (default: ``os.sched_getaffinity(0)``).
        sysfs: where the CPU topology is read (a fake directory in tests).
        source: what gave ``setting``, as its errors name it.

    Raises:
        ValueError: the setting does not parse, or names a core the process may not use.
    """
    wanted = parse_pin_cores(setting, source)
    if wanted == "off":
        return Pinning(how=f"{source} is off")
    if not hasattr(os, "sched_setaffinity"):
        return Pinning(how="not pinned: os.sched_setaffinity is Linux only")
    allowed = available if available is not None else frozenset(os.sched_getaffinity(0))
    if wanted == "auto":
        cores = auto_cores(allowed, sysfs)
        return Pinning(cores, len(cores), "auto")
    missing = wanted - allowed
    if missing:
        raise ValueError(
            f"{source}={setting.strip()}: cores {format_cores(missing)} are not available to "
            f"this process (it may use {format_cores(allowed)})"
        )
    return Pinning(tuple(sorted(wanted)), len(wanted), "listed")


def auto_cores(allowed: frozenset[int], sysfs: Path = SYSFS) -> tuple[int, ...]:
    """One CPU per physical core, but the first core's, on the node with most of them."""
    if len(allowed) < 2:
        return tuple(sorted(allowed))
    physical = _physical_cores(allowed, sysfs)
    first = min(allowed)
    rest = [core for core in physical if first not in core]
    if not rest:  # every allowed CPU is a sibling of the first: leave the first one alone
        return tuple(sorted(allowed - {first}))
    nodes = _numa_nodes(sysfs)
    if len(nodes) > 1:
        # The node holding most of the remaining cores; the lowest such node on a tie.
        best = max(nodes, key=lambda cpus: (sum(min(core) in cpus for core in rest), -min(cpus)))
        rest = [core for core in rest if min(core) in best] or rest
    return tuple(sorted(min(core) for core in rest))


def _physical_cores(allowed: frozenset[int], sysfs: Path) -> list[frozenset[int]]:
    """The allowed CPUs grouped by physical core (each CPU its own without topology)."""
    groups: dict[frozenset[int], set[int]] = {}
    for cpu in sorted(allowed):
        siblings = _read_cores(sysfs / "cpu" / f"cpu{cpu}" / "topology" / "thread_siblings_list")
        key = siblings if siblings and cpu in siblings else frozenset({cpu})
        groups.setdefault(key, set()).add(cpu)
    return [frozenset(cpus) for cpus in groups.values()]


def _numa_nodes(sysfs: Path) -> list[frozenset[int]]:
    """The CPUs of each NUMA node (empty without the node directory)."""
    found = []
    for path in sorted((sysfs / "node").glob("node[0-9]*/cpulist")):
        cpus = _read_cores(path)
        if cpus:
            found.append(cpus)
    return found


def _read_cores(path: Path) -> frozenset[int]:
    try:
        text = path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return frozenset()
    try:
        return parse_cores(text) if text else frozenset()
    except ValueError:
        return frozenset()


def apply_pinning(pinning: Pinning) -> Pinning:
    """Pin this process and set torch's threads; the record says what the kernel then reports.

    Call it first thing in the process, before threads start: a thread started earlier keeps
    the affinity it had.
    """
    if not pinning.cores:
        return pinning
    os.sched_setaffinity(0, pinning.cores)
    if pinning.threads:
        import torch  # here, not on top: the pinning comes before torch starts its threads

        torch.set_num_threads(pinning.threads)
    return Pinning(tuple(sorted(os.sched_getaffinity(0))), pinning.threads, pinning.how)
