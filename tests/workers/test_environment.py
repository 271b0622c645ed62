"""The host and software stack, as a run describes them."""

import platform

import torch

from workers.environment import cpu_governor, describe_environment, describe_machine, device_kind


def test_machine_on_this_host() -> None:
    machine = describe_machine()
    assert machine.device == device_kind()
    if machine.device == "cpu":
        assert machine.name.startswith("cpu-")
        assert machine.name.endswith("c")
    assert (machine.cpu_count or 0) >= 1
    assert (machine.host_memory_gb or 0) > 0
    assert machine.cpu
    assert describe_machine("lab-7").name == "lab-7"


def test_environment_snapshot() -> None:
    env = describe_environment("stable")
    assert env.channel == "stable"
    assert env.torch == torch.__version__
    assert len(env.torch_git_sha) == 40
    assert env.python == platform.python_version()
    assert env.packages["torch"] == torch.__version__.split("+")[0] or env.packages["torch"]
    assert "fastapi" in env.packages
    assert env.extra["cpu_governor"] == cpu_governor()  # "unavailable" in most VMs
