"""Kernels: the spec machinery (base), the registry of named kernels, and the built-ins."""

from . import registry
from .base import Dispatch, Kernel, Launch, Meta, Param, PipelineKey, bind
from .builtin import builtin_kernels
from .conv import conv_kernels
from .image import image_kernels
from .nn import nn_kernels
from .registry import get, names, register_kernel

for _k in builtin_kernels():
    registry.add(_k)
for _k in image_kernels():
    registry.add(_k)
for _k in nn_kernels() + conv_kernels():
    registry.add(_k)

__all__ = ["Dispatch", "Kernel", "Launch", "Meta", "Param", "PipelineKey", "bind", "get",
           "names", "register_kernel", "registry"]
