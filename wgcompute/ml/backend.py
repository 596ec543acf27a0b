"""ONNX's backend interface over wgcompute (onnx.backend.base): what ONNX's own backend test
suite drives (``onnx.backend.test.BackendTest(wgcompute.ml.backend.WgcBackend)``)."""

from __future__ import annotations

import numpy as np
from onnx.backend.base import Backend, BackendRep

from ..errors import ModelError
from .model import Model, load_onnx


def _load_args(kwargs) -> dict:
    return {k: kwargs[k] for k in ("dtype", "precision", "max_folded_bytes") if k in kwargs}


class WgcBackendRep(BackendRep):
    """A prepared model: ``run(inputs)`` returns every output as numpy, in graph order."""

    def __init__(self, model: Model):
        self.model = model

    def run(self, inputs, **kwargs):
        if isinstance(inputs, np.ndarray):
            inputs = [inputs]
        return tuple(self.model.run(list(inputs) if not isinstance(inputs, dict) else inputs))


class WgcBackend(Backend):
    """wgcompute as an ONNX backend. It computes on the wgcompute device; the device name
    ONNX's tests ask for is "CPU" (the only one they run without CUDA)."""

    @classmethod
    def is_compatible(cls, model, device: str = "CPU", **kwargs) -> bool:
        try:
            load_onnx(model, **_load_args(kwargs))
        except ModelError:
            return False
        return True

    @classmethod
    def prepare(cls, model, device: str = "CPU", **kwargs) -> WgcBackendRep:
        """``kwargs`` may hold load_onnx's dtype, precision and max_folded_bytes."""
        super().prepare(model, device, **kwargs)
        return WgcBackendRep(load_onnx(model, **_load_args(kwargs)))

    @classmethod
    def run_model(cls, model, inputs, device: str = "CPU", **kwargs):
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return device == "CPU"


prepare = WgcBackend.prepare
run_model = WgcBackend.run_model
supports_device = WgcBackend.supports_device
