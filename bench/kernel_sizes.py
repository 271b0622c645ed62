"""What a case's kernel profile and generated code weigh, on the built-in models (docs/kernels.md).

Each model is measured by the worker's harness under ``default`` on this machine's device,
and the case's profile and code are printed as the payload carries them: the profile's JSON,
the code's JSON and its zlib compression (what ``kernel_code`` stores).

    .venv/bin/python -m bench.kernel_sizes [--models resnet,unet,gpt,conformer]
"""

import argparse
import json
import zlib

import torch

from app.suite_runs.rows import payload_rows
from workers.harness import Plan, measure
from workers.tiers import MODELS


def main() -> None:
    """Print one line a model: kernels profiled, profile size, code raw and compressed."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="resnet,unet,gpt,conformer")
    args = parser.parse_args()
    wanted = args.models.split(",")
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    print(f"{'model':12s} {'kernels':>7s} {'profile KiB':>11s} {'code KiB':>9s} {'zlib KiB':>9s}")
    for case in (c for c in MODELS if c.model in wanted):
        torch._dynamo.reset()
        rows = measure(case, "default", "fp32", device, Plan(repeats=2, warmup=1))
        for profile in payload_rows(rows)["kernel_profiles"]:
            code = json.dumps(profile.pop("code", None) or {}).encode()
            print(
                f"{case.model:12s} {len(profile['kernels']):7d} "
                f"{len(json.dumps(profile)) / 1024:11.1f} {len(code) / 1024:9.1f} "
                f"{len(zlib.compress(code, 6)) / 1024:9.1f}"
            )


if __name__ == "__main__":
    main()
