"""An ONNX model (wgc.ml.Model) as work on a Dask cluster: it travels as its file's path and
content hash (a cluster on one machine, or a shared file system) or as its bytes (a model
with external data: with that data inline), and each worker loads it once and runs it as a
kernel through its stream_map."""

from __future__ import annotations

import hashlib
import os
import sys
import threading
from dataclasses import dataclass

import wgcompute as wgc

from ._work import Work, WorkKind, register_work_kind

__all__ = ["ModelRecipe", "ModelKind"]


@dataclass(frozen=True)
class ModelRecipe:
    """An ONNX model as data: its sha256, and the file to read it from (checked against the
    hash) or its bytes; the dtype it runs in (f32, f16) and its precision (f32, mixed)."""

    sha256: str
    path: str | None
    data: bytes | None
    dtype: str
    name: str
    precision: str = "f32"

    def load_bytes(self) -> bytes:
        if self.path is not None and os.path.isfile(self.path):
            with open(self.path, "rb") as f:
                data = f.read()
            if hashlib.sha256(data).hexdigest() == self.sha256:
                return data
        if self.data is None:
            raise wgc.ArgumentError(f"model {self.name!r}: {self.path!r} is not on this "
                                    f"worker (or holds another model); send the model's "
                                    f"bytes instead: wgc.dask.work(model, "
                                    f"{{'send_bytes': True}})")
        return self.data

    def __repr__(self) -> str:
        where = self.path if self.data is None else f"{len(self.data):,} bytes"
        return f"ModelRecipe({self.name!r}, {self.dtype}, {where}, sha256 {self.sha256[:12]})"


_models: dict[tuple, str] = {}  # (sha256, dtype, precision) -> kernel registered here
_lock = threading.Lock()


def _model_class():
    mod = sys.modules.get("wgcompute.ml.model")  # only if wgc.ml is in use: no onnx import
    return getattr(mod, "Model", None)


class ModelKind(WorkKind):
    """A wgc.ml.Model of one input and one output (a classifier: NCHW f32 in, logits out).
    params: ``send_bytes`` (True: carry the model itself, for workers on other machines)."""

    name = "onnx_model"

    def accepts(self, obj) -> bool:
        cls = _model_class()
        return isinstance(obj, ModelRecipe) or (cls is not None and isinstance(obj, cls))

    def make(self, obj, params, like) -> Work:
        params = dict(params or {})
        bad = set(params) - {"send_bytes"}
        if bad:
            raise wgc.ArgumentError(f"params: a model takes only send_bytes, got "
                                    f"{', '.join(sorted(bad))}")
        if isinstance(obj, ModelRecipe):
            return Work(self.name, obj)
        if len(obj.input_names) != 1 or len(obj.output_names) != 1 or obj.host_inputs:
            raise wgc.ArgumentError(f"work: model {obj.name!r} has {len(obj.input_names)} "
                                    f"inputs and {len(obj.output_names)} outputs; a model "
                                    f"here takes one float input and gives one output")
        data = obj.onnx_bytes()
        send = bool(params.get("send_bytes")) or obj.source is None
        path = None if obj.source is None else os.path.abspath(obj.source)
        if path is not None and _has_external_data(data):
            # a worker given the .onnx alone would look for the data in its own working
            # directory: the model travels whole, its data read here from its own folder
            data, send, path = _inline(obj.name, path), True, None
        digest = hashlib.sha256(data).hexdigest()
        return Work(self.name, ModelRecipe(digest, path, data if send else None, obj.dtype,
                                           obj.name, obj.precision))

    def _model(self, w: Work):
        from ..ml import load_onnx

        return load_onnx(w.recipe.load_bytes(), dtype=w.recipe.dtype,
                         precision=w.recipe.precision, name=w.recipe.name)

    def output_spec(self, w, shape, dtype):
        if dtype != "f32":
            raise wgc.DtypeError(f"model {w.recipe.name!r}: its input is f32, the chunks are "
                                 f"{dtype}")
        from ..ml.plan import lower

        m = self._graph_model(w)
        shape = m._input_shape(0, shape)
        # the plan's shapes do not depend on the device (only how it is cut into bindings)
        plan = lower(m.graph, (shape,), m.dtype, 1 << 62)
        return tuple(plan.output_shape), "f32"

    _graphs: dict = {}

    def _graph_model(self, w: Work):
        key = (w.recipe.sha256, w.recipe.dtype, w.recipe.precision)
        m = self._graphs.get(key)
        if m is None:
            m = self._graphs[key] = self._model(w)
        return m

    def stream_args(self, w, shape, dtype):
        """The model registered as a kernel on this worker, once per model and dtype."""
        from ..ml import register_model

        key = (w.recipe.sha256, w.recipe.dtype, w.recipe.precision)
        with _lock:
            name = _models.get(key)
            if name is None:
                name = (f"dask_model_{w.recipe.sha256[:16]}_{w.recipe.dtype}_"
                        f"{w.recipe.precision}")
                register_model(name, self._model(w), replace=True)
                _models[key] = name
        return {"work": name}

    def describe(self, w):
        return repr(w.recipe)


def _has_external_data(data: bytes) -> bool:
    import onnx
    from onnx import external_data_helper as edh

    proto = onnx.load_from_string(data)
    return any(edh.uses_external_data(t) for t in edh._get_all_tensors(proto))


def _inline(name: str, path: str) -> bytes:
    """The model at ``path`` serialized with its external data inline (onnx.load reads it
    from the model's folder, as wgc.ml.load_onnx does)."""
    import onnx

    try:
        proto = onnx.load(path)
        return proto.SerializeToString()
    except Exception as e:  # data outside the folder, missing, or a model over 2 GiB
        raise wgc.ModelError(f"model {name!r}: its external data cannot travel with it to "
                             f"the workers ({type(e).__name__}: {e})") from e


register_work_kind(ModelKind())
