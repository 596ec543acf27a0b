"""The complex kernels (complex64, and complex128 where the adapter has f64): complex_axis
(conversions, parts, padding, hermitian extension and Bluestein's chirps along one axis,
complex_axis.wgsl; complex_axis_c128 the real transforms' steps of complex128, its twiddles
from a table) and complex_binary (+ - * / with numpy's broadcasting, complex_binary.wgsl)."""

from __future__ import annotations

import math

import numpy as np

from ...dtypes import DTYPES
from ...errors import ArgumentError, DtypeError, ShapeError
from ..core import shaders
from ..core.base import BuiltinKernel, Launch, Param, PipelineKey, fold_grid
from ..core.layout import broadcast_strides
from .fft import _nonneg, table_bits, table_length

# mode -> what it writes: "c" the complex dtype, "r" its parts' real dtype
AXIS_MODES = {"pad": "c", "pad_conj": "c", "hermitian": "c", "hermitian_conj": "c",
              "chirp_in": "c", "chirp_out": "c", "chirp_b": "c", "conj": "c",
              "real": "r", "imag": "r", "abs": "r", "pack": "c", "r2c_post": "c",
              "r2c_post_conj": "c", "c2r_pre": "c", "c2r_pre_conj": "c", "unpack": "r"}
# the modes that turn by angles (cos and sin): complex64 only (WGSL's are f32 only on Vulkan)
TURNING = ("chirp_in", "chirp_out", "chirp_b", "r2c_post", "r2c_post_conj", "c2r_pre",
           "c2r_pre_conj")
REAL_INPUTS = ("f32", "f64", "s32", "u32")  # what "pad" converts to complex (and complex of
# the other width)
COMPLEX = ("c64", "c128")
_SAME_LENGTH = ("real", "imag", "abs", "conj")
WG = 256


def _mode(value) -> str | None:
    return None if value in AXIS_MODES else \
        f"expected one of {', '.join(AXIS_MODES)}, got {value!r}"


