"""What wgc.fuse traces a function with: stand-ins for its arrays (Traced) and scalars
(ScalarArg) whose elementwise operations build a fused DAG (kernels/elementwise/fused.py)."""

from __future__ import annotations

import operator

import numpy as np

from . import array as _array
from .array import _BITWISE, _COMMUTE, _SYMBOL, _is_scalar, _logical, promote
from .buffer import Buffer
from .dtypes import DTYPES, convert_exact
from .dtypes import dtype as resolve_dtype
from .errors import ArgumentError, DtypeError, UnsupportedDtypeError
from .kernels.core.layout import broadcast_shapes
from .kernels.elementwise.arrayops import ARRAY_OPS, COMPARISONS
from .kernels.elementwise.fused import ZERO, Node
from .kernels.elementwise.optable import OPS

_SCALAR_TYPES = (bool, int, float, np.integer, np.floating, np.bool_)


def _not_elementwise(fname: str, what: str) -> ArgumentError:
    return ArgumentError(
        f"fuse: {fname}: {what} is not elementwise; a fused function takes elementwise "
        f"operations (operators, relu(), astype() that holds every value, the array "
        f"namespace's elementwise functions) and one reduction (sum, max, min, mean) of a "
        f"result it returns")


class _Trace:
    """The DAG a traced function builds: nodes (shared when repeated), their shapes, the
    argument each input leaf is, and each scalar slot's source and conversion."""

    def __init__(self, fname: str, device):
        self.fname = fname
        self.device = device
        self.nodes: list[Node] = []
        self.shapes: list[tuple] = []
        self.memo: dict[Node, int] = {}
        self.inputs: list = []  # argument position (int) or keyword (str) per input leaf
        self.slots: list = []  # (ScalarArg, convert) per scalar slot
        self.slot_keys: dict = {}
        self.namespace = None  # what __array_namespace__ gives (set by the tracer)

    def add(self, node: Node, shape: tuple) -> Traced:
        k = self.memo.get(node)
        if k is None:
            k = self.memo[node] = len(self.nodes)
            self.nodes.append(node)
            self.shapes.append(tuple(shape))
        return Traced(self, k)

    def input(self, ref, buf: Buffer) -> Traced:
        self.inputs.append(ref)
        return self.add(Node("in", str(buf.dtype), (len(self.inputs) - 1,)), buf.shape)

    def slot(self, source: ScalarArg, convert, how: tuple) -> int:
        """The uniform slot of ``source`` converted by ``convert`` (``how`` names the
        conversion: one slot per argument or constant and conversion)."""
        key = None if source.key is None else (source.key, how)
        k = self.slot_keys.get(key) if key is not None else None
        if k is None:
            self.slots.append((source, convert))
            k = len(self.slots) - 1
            if key is not None:
                self.slot_keys[key] = k
        return k

    def scalar(self, source: ScalarArg, dtype: str, convert, how: tuple) -> Traced:
        return self.add(Node("scalar", dtype, (self.slot(source, convert, how + (dtype,)),)),
                        ())

    def apply(self, op: str, args, where: str, params: tuple[int, ...] = ()) -> Traced:
        """Row ``op`` of operands ``args`` (Traced, of one dtype), checked as its kernel
        checks them."""
        row = OPS[op]
        dt = args[0].dtype
        if dt.name not in row.accepts():
            raise DtypeError(f"{where}: {dt.name} buffers; {op} takes "
                             f"{', '.join(row.accepts())}")
        if dt.name == "f64" and op in ("floordiv", "mod") and not self.device.has(
                "shader-int64"):
            raise UnsupportedDtypeError(
                f"{where}: f64 // and % take the bits of f64 values apart in 64-bit integers, "
                f"which need the adapter feature 'shader-int64'; {self.device.name} does not "
                f"have it", "shader-int64")
        shapes = [a.shape for a in args]
        shape = shapes[0] if all(s == shapes[0] for s in shapes) else broadcast_shapes(
            where, [(f"operand {i}", s) for i, s in enumerate(shapes)])
        node = Node(op, row.out_dtype(dt.name), tuple(a._k for a in args), params)
        return self.add(node, shape)

    def cast(self, x: Traced, dtype: str) -> Traced:
        if x.dtype.name == dtype:
            return x
        return self.add(Node("cast", dtype, (x._k,)), x.shape)


