"""The FFT kernels: fft_pass (one Stockham autosort pass, its radix-R sub-transform in workgroup
memory, stockham.wgsl; complex64, and complex128 as fft_pass_c128 with its twiddles read from a
table made on the host, tables.py), fft (a power-of-two transform along one axis as those
passes) and their plan."""

from __future__ import annotations

import math

from ...errors import ArgumentError, DtypeError, ShapeError
from ..core import shaders
from ..core.base import BuiltinKernel, Launch, Param, PipelineKey, fold_grid

C64 = ("c64",)
_MIN_COLUMNS = 4  # columns a workgroup moves together: 32 contiguous bytes at least
_MAX_BYTES = 32768  # what a workgroup's values take at most (4096 complex64, 2048 complex128)
# The largest radix of a power-of-two pass's steps in workgroup memory (4, 8 or 16): a radix-16
# step is a 16-point DFT in registers, so a radix-256 pass makes 2 trips through workgroup
# memory (5 barriers) instead of radix-4's 4 (9 barriers). Measured on an H200 (2^24 c64, wall
# with a synchronize, alternating processes): radix 4 0.53-0.72 ms, radix 16 0.58-0.70 ms, the
# same within the noise (the three passes' 768 MiB of memory traffic bound it), and radix 16's
# error 6.7e-6 against radix 4's 1.7e-6 (chained twiddle powers): 4 it is.
FFT_MAX_RADIX = 4
# exp(2πi m / 16): the twiddles inside a radix-8 or radix-16 step
_TW16 = tuple((math.cos(2 * math.pi * m / 16), math.sin(2 * math.pi * m / 16))
              for m in range(16))


def _pow2(value) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1 or \
            value & (value - 1):
        return f"expected a power of two, got {value!r}"
    return None


