"""What the linalg programs share: one workgroup per matrix of a batch (the grid folded over x
and y), f32 or f64, their templates rendered with common.wgsl's helpers."""

from __future__ import annotations

from ...dtypes import DTYPES
from ...errors import DtypeError, ShapeError
from ..core import shaders
from ..core.base import BuiltinKernel, Launch, PipelineKey, fold_grid, wgsl_is_nan

WG = 64  # invocations per matrix: enough for the 64 × 64 matrices of a batch
# Element updates one dispatch may do per matrix. Programs that would do more are launched
# several times in one compute pass, each launch a slice of the work: a dispatch that runs
# long is cut short by some drivers (lavapipe returned partial results), or reset (TDR).
WORK = 1 << 20


def chunks(costs: list[int], budget: int = WORK) -> list[tuple[int, int]]:
    """Consecutive ranges [i, j) of ``costs`` each summing to at most ``budget`` (or one
    item), in order."""
    out, start, acc = [], 0, 0
    for i, c in enumerate(costs):
        if i > start and acc + c > budget:
            out.append((start, i))
            start, acc = i, 0
        acc += c
    if start < len(costs):
        out.append((start, len(costs)))
    return out


def batch_of(shape: tuple[int, ...], core: int) -> int:
    """The number of matrices in an array whose last ``core`` dimensions are one matrix."""
    out = 1
    for d in shape[:len(shape) - core]:
        out *= d
    return out


class LinalgKernel(BuiltinKernel):
    """A program run by one workgroup per matrix. Subclasses set ``template``, ``fields``
    (the uniform's fields), and define ``constants`` (what the shader depends on beyond the
    dtype), ``uniform`` and ``batch``."""

    dtypes = ("f32", "f64")
    workgroup_size = WG
    template = ""
    fields: tuple[tuple[str, str], ...] = ()
    not_in_place = "it reads the whole matrix while it writes"

    def constants(self, inputs, output, params) -> tuple:
        return ()

    def uniform(self, inputs, output, params) -> dict:
        raise NotImplementedError

    def batch(self, inputs, output, params) -> int:
        raise NotImplementedError

    def check_float(self, named) -> None:
        for name, b in named:
            if b.dtype not in self.dtypes:
                raise DtypeError(f"{self.name}: {name} is {b.dtype}; expected one of "
                                 f"{', '.join(self.dtypes)}")

    def check_shape(self, name: str, got, want) -> None:
        if tuple(got) != tuple(want):
            raise ShapeError(f"{self.name}: {name} is {tuple(got)}, expected {tuple(want)}")

    def key(self, inputs, output, params) -> PipelineKey:
        return PipelineKey(self.name, (output.dtype,),
                           self.constants(inputs, output, params))

    def render(self, key):
        return self._render(self.template, key)

    def _render(self, template: str, key):
        t = DTYPES[key.dtypes[0]].wgsl
        dt = DTYPES[key.dtypes[0]]
        r = dt.part.wgsl if dt.kind == "c" else t
        subs = {"T": t, "R": r, "WG": self.workgroup_size,
                "LOG2WG": self.workgroup_size.bit_length() - 1,
                "IS_NAN": wgsl_is_nan("v", r), **dict(key.constants)}
        return shaders.render(shaders.load(template), subs, name=template), self.fields

    def launches(self, inputs, output, params, device):
        n = self.batch(inputs, output, params)
        if n == 0:
            return []
        return [Launch(fold_grid(n, device, self.name), self.uniform(inputs, output, params))]


def phased(first: list[Launch], phases: list) -> list[Launch]:
    """The launch ``first`` (phase 0), then one more for each of ``phases`` (a phase, or a
    dict of uniform values)."""
    if not first:
        return []
    (la,) = first
    return [la] + [Launch(la.workgroups, dict(la.uniform, **(
        ph if isinstance(ph, dict) else {"phase": ph}))) for ph in phases]