class ScalarArg:
    """A Python scalar argument (or a Python expression of them) while tracing: its value is
    read at each call and goes into the uniform, so a new value compiles nothing."""

    __slots__ = ("fn", "sample", "key")

    def __init__(self, fn, sample, key=None):
        self.fn = fn  # (args, kwargs) -> the value
        self.sample = sample  # its value when traced: its type decides the dtype rules
        self.key = key  # what it is (an argument, a constant), for sharing its uniform slot

    def value(self, args, kwargs):
        v = self.fn(args, kwargs)
        if type(v) is not type(self.sample):
            raise ArgumentError(f"fuse: a scalar computed from the arguments is "
                                f"{type(v).__name__} {v!r} this call and was "
                                f"{type(self.sample).__name__} when traced; pass it as an "
                                f"argument of that type")
        return v

    def _op(self, fn, other, reflected=False):
        if isinstance(other, ScalarArg):
            a, b = (other, self) if reflected else (self, other)
            return ScalarArg(lambda x, k: fn(a.fn(x, k), b.fn(x, k)), fn(a.sample, b.sample))
        if not isinstance(other, _SCALAR_TYPES):
            return NotImplemented
        if reflected:
            return ScalarArg(lambda x, k: fn(other, self.fn(x, k)), fn(other, self.sample))
        return ScalarArg(lambda x, k: fn(self.fn(x, k), other), fn(self.sample, other))

    def __bool__(self):
        raise ArgumentError("fuse: the traced function branches on a scalar argument's value "
                            "(if, and, or, comparisons); a fused function is traced once per "
                            "signature, so its operations must not depend on values")

    def _compare(self, other):
        self.__bool__()

    __lt__ = __le__ = __gt__ = __ge__ = _compare

    def __neg__(self):
        return ScalarArg(lambda x, k: -self.fn(x, k), -self.sample)

    def __abs__(self):
        return ScalarArg(lambda x, k: abs(self.fn(x, k)), abs(self.sample))


def _scalar_ops():
    for name, fn in (("add", operator.add), ("sub", operator.sub), ("mul", operator.mul),
                     ("truediv", operator.truediv), ("floordiv", operator.floordiv),
                     ("mod", operator.mod), ("pow", operator.pow)):
        setattr(ScalarArg, f"__{name}__", lambda s, o, _f=fn: s._op(_f, o))
        setattr(ScalarArg, f"__r{name}__", lambda s, o, _f=fn: s._op(_f, o, True))


_scalar_ops()


def _source(value) -> ScalarArg | None:
    if isinstance(value, ScalarArg):
        return value
    if _is_scalar(value):
        return ScalarArg(lambda x, k, _v=value: _v, value, ("const", type(value), repr(value)))
    return None