def _smooth(value) -> str | None:
    """A length whose only prime factors are 2, 3 and 5."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1 or \
            smooth_factors(value) is None:
        return f"expected a product of 2s, 3s and 5s, got {value!r}"
    return None


def _positive(value) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        return f"expected a positive int, got {value!r}"
    return None


def smooth_factors(n: int) -> tuple[int, int, int] | None:
    """(a, b, c) with n = 2^a 3^b 5^c, or None for other n."""
    exps = []
    for p in (2, 3, 5):
        e = 0
        while n % p == 0:
            n //= p
            e += 1
        exps.append(e)
    return tuple(exps) if n == 1 else None


def sub_steps(r: int) -> tuple[tuple[int, int], ...]:
    """The steps of fft_pass's in-workgroup R-point transform: (radix, product of the
    earlier steps' radices). A power of two: radix-FFT_MAX_RADIX steps (each a DFT in
    registers between two trips through workgroup memory) after one smaller step for the
    bits left over. Other lengths: one radix-2 step where log2 of R's power of two is odd,
    radix-4 steps, then radix-3 and radix-5 ones (a thread holds a multiple of each radix)."""
    if FFT_MAX_RADIX not in (4, 8, 16):
        raise ArgumentError(f"fft: FFT_MAX_RADIX is {FFT_MAX_RADIX!r}; expected 4, 8 or 16")
    a, b, c = smooth_factors(r)
    most = FFT_MAX_RADIX.bit_length() - 1
    if b == c == 0 and most > 2:
        radices = [1 << (a % most)] * (a % most > 0) + [1 << most] * (a // most)
    else:
        radices = [2] * (a % 2) + [4] * (a // 2) + [3] * b + [5] * c
    steps, done = [], 1
    for rad in radices:
        steps.append((rad, done))
        done *= rad
    return tuple(steps)


def threads(r: int, c: int, most: int = 512) -> int | None:
    """fft_pass's workgroup size for R·C values: every step's radix divides the values each
    thread holds; at most ``most`` threads (None where no size fits)."""
    radices = {rad for rad, _ in sub_steps(r)} or {1}
    per = math.lcm(*radices)
    if per == 4 or per == 2:
        per = 4 if r * c >= 4 else r * c
    wg = r * c // per
    while wg > most and wg % 2 == 0:
        wg //= 2
    return wg if 1 <= wg <= most else None


def _nonneg(value) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return f"expected a non-negative int, got {value!r}"
    return None


def _sign(value) -> str | None:
    return None if value in (-1, 1) and not isinstance(value, bool) else \
        f"expected -1 (forward) or 1 (inverse), got {value!r}"


def axis_layout(shape, axis: int) -> tuple[int, int, int]:
    """(outer, length, inner) element counts of ``shape`` around ``axis``."""
    return math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1:])


def workgroup_elements(device, itemsize: int = 8) -> int:
    """Complex values (of ``itemsize`` bytes) one workgroup of fft_pass holds: a power of two
    that fits the adapter's workgroup memory (4096 complex64 where it has 32 KiB)."""
    limit = device.limit("max-compute-workgroup-storage-size") // itemsize
    return min(_MAX_BYTES // itemsize, 1 << (limit.bit_length() - 1))


def storage_elements(device, itemsize: int = 8) -> int:
    """Complex values (of ``itemsize`` bytes) that fit the adapter's workgroup memory."""
    return device.limit("max-compute-workgroup-storage-size") // itemsize


def plan_radices(n: int, capacity: int, contiguous: bool = True) -> list[int]:
    """The radices of the passes of a length-``n`` (a power of two) transform: one pass where
    the whole transform fits a workgroup and its elements are contiguous (the last axis),
    else as few passes as there are of radix at most capacity / 4 (so that a workgroup
    still moves 4 columns side by side), as equal as possible."""
    bits = n.bit_length() - 1
    if n <= capacity and (contiguous or n * _MIN_COLUMNS <= capacity):
        return [n]
    most = (capacity // _MIN_COLUMNS).bit_length() - 1
    passes = -(-bits // most)
    sizes = [bits // passes + (1 if i < bits % passes else 0) for i in range(passes)]
    return [1 << b for b in sizes]


def padded_stride(r: int, c: int, n: int, q: int, done: int) -> int:
    """The row stride of fft_pass's workgroup memory: C + 1 where threads next to each other
    take elements r next to each other (a contiguous axis' first or only pass), so that they
    hit different banks; C otherwise."""
    return c + 1 if c > 1 and q == 1 and (n == r or done == 1) else c


class FftPass(BuiltinKernel):
    """One Stockham pass of radix R: y = the pass of x (see stockham.wgsl), both c64 of the
    same shape, viewed as outer × n × inner around the transformed axis."""

    name = "fft_pass"
    inputs = ("x",)
    output = "y"
    dtypes = C64
    table = False  # twiddles computed in the shader (float32 sines and cosines)
    description = "one radix-R Stockham pass of a batched power-of-two FFT (c64)"
    not_in_place = "an FFT pass writes elements other than the ones it reads"
    params = (Param("outer", "layout", doc="elements before the axis", check=_nonneg),
              Param("n", "layout", doc="the axis' length (a power of two, or a product of 2s, "
                    "3s and 5s done in one pass)", check=_smooth),
              Param("inner", "layout", doc="elements after the axis", check=_nonneg),
              Param("radix", "layout", doc="this pass's radix (a power of two, or n itself)",
                    check=_smooth),
              Param("done", "layout", 1, "product of the earlier passes' radices",
                    check=_pow2),
              Param("sign", "layout", -1, "-1 forward, 1 inverse", check=_sign),
              Param("columns", "layout", 1, "columns per workgroup", check=_positive),
              Param("scale", "f32", 1.0, "factor of the results"))

    def check(self, inputs, output, params) -> None:
        x = inputs[0]
        o, n, q, r = params["outer"], params["n"], params["inner"], params["radix"]
        if x.dtype != self.dtypes[0] or output.dtype != x.dtype:
            raise DtypeError(f"{self.name}: x is {x.dtype} and y {output.dtype}; expected "
                             f"{self.dtypes[0]}")
        if self.table and inputs[1].size != table_length(n):
            raise ShapeError(f"{self.name}: w has {inputs[1].size} elements; the twiddle table "
                             f"of n {n} has {table_length(n)}")
        size = 16 if self.table else 8
        if x.size >= 2**32:
            raise ShapeError(f"fft_pass: x {x.shape} has 2^32 elements or more")
        if x.size != o * n * q or output.size != x.size:
            raise ShapeError(f"fft_pass: x has {x.size} and y {output.size} elements; outer "
                             f"{o} × n {n} × inner {q} = {o * n * q} expected")
        if (r & (r - 1) or n & (n - 1)) and (r != n or params["done"] != 1):
            raise ArgumentError(f"fft_pass: radix {r} of n {n}: lengths other than powers of "
                                f"two take one pass (radix n)")
        if threads(r, params["columns"]) is None:
            raise ArgumentError(f"fft_pass: radix {r} with {params['columns']} columns fits "
                                f"no workgroup size")
        if r > n or params["done"] * r > n or r * params["columns"] * size > _MAX_BYTES or \
                r * padded_stride(r, params["columns"], n, params["inner"], params["done"]) * \
                size > x.device.limit("max-compute-workgroup-storage-size"):
            raise ArgumentError(f"{self.name}: radix {r} after {params['done']} with "
                                f"{params['columns']} columns does not fit n {n}")

    def output_spec(self, inputs, params):
        return inputs[0].shape, self.dtypes[0]

    def _constants(self, params):
        r, c, n, q = params["radix"], params["columns"], params["n"], params["inner"]
        wg = threads(r, c)
        steps = sub_steps(r)
        contiguous_read = n // r == 1 and q == 1
        contiguous_write = params["done"] == 1 and q == 1
        return (("R", r), ("C", c), ("WG", wg), ("STEPS", steps),
                ("SIGN", params["sign"]), ("READ_R", contiguous_read),
                ("WRITE_R", contiguous_write), ("SC", padded_stride(r, c, n, q, params["done"])),
                ("Q1", q == 1), ("COLUMN_FIXED", not contiguous_read and wg % c == 0),
                ("STORE_FIXED", not contiguous_write and wg % c == 0))

    def key(self, inputs, output, params) -> PipelineKey:
        return PipelineKey(self.name, self.dtypes, self._constants(params))

    def render(self, key: PipelineKey):
        c = dict(key.constants)
        c["PER"] = c["R"] * c["C"] // c["WG"]
        c["TW"] = _TW16
        c["F"], c["TABLE"] = ("f64", True) if self.table else ("f32", False)
        src = shaders.render(shaders.load("fft/stockham.wgsl"), c, name="fft/stockham.wgsl")
        last = (("scale", "f64"), ("tw_bits", "u32")) if self.table else \
            (("scale", "f32"), ("inv_pr", "f32"))
        return src, (("cols", "u32"), ("N", "u32"), ("Q", "u32"), ("nr_bits", "u32"),
                     ("p_bits", "u32")) + last

    def launches(self, inputs, output, params, device):
        o, n, q, r = params["outer"], params["n"], params["inner"], params["radix"]
        cols = o * (n // r) * q
        if cols == 0:
            return []
        groups = -(-cols // params["columns"])
        return [Launch(fold_grid(groups, device, self.name),
                       {"cols": cols, "N": n, "Q": q, "nr_bits": (n // r).bit_length() - 1,
                        "p_bits": params["done"].bit_length() - 1, "scale": params["scale"],
                        "inv_pr": 1.0 / (params["done"] * r), "tw_bits": table_bits(n)})]


class FftPassTable(FftPass):
    """fft_pass over complex128: its twiddles W^j = exp(∓2πi·j/n) read from w, the table of n
    (tables.twiddles, made in float64 on the host: WGSL's sines are float32 on Vulkan)."""

    name = "fft_pass_c128"
    inputs = ("x", "w")
    dtypes = ("c128",)
    table = True
    description = "one radix-R Stockham pass of a batched FFT (c128, twiddles from a table)"
    params = FftPass.params[:-1] + (Param("scale", "f64", 1.0, "factor of the results"),)


def table_bits(n: int) -> int:
    """log2 of B, the first part's length of the twiddle table of n: about sqrt(n)."""
    return ((max(n, 2) - 1).bit_length() + 1) // 2


def table_length(n: int) -> int:
    """The twiddle table of n: W^j for j < B, then W^(B·j) for j < ceil(n / B)."""
    b = 1 << table_bits(n)
    return b + -(-n // b)


FFT_PASS = FftPass()
FFT_PASS_C128 = FftPassTable()


class Fft(BuiltinKernel):
    """out = the DFT of x along one axis (length a power of two), times ``scale``: c64 in
    and out, through fft_pass passes in one compute pass (one temporary between them)."""

    name = "fft"
    inputs = ("x",)
    dtypes = C64
    description = "batched power-of-two FFT of c64 along one axis, scaled"
    not_in_place = "an FFT pass writes elements other than the ones it reads"
    # every pass writes its temporary whole before the next reads it: the device's shared
    # scratch serves every binding (a queued transform does not hold memory of its own)
    scratch_temps = True
    params = (Param("axis", "layout", -1, "the transformed axis"),
              Param("sign", "layout", -1, "-1 forward, 1 inverse", check=_sign),
              Param("scale", "f32", 1.0, "factor of the results"),
              Param("capacity", "layout", 0, "complex values per workgroup (0: the "
                    "adapter's)", check=_nonneg))

    def check(self, inputs, output, params) -> None:
        (x,) = inputs
        if x.dtype != "c64":
            raise DtypeError(f"fft: x is {x.dtype}; expected c64")
        if output.shape != x.shape:
            raise ShapeError(f"fft: out is {output.shape}, expected {x.shape} (x's shape)")
        axis = params["axis"]
        if isinstance(axis, bool) or not isinstance(axis, int) or \
                not -x.ndim <= axis < x.ndim:
            raise ArgumentError(f"fft: axis {axis!r} is out of range for {x.ndim} dimensions")
        n = x.shape[axis]
        msg = _pow2(n) if n else None
        if msg:
            raise ShapeError(f"fft: the axis' length {n}: {msg}")

    def passes(self, inputs, output, params):
        (x,) = inputs
        capacity = params["capacity"] or workgroup_elements(x.device)
        plan = pass_params(x.shape, params["axis"] % x.ndim, params["sign"], params["scale"],
                           capacity, storage_elements(x.device))
        steps, src = [], "in0"
        for i, p in enumerate(plan):
            dst = "out" if (len(plan) - 1 - i) % 2 == 0 else "tmp0"
            steps.append((FFT_PASS, (src,), dst, p))
            src = dst
        return ([(x.shape, "c64")] if len(plan) > 1 else []), steps


def single_pass_params(shape, axis: int, sign: int, scale: float, capacity: int,
                       storage: int) -> list[dict] | None:
    """fft_pass's params for a length that is a product of 2s, 3s and 5s but no power of
    two, in one pass where it fits a workgroup (contiguous, or 4 columns side by side);
    None where it does not (Bluestein's algorithm takes it)."""
    o, n, q = axis_layout(shape, axis)
    if smooth_factors(n) is None or n > capacity or (q > 1 and n * _MIN_COLUMNS > capacity):
        return None
    cols = o * q
    c = max(1, min(capacity // n, 1 << max(0, (cols - 1).bit_length())))
    while c > 1 and (n * padded_stride(n, c, n, q, 1) > storage or threads(n, c) is None):
        c //= 2
    if n * padded_stride(n, c, n, q, 1) > storage or threads(n, c) is None:
        return None
    return [{"outer": o, "n": n, "inner": q, "radix": n, "done": 1, "sign": sign,
             "columns": c, "scale": scale}]


def pass_params(shape, axis: int, sign: int, scale: float, capacity: int,
                storage: int) -> list[dict]:
    """fft_pass's params for each pass of a transform along ``axis`` (a power-of-two length)
    of a ``shape`` array, ``scale`` applied by the last; ``capacity`` complex values per
    workgroup (a power of two), ``storage`` the most that fit its memory with padding. Pass
    i reads pass i - 1's output."""
    o, n, q = axis_layout(shape, axis)
    radices = plan_radices(max(n, 1), capacity, q == 1)
    out, done = [], 1
    for i, r in enumerate(radices):
        cols = o * (n // r) * q
        # half the workgroup memory where that still holds 4 columns: more workgroups fit a
        # compute unit (16 KiB ran 20% faster than 32 KiB on an H200 at 2^24)
        c = capacity // r
        if c >= 2 * _MIN_COLUMNS:
            c //= 2
        c = max(1, min(c, 1 << max(0, (cols - 1).bit_length())))
        while c > 1 and r * padded_stride(r, c, n, q, done) > storage:
            c //= 2
        out.append({"outer": o, "n": n, "inner": q, "radix": r, "done": done, "sign": sign,
                    "columns": c, "scale": scale if i == len(radices) - 1 else 1.0})
        done *= r
    return out


FFT = Fft()