class ComplexAxis(BuiltinKernel):
    """out (outer × n_out × inner) from x (outer × n_in × inner) by ``mode``: see
    complex_axis.wgsl."""

    name = "complex_axis"
    inputs = ("x",)
    dtypes = ("c64", "c128", "f32", "f64")
    description = ("complex64 and complex128 along an axis: convert, pad or crop, parts, "
                   "abs, conj, hermitian extension, Bluestein chirps")
    not_in_place = "complex_axis may read other elements than the one it writes"
    table = False  # angles turned in the shader (float32)
    params = (Param("mode", "mode", doc="what to compute", check=_mode),
              Param("outer", "layout", 1, "elements before the axis", check=_nonneg),
              Param("inner", "layout", 1, "elements after the axis", check=_nonneg),
              Param("chirp", "layout", 1, "the length of the chirp (Bluestein)",
                    check=_nonneg),
              Param("sign", "layout", -1, "the chirp's sign"),
              Param("scale", "f32", 1.0, "factor of the results"))

    def _lengths(self, x, output, params):
        o, q = params["outer"], params["inner"]
        if o * q == 0:
            return 0, 0
        return x.size // (o * q), output.size // (o * q)

    def check(self, inputs, output, params) -> None:
        x = inputs[0]
        mode = params["mode"]
        cdt = DTYPES[output.dtype if output.dtype in COMPLEX else x.dtype]
        if cdt.name not in COMPLEX:
            raise DtypeError(f"complex_axis: x is {x.dtype} and out {output.dtype}; one of "
                             f"them must be complex (c64 or c128)")
        want = cdt.name if AXIS_MODES[mode] == "c" else cdt.part.name
        if output.dtype != want:
            raise DtypeError(f"complex_axis: mode {mode!r} writes {want}, out is "
                             f"{output.dtype}")
        ok = (cdt.part.name,) if mode == "pack" else (cdt.name,) + (
            REAL_INPUTS + COMPLEX if mode in ("pad", "chirp_b") else ())
        if x.dtype not in ok:
            raise DtypeError(f"complex_axis: mode {mode!r} takes x of {', '.join(ok)}, got "
                             f"{x.dtype}")
        if mode in TURNING and cdt.name != "c64" and not self.table:
            raise DtypeError(f"complex_axis: mode {mode!r} takes complex64 only (its cos and "
                             f"sin are float32), got {cdt.name}")
        o, q = params["outer"], params["inner"]
        n_in, n_out = self._lengths(x, output, params)
        if o * n_in * q != x.size or o * n_out * q != output.size or (
                mode in _SAME_LENGTH and n_in != n_out) or (
                mode == "unpack" and n_out != 2 * n_in) or (
                mode.startswith("r2c_post") and n_out != n_in + 1):
            raise ShapeError(f"complex_axis: x {x.shape} and out {output.shape} are not "
                             f"outer {o} × n × inner {q}")
        if mode.startswith("chirp") and not 0 < params["chirp"] < 2**30:
            raise ArgumentError(f"complex_axis: chirp length {params['chirp']} is not in "
                                f"1..2^30")

    def output_spec(self, inputs, params):
        x = DTYPES[inputs[0].dtype]
        cdt = x if x.kind == "c" else DTYPES["c64"]  # (a real x is made complex64)
        return inputs[0].shape, cdt.name if AXIS_MODES[params["mode"]] == "c" else \
            cdt.part.name

    def key(self, inputs, output, params) -> PipelineKey:
        return PipelineKey(self.name, (inputs[0].dtype, output.dtype),
                           (("mode", params["mode"]), ("sign", params["sign"])))

    def render(self, key: PipelineKey):
        c = dict(key.constants)
        tin, tout = (DTYPES[d].wgsl for d in key.dtypes)
        part = next(DTYPES[d] for d in key.dtypes[::-1] if d in COMPLEX).part
        src = shaders.render(shaders.load("fft/complex_axis.wgsl"), {
            "MODE": c["mode"], "SIGN": c["sign"], "TIN": tin, "TOUT": tout, "WG": WG,
            "R": part.wgsl, "RMAX": repr(float(np.finfo(part.numpy).max)),
            "ENABLE": "", "TABLE": self.table}, name="fft/complex_axis.wgsl")
        last = (("scale", "f64"), ("tw_bits", "u32")) if self.table else (("scale", "f32"),)
        return src, (("total", "u32"), ("n_out", "u32"), ("n_in", "u32"), ("Q", "u32"),
                     ("chirp", "u32")) + last

    def launches(self, inputs, output, params, device):
        n_in, n_out = self._lengths(inputs[0], output, params)
        if output.size == 0:
            return []
        values = {"total": output.size, "n_out": n_out, "n_in": max(n_in, 1),
                  "Q": params["inner"], "chirp": params["chirp"], "scale": params["scale"]}
        if self.table:
            values["tw_bits"] = table_bits(2 * _half(params["mode"], n_in, n_out))
        return [Launch(fold_grid(-(-output.size // WG), device, self.name), values)]


def _half(mode: str, n_in: int, n_out: int) -> int:
    """M of a real transform of length 2M's step (r2c_post reads M bins, c2r_pre writes M)."""
    return n_in if mode.startswith("r2c") else n_out


class ComplexAxisTable(ComplexAxis):
    """complex_axis's real-transform steps (r2c_post, c2r_pre and their conjugates) over
    complex128: exp(-2πi·t/2M) read from w, the twiddle table of 2M (tables.twiddles)."""

    name = "complex_axis_c128"
    inputs = ("x", "w")
    dtypes = ("c128",)
    table = True
    description = "complex128's real-transform steps along an axis (twiddles from a table)"
    params = ComplexAxis.params[:-1] + (Param("scale", "f64", 1.0, "factor of the results"),)

    def check(self, inputs, output, params) -> None:
        mode = params["mode"]
        if not mode.startswith(("r2c_post", "c2r_pre")):
            raise ArgumentError(f"{self.name}: mode {mode!r}; expected r2c_post, "
                                f"r2c_post_conj, c2r_pre or c2r_pre_conj")
        super().check(inputs, output, params)
        if inputs[0].dtype != "c128":
            raise DtypeError(f"{self.name}: x is {inputs[0].dtype}; expected c128")
        m = _half(mode, *self._lengths(inputs[0], output, params))
        if inputs[1].size != table_length(2 * m):
            raise ShapeError(f"{self.name}: w has {inputs[1].size} elements; the twiddle "
                             f"table of 2M = {2 * m} has {table_length(2 * m)}")


COMPLEX_AXIS = ComplexAxis()
COMPLEX_AXIS_C128 = ComplexAxisTable()
_DIMS = 6
OPS = ("add", "sub", "mul", "div")


def _op(value) -> str | None:
    return None if value in OPS else f"expected one of {', '.join(OPS)}, got {value!r}"


def _strides(shape, out_shape) -> tuple[int, ...]:
    """Element strides of a contiguous ``shape`` broadcast to ``out_shape``, right-aligned
    into _DIMS dimensions (0 where it repeats)."""
    return broadcast_strides(tuple(shape), (1,) * (_DIMS - len(out_shape)) + tuple(out_shape))


class ComplexBinary(BuiltinKernel):
    """out = a op b for complex a and b of one dtype (c64 or c128) broadcast to out's shape
    (numpy's rules)."""

    name = "complex_binary"
    inputs = ("a", "b")
    dtypes = COMPLEX
    description = "complex64 or complex128 a + - * / b, broadcast"
    not_in_place = None  # each invocation reads its own a and b elements, then writes
    params = (Param("op", "op", doc="add, sub, mul or div", check=_op),)

    def output_spec(self, inputs, params):
        a, b = inputs
        return self._shape(a, b), a.dtype

    def _shape(self, a, b):
        try:
            shape = tuple(int(n) for n in np.broadcast_shapes(a.shape, b.shape))
        except ValueError:
            raise ShapeError(f"complex_binary: a {a.shape} and b {b.shape} do not "
                             f"broadcast") from None
        return shape

    def check(self, inputs, output, params) -> None:
        a, b = inputs
        for name, buf in (("a", a), ("b", b), ("out", output)):
            if buf.dtype not in COMPLEX or buf.dtype != a.dtype:
                raise DtypeError(f"complex_binary: {name} is {buf.dtype}; expected a's "
                                 f"complex dtype (c64 or c128) for a, b and out")
        shape = self._shape(a, b)
        if output.shape != shape:
            raise ShapeError(f"complex_binary: out is {output.shape}, expected {shape}")
        if output.ndim > _DIMS:
            raise ShapeError(f"complex_binary: out {output.shape} has more than {_DIMS} "
                             f"dimensions")
        if output.size >= 2**32:
            raise ShapeError(f"complex_binary: out {output.shape} has 2^32 elements or more")

    def key(self, inputs, output, params) -> PipelineKey:
        return PipelineKey(self.name, (output.dtype,), (("op", params["op"]),))

    def render(self, key: PipelineKey):
        src = shaders.render(shaders.load("fft/complex_binary.wgsl"), {
            "OP": dict(key.constants)["op"], "WG": WG, "DIMS": _DIMS,
            "R": DTYPES[key.dtypes[0]].part.wgsl},
            name="fft/complex_binary.wgsl")
        fields = [("total", "u32")]
        for k in range(_DIMS):
            fields += [(f"d{k}", "u32"), (f"sa{k}", "u32"), (f"sb{k}", "u32")]
        return src, tuple(fields)

    def launches(self, inputs, output, params, device):
        if output.size == 0:
            return []
        a, b = inputs
        dims = (1,) * (_DIMS - output.ndim) + tuple(output.shape)
        values = {"total": output.size}
        for k, (d, sa, sb) in enumerate(zip(dims, _strides(a.shape, output.shape),
                                            _strides(b.shape, output.shape))):
            values.update({f"d{k}": d, f"sa{k}": sa, f"sb{k}": sb})
        return [Launch(fold_grid(math.ceil(output.size / WG), device, self.name), values)]


COMPLEX_BINARY = ComplexBinary()