class Traced:
    """An array while a fused function is traced: its shape and dtype are known, its values
    are not. Elementwise operators and methods add to the traced DAG; others are refused."""

    __slots__ = ("_t", "_k")
    __array_ufunc__ = None  # numpy's operators defer to ours
    __hash__ = object.__hash__

    def __init__(self, trace: _Trace, k: int):
        self._t = trace
        self._k = k

    @property
    def shape(self) -> tuple:
        return self._t.shapes[self._k]

    @property
    def dtype(self):
        return DTYPES[self._t.nodes[self._k].dtype]

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape))

    @property
    def device(self):
        return self._t.device

    def __repr__(self) -> str:
        return f"<traced {self.shape} {self.dtype.name} in fuse({self._t.fname})>"

    def __array_namespace__(self, api_version=None):
        return self._t.namespace

    def _refuse(self, what: str):
        raise _not_elementwise(self._t.fname, what)

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        self._refuse(f".{name}")

    def relu(self, slope=0.0) -> Traced:
        """wgc.relu of this array (the slope, a scalar, may be an argument)."""
        dt = self.dtype
        where = "relu"

        def convert(value):
            if dt.is_float:
                return convert_exact(np.atleast_1d(np.asarray(value)), dt,
                                     "relu: param 'slope'")[0].item()
            if value != 0:
                raise DtypeError(f"relu: slope={value} needs a float dtype; the input is "
                                 f"{dt.name}, which supports slope=0 only")
            return 0

        source = _source(slope)
        if source is None:
            raise ArgumentError(f"relu: slope must be a number, got {type(slope).__name__}")
        if dt.name not in OPS["relu"].accepts():
            raise DtypeError(f"relu: dtype {dt.name} is not supported; expected one of "
                             f"{', '.join(OPS['relu'].accepts())}")
        if not isinstance(slope, ScalarArg) and slope == 0:  # (a literal: folds away)
            return self._t.apply("relu", (self,), where, (ZERO,))
        slot = self._t.slot(source, convert, ("relu", dt.name))
        return self._t.apply("relu", (self,), where, (slot,))

    def astype(self, dtype, *, rounding=None, casting="exact") -> Traced:
        from .kernels.elementwise.cast import exact_by_type

        target = resolve_dtype(dtype, "dtype")
        if target.name == self.dtype.name and rounding is None:
            return self._t.add(Node("cast", target.name, (self._k,)), self.shape)
        if rounding is not None or target.kind == "b" or not exact_by_type(
                self.dtype.name, target.name):
            self._refuse(f"astype({target.name!r}) of a {self.dtype.name} array (a conversion "
                         f"that may change a value, which astype checks on the GPU and reads "
                         f"back)")
        return self._t.cast(self, target.name)

    def _reduce(self, name, axis=None, keepdims=False, out=None):
        if out is not None:
            self._refuse(f".{name}(out=...)")
        return _Reduction(self, name, lambda b: getattr(b, name)(axis=axis,
                                                                   keepdims=keepdims))

    def sum(self, axis=None, *, keepdims=False, out=None):
        return self._reduce("sum", axis, keepdims, out)

    def max(self, axis=None, *, keepdims=False, out=None):
        return self._reduce("max", axis, keepdims, out)

    def min(self, axis=None, *, keepdims=False, out=None):
        return self._reduce("min", axis, keepdims, out)

    def mean(self, axis=None, *, keepdims=False, out=None):
        return self._reduce("mean", axis, keepdims, out)

    def __bool__(self):
        self._refuse("bool() of an array (a read of its value)")

    def __float__(self):
        self._refuse("float() of an array (a read of its value)")

    def __int__(self):
        self._refuse("int() of an array (a read of its value)")

    def __index__(self):
        self._refuse("an array as an index")

    def __len__(self):
        return self.shape[0] if self.shape else self._refuse("len() of a 0-d array")

    def __iter__(self):
        self._refuse("iterating over an array")

    def __array__(self, dtype=None, copy=None):
        self._refuse("converting to a numpy array")

    def __getitem__(self, key):
        self._refuse("indexing (x[...])")

    def __setitem__(self, key, value):
        self._refuse("item assignment (x[...] = ...)")

    def __matmul__(self, other):
        self._refuse("operator @ (a matrix product)")

    __rmatmul__ = __matmul__

    def __pos__(self):
        return self._t.add(Node("cast", self.dtype.name, (self._k,)), self.shape)

    def __neg__(self):
        return _unary("neg", self)

    def __abs__(self):
        return _unary("abs", self)

    def __invert__(self):
        return _unary("invert", self)


def _operator_method(op: str, reflected: bool):
    def method(self, other):
        return _binary(op, self, other, reflected)
    return method


def _inplace_method(op: str):
    def method(self, other):
        self._refuse(f"operator {_SYMBOL[op]}= (it writes the buffer in place; write "
                     f"x = x {_SYMBOL[op]} y)")
    return method


