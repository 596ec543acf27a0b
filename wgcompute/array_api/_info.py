"""``__array_namespace_info__()``: the devices this namespace can use, its default dtypes and
the dtypes each device computes in (64-bit types only where the adapter has them)."""

from __future__ import annotations

from .. import runtime
from ..runtime import Device
from ._dtypes import _COMPLEX, _FLOATS, _SIGNED, _UNSIGNED, NAMES, as_dtype

_KIND_NAMES = {"bool": ("bool",), "signed integer": _SIGNED, "unsigned integer": _UNSIGNED,
               "integral": _SIGNED + _UNSIGNED, "real floating": _FLOATS,
               "complex floating": _COMPLEX, "numeric": _SIGNED + _UNSIGNED + _FLOATS + _COMPLEX}


class Info:
    """What ``__array_namespace_info__()`` returns (the standard's inspection API)."""

    def __repr__(self) -> str:
        return "<wgcompute.array_api info>"

    def capabilities(self) -> dict:
        return {"boolean indexing": True, "data-dependent shapes": True,
                "max dimensions": 8}

    def default_device(self) -> Device:
        return runtime.current_device()

    def devices(self) -> list[Device]:
        devs = [runtime.current_device()]
        devs += [d for d in runtime.open_devices() if d not in devs and d.alive]
        return devs

    def default_dtypes(self, *, device: Device | None = None) -> dict:
        runtime.resolve(device)
        return {"real floating": NAMES["float32"], "complex floating": NAMES.get("complex64"),
                "integral": NAMES["int32"], "indexing": NAMES["int32"]}

    def dtypes(self, *, device: Device | None = None, kind=None) -> dict:
        dev = runtime.resolve(device)
        names = list(NAMES)
        if kind is not None:
            kinds = kind if isinstance(kind, tuple) else (kind,)
            wanted = set()
            for k in kinds:
                if isinstance(k, str):
                    wanted.update(_KIND_NAMES.get(k, ()))
                else:
                    wanted.add(next(n for n, d in NAMES.items() if d == as_dtype(k, "kind")))
            names = [n for n in names if n in wanted]
        return {n: NAMES[n] for n in names
                if NAMES[n].feature is None or dev.has(NAMES[n].feature)}


_INFO = Info()


def __array_namespace_info__() -> Info:
    return _INFO
