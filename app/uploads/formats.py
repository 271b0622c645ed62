"""The upload formats: each one module's ``FORMAT`` declaration, listed once here.

The parser, the sniffer, the upload API and its description, ``benchwatch upload --format``
and the command suites' ``format`` all read this registry: adding a format is writing its
module (a parser and its ``FORMAT``) and adding it to ``REGISTERED``.
"""

from app.uploads import (
    github_action_benchmark,
    google_benchmark,
    pytest_benchmark,
    pytorch_v3,
    torch_utils_benchmark,
    torchbench,
    tritonbench,
    vllm,
)
from app.uploads.base import UploadFormat

# In the order a file is recognised by content: the first whose test takes it names its format
# (pytest-benchmark's files hold "benchmarks" as Google Benchmark's do, but more besides;
# tritonbench's ";" CSVs come before torchbench-csv, which takes any other .csv; a custom
# github-action-benchmark list whose name does not say the direction is the last resort, and
# is refused saying which format to give).
REGISTERED: tuple[UploadFormat, ...] = (
    torch_utils_benchmark.FORMAT,
    tritonbench.FORMAT,
    torchbench.FORMAT,
    pytest_benchmark.FORMAT,
    google_benchmark.FORMAT,
    vllm.FORMAT,
    pytorch_v3.FORMAT,
    github_action_benchmark.SMALLER_IS_BETTER,
    github_action_benchmark.BIGGER_IS_BETTER,
    github_action_benchmark.FORMAT,
)
BY_NAME = {known.name: known for known in REGISTERED}
NATIVE = "native"  # a whole native run (``POST /runs``'s body), uploaded as a file
AUTO = "auto"  # each file's format told by its name and content