for _op, _name in (("add", "add"), ("sub", "sub"), ("mul", "mul"), ("div", "truediv"),
                   ("floordiv", "floordiv"), ("mod", "mod"), ("pow", "pow"), ("and", "and"),
                   ("or", "or"), ("xor", "xor"), ("lshift", "lshift"), ("rshift", "rshift")):
    setattr(Traced, f"__{_name}__", _operator_method(_op, False))
    setattr(Traced, f"__r{_name}__", _operator_method(_op, True))
    setattr(Traced, f"__i{_name}__", _inplace_method(_op))
for _op in ("lt", "le", "gt", "ge", "eq", "ne"):
    setattr(Traced, f"__{_op}__", _operator_method(_op, False))


def _foreign(t: _Trace, value, where: str):
    if isinstance(value, Buffer):
        raise ArgumentError(f"fuse: {t.fname}: {where} with a buffer that is not an argument "
                            f"of the function; pass it as an argument")
    _array._other(value, where)


def _binary(op: str, a: Traced, b, reflected: bool = False):
    """``a op b`` as Buffer's operator computes it (array.binary): the same promotions,
    refusals, scalar conversions and rows."""
    t = a._t
    where = f"operator {_SYMBOL[op]}"
    if isinstance(b, Traced):
        dt = promote(where, a.dtype, b.dtype)
        a, b = t.cast(a, dt.name), t.cast(b, dt.name)
    dt = a.dtype
    if op in _BITWISE:
        op = _logical(where, op, dt)
    if isinstance(b, Traced):
        x, y = (b, a) if reflected else (a, b)
        if op == "div" and not dt.is_float:
            raise DtypeError(f"{where}: true division of {dt.name} buffers gives floats; "
                             f"convert first (.astype('f32')), or use // (floor division)")
        return t.apply(op, (x, y), where)
    source = _source(b)
    if source is None:
        _foreign(t, b, where)
        return NotImplemented
    if op == "div" and not dt.is_float:
        raise DtypeError(f"{where}: true division of a {dt.name} buffer gives floats; "
                         f"convert first (.astype('f32')), or use // (floor division)")
    negative_power = op == "pow" and not dt.is_float and not reflected

    def convert(value):
        if negative_power and value < 0:
            raise DtypeError(f"{where}: a {dt.name} buffer to the negative power {value!r}; "
                             f"integers to negative powers are not integers (convert to a "
                             f"float dtype)")
        return _array._scalar(value, dt, where)

    if op in _COMMUTE and reflected:
        reflected = False
    if reflected and op in COMPARISONS:
        op = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}.get(op, op)
        reflected = False
    if op not in ARRAY_OPS and op not in OPS:
        a._refuse(where)
    s = t.scalar(source, dt.name, convert, ("operator", where, negative_power))
    return t.apply(op, (s, a) if reflected else (a, s), where)


def _unary(op: str, a: Traced) -> Traced:
    where = f"operator {_SYMBOL.get(op, op)}"
    if op in _BITWISE:
        op = _logical(where, op, a.dtype)
    return a._t.apply(op, (a,), where)


class _Reduction:
    """A reduction of a traced array: allowed only as (part of) what the function returns,
    run on the fused result by the same function eagerly."""

    def __init__(self, x: Traced, name: str, run):
        self.x = x
        self.name = name
        self.run = run

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        self._used()

    def _used(self, *args):
        raise ArgumentError(f"fuse: {self.x._t.fname}: the result of {self.name}() is used "
                            f"further; a reduction must be the last operation (return it)")


for _name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "and", "or", "xor",
              "lshift", "rshift", "matmul"):
    setattr(_Reduction, f"__{_name}__", _Reduction._used)
    setattr(_Reduction, f"__r{_name}__", _Reduction._used)
for _name in ("lt", "le", "gt", "ge", "eq", "ne", "neg", "pos", "abs", "invert", "bool",
              "getitem", "float", "int"):
    setattr(_Reduction, f"__{_name}__", _Reduction._used)
