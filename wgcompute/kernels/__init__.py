"""Kernels, one folder per family (core, elementwise, reduce, matmul, conv, nn, image): this
package registers the built-ins and exports the core's names (Kernel, Param, bind, registry)."""

from .conv.conv import conv_kernels
from .core import registry
from .core.base import Dispatch, Kernel, Launch, Meta, Param, PipelineKey
from .core.bind import bind
from .core.registry import get, names, register_kernel
from .elementwise.builtin import builtin_kernels
from .image import image_kernels
from .nn.nn import nn_kernels

for _k in builtin_kernels():
    registry.add(_k)
for _k in image_kernels():
    registry.add(_k)
for _k in nn_kernels() + conv_kernels():
    registry.add(_k)

__all__ = ["Dispatch", "Kernel", "Launch", "Meta", "Param", "PipelineKey", "bind", "get",
           "names", "register_kernel", "registry"]
