"""Neural-network inference on wgcompute: ONNX models loaded into GPU kernels (load_onnx,
Model, register_model) and the operators as functions on Buffers and numpy arrays."""

from .model import Model, ModelKernel, load_onnx, register_model

__all__ = ["Model", "ModelKernel", "load_onnx", "register_model"]
