"""roll (a cyclic shift along axes, any 4-, 8- or 16-byte dtype, roll.wgsl: fftshift's kernel) and
fft_freq (the sample frequencies of a transform, fft_freq.wgsl)."""

from __future__ import annotations

import math

from ...dtypes import DTYPES
from ...errors import DtypeError, ShapeError
from ..core import shaders
from ..core.base import BuiltinKernel, Launch, Param, PipelineKey, fold_grid
from ..core.layout import contiguous_strides

WG = 256
_DIMS = 6
ROLL_DTYPES = ("f32", "f64", "s32", "s64", "u32", "u64", "c64", "c128")
_WORDS = {1: "u32", 2: "vec2<u32>", 4: "vec4<u32>"}  # an element's u32 words, moved whole


def _shifts(value) -> str | None:
    if not isinstance(value, tuple) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in value):
        return f"expected a tuple of ints (one shift per dimension), got {value!r}"
    return None


class Roll(BuiltinKernel):
    """out = x shifted cyclically by ``shifts[k]`` along each dimension k (numpy's roll)."""

    name = "roll"
    inputs = ("x",)
    dtypes = ROLL_DTYPES
    description = "cyclic shift along every dimension (numpy.roll with one shift per axis)"
    not_in_place = "roll writes each element to another place"
    params = (Param("shifts", "shifts", doc="the shift along each dimension of out",
                    check=_shifts),
              Param("strides", "shifts", None, "x's element stride along each dimension of "
                    "out (None: x is out's shape, contiguous)"),
              Param("offset", "offset", 0, "the element of x that out's first one reads"))

    def _strides(self, x, output, params) -> tuple[int, ...]:
        st = params["strides"]
        return contiguous_strides(output.shape) if st is None else tuple(st)

    def check(self, inputs, output, params) -> None:
        (x,) = inputs
        strides = self._strides(x, output, params)
        if x.dtype != output.dtype or (params["strides"] is None and x.shape != output.shape):
            raise ShapeError(f"roll: x is {x.shape} {x.dtype} and out {output.shape} "
                             f"{output.dtype}; they must match")
        for name in ("shifts", "strides"):
            v = params[name]
            if v is not None and (_shifts(v) or len(v) != output.ndim):
                raise ShapeError(f"roll: {name} {v!r}: expected {output.ndim} ints")
        if output.ndim > _DIMS or x.size >= 2**31:
            raise ShapeError(f"roll: out {output.shape} has more than {_DIMS} dimensions or x "
                             f"2^31 elements")
        off = params["offset"]
        lo = off + sum((n - 1) * st for n, st in zip(output.shape, strides) if st < 0)
        hi = off + sum((n - 1) * st for n, st in zip(output.shape, strides) if st > 0)
        if output.size and (lo < 0 or hi >= x.size):
            raise ShapeError(f"roll: out {output.shape} read with strides {strides} from "
                             f"{off} reaches elements {lo}..{hi}; x has {x.size}")

    def key(self, inputs, output, params) -> PipelineKey:
        # 8- and 16-byte elements move as vec2<u32> and vec4<u32>: no 64-bit arithmetic (nor
        # shader-int64 or shader-f64) needed
        return PipelineKey(self.name, ("u32",), (("words", DTYPES[output.dtype].itemsize // 4),))

    def render(self, key: PipelineKey):
        t = _WORDS[dict(key.constants)["words"]]
        src = shaders.render(shaders.load("fft/roll.wgsl"), {"T": t, "WG": WG, "DIMS": _DIMS},
                             name="fft/roll.wgsl")
        fields = [("total", "u32")]
        for k in range(_DIMS):
            fields += [(f"d{k}", "u32"), (f"s{k}", "u32"), (f"e{k}", "i32")]
        return src, (("total", "u32"), ("offset", "i32")) + tuple(fields[1:])

    def launches(self, inputs, output, params, device):
        if output.size == 0:
            return []
        pad = _DIMS - output.ndim
        dims = (1,) * pad + tuple(output.shape)
        shifts = (0,) * pad + tuple(params["shifts"])
        strides = (0,) * pad + self._strides(inputs[0], output, params)
        values = {"total": output.size, "offset": params["offset"]}
        for k, (d, s, e) in enumerate(zip(dims, shifts, strides)):
            values.update({f"d{k}": d, f"s{k}": s % d, f"e{k}": e})
        return [Launch(fold_grid(math.ceil(output.size / WG), device, self.name), values)]


class FftFreq(BuiltinKernel):
    """out[i] = the frequency of bin i of a length-n transform (numpy.fft.fftfreq, or
    rfftfreq with rfft=True)."""

    name = "fft_freq"
    inputs = ()
    dtypes = ("f32", "f64")
    description = "sample frequencies of a length-n FFT (fftfreq, rfftfreq)"
    params = (Param("n", "u32", doc="the transform's length"),
              Param("d", "f64", 1.0, "the sample spacing"),
              Param("rfft", "bool", False, "rfftfreq's n // 2 + 1 non-negative bins"))

    def check(self, inputs, output, params) -> None:
        want = params["n"] // 2 + 1 if params["rfft"] else params["n"]
        if output.shape != (want,):
            raise ShapeError(f"fft_freq: out is {output.shape}, expected ({want},)")

    def key(self, inputs, output, params) -> PipelineKey:
        return PipelineKey(self.name, (output.dtype,), (("rfft", params["rfft"]),))

    def render(self, key: PipelineKey):
        t = DTYPES[key.dtypes[0]].wgsl
        src = shaders.render(shaders.load("fft/fft_freq.wgsl"), {
            "T": t, "WG": WG, "RFFT": dict(key.constants)["rfft"],
            "ENABLE": shaders.enable_directives([t])}, name="fft/fft_freq.wgsl")
        return src, (("total", "u32"), ("n", "u32"), ("inv", t))

    def launches(self, inputs, output, params, device):
        if output.size == 0:
            return []
        return [Launch(fold_grid(math.ceil(output.size / WG), device, self.name), {
            "total": output.size, "n": params["n"],
            "inv": 1.0 / (params["d"] * params["n"])})]


ROLL = Roll()
FFT_FREQ = FftFreq()


def check_roll_dtype(dt, where: str) -> None:
    if dt.name not in ROLL_DTYPES:
        raise DtypeError(f"{where}: {dt.name} arrays are not shifted (1- and 2-byte elements "
                         f"share words); expected one of {', '.join(ROLL_DTYPES)}")
