"""A kernel's identity across builds: its kind and what it computes, not its number or spelling.

Inductor names a generated kernel by its kind, the ops it fuses and a counter:
``triton_poi_fused_add_mul_3`` on a GPU is ``cpp_fused_add_mul_7`` on the CPU, and the counter
moves whenever another kernel of the graph is added or removed. Two builds of the same model
are matched kernel by kernel only once the counter and the backend's prefix are gone:

- Inductor's pointwise, reduction, persistent-reduction and C++ kernels: kind ``fused``, ops
  ``add_mul`` (the name between ``fused_`` and the counter, shown as ``fused_add_mul``);
- Inductor's templates (``triton_tem_fused_mm_0``, a GEMM with its epilogue): kind
  ``template``;
- aten ops on the CPU (``aten::mm``): kind ``aten``, the op's name;
- every other kernel (aten's CUDA kernels, cuBLAS, cuDNN, CUTLASS): kind ``kernel``, its
  name without ``void`` and its parameter list; the template arguments stay (they name the
  functor: aten's add and mul are one kernel template with two functors).

On the CPU, Inductor's C++ kernels are profiled by name only when compiled with
``cpp.enable_kernel_profile``, as ``graph_0_cpp_fused_add_mul_7``: the graph's id goes too.

Kernels with one identity in one profile (``triton_poi_fused_add_0`` and ``_1`` in two
graphs) are merged, their instances counted.
"""

import re
from dataclasses import dataclass

IDENTITY_LIMIT = 200
# triton_{poi,red,per,tem,sca,mix}_fused_<ops>_<n>, cpp_fused_<ops>_<n>; ops may be absent.
_INDUCTOR = re.compile(
    r"^(?:triton_(?P<triton>poi|red|per|tem|sca|mix)|cpp)_(?:fused_?)?(?P<ops>\w*?)_?(?P<n>\d+)$"
)
# Inductor's C++ kernels, profiled by name (cpp.enable_kernel_profile), carry their graph's id.
_GRAPH_PREFIX = re.compile(r"^graph_\d+_(?=cpp_)")
_TEMPLATE = "tem"
UNNAMED = "(unnamed)"  # a generated kernel whose name lists no ops


@dataclass(frozen=True, order=True)
class Identity:
    """What a kernel is, the same under any build's numbering."""

    kind: str  # fused, template, aten or kernel
    name: str  # the fused ops, the op, or the kernel's bare name

    def __str__(self) -> str:
        return self.name if self.kind in ("aten", "kernel") else f"{self.kind}_{self.name}"

    @property
    def op_tokens(self) -> frozenset[str]:
        """The ops a generated kernel fuses, word by word (``native_layer_norm`` is 3 words).

        Op names hold underscores, so a fused name cannot be split back into ops; its words
        can, and a fusion that splits keeps every word in one of its parts.
        """
        if self.kind not in ("fused", "template") or self.name == UNNAMED:
            return frozenset()
        return frozenset(word for word in self.name.split("_") if word)


def identity_of(raw: str) -> Identity:
    """The identity of the kernel a profiler named ``raw``."""
    name = _GRAPH_PREFIX.sub("", raw.strip(), count=1)
    if (match := _INDUCTOR.match(name)) is not None:
        kind = "template" if match["triton"] == _TEMPLATE else "fused"
        return Identity(kind, match["ops"].strip("_")[:IDENTITY_LIMIT] or UNNAMED)
    if name.startswith("aten::"):
        return Identity("aten", name[:IDENTITY_LIMIT])
    return Identity("kernel", _signature_name(name)[:IDENTITY_LIMIT] or UNNAMED)


def _signature_name(name: str) -> str:
    """A C++ signature's name: no ``void``, no parameter list, whitespace collapsed.

    The parameter list is the first ``(`` outside template arguments (those hold
    parentheses of their own: ``{lambda(int)#1}``). One pass, so a crafted name costs its
    length.
    """
    if name.startswith("void "):
        name = name[len("void ") :]
    depth = 0
    end = len(name)
    for at, char in enumerate(name):
        if char == "<":
            depth += 1
        elif char == ">" and depth:
            depth -= 1
        elif char == "(" and depth == 0 and at > 0:
            end = at
            break
    return " ".join(name[:end].split())
