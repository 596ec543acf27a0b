"""The surface's GPU programs: the kernel packing any image buffer into the RGBA8 words of a
frame, and the render pipeline drawing a frame into a canvas's colour targets."""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass

import wgpu

from .errors import DtypeError, ShaderCompileError, ShapeError
from .kernels import Kernel, Launch, PipelineKey
from .kernels.core import shaders
from .kernels.core.base import fold_grid
from .runtime import Device


def image_layout(shape, dtype: str, argument: str) -> tuple[int, int, int]:
    """(height, width, channels) of an image given as H×W or H×W×C (C = 1, 3 or 4)."""
    if dtype not in ("u8", "f32"):
        raise DtypeError(f"{argument}: images are u8 (0..255) or f32 (0..1), got {dtype}")
    if len(shape) == 2:
        h, w, c = shape[0], shape[1], 1
    elif len(shape) == 3 and shape[2] in (1, 3, 4):
        h, w, c = shape
    else:
        raise ShapeError(f"{argument}: expected an image of shape (H, W) or (H, W, C) with C "
                         f"1, 3 or 4, got {tuple(shape)}")
    if h < 1 or w < 1:
        raise ShapeError(f"{argument}: image {tuple(shape)} has no pixels")
    return h, w, c


# -- the conversion kernel: any image buffer -> packed RGBA8 frame ---------------------------

class _ToRGBA8(Kernel):
    """src image (u8 C=1|3, f32 C=1|3|4) -> out (H, W) u32, one RGBA8 word per pixel."""

    name = "surface_to_rgba8"
    inputs = ("src",)
    output = "out"
    dtypes = ("u32",)
    description = "image -> packed RGBA8 words (the surface's frame)"

    def check(self, inputs, output, params) -> None:
        h, w, _ = image_layout(inputs[0].shape, inputs[0].dtype, "src")
        if output.shape != (h, w):
            raise ShapeError(f"{self.name}: out is {output.shape}, expected {(h, w)}")

    def key(self, inputs, output, params) -> PipelineKey:
        src = inputs[0]
        _, _, c = image_layout(src.shape, src.dtype, "src")
        return PipelineKey(self.name, (src.dtype, "u32"), (("C", c),))

    def render(self, key: PipelineKey):
        src_dtype = key.dtypes[0]
        c = dict(key.constants)["C"]
        if src_dtype == "u8":
            fetch = "return f32((src[k >> 2u] >> ((k & 3u) * 8u)) & 0xffu) / 255.0;"
            src_t = "u32"
        else:
            fetch = "return src[k];"
            src_t = "f32"
        source = shaders.render(shaders.load("image/to_rgba8.wgsl"), {
            "SRC_T": src_t, "C": c, "FETCH": fetch, "WG": self.workgroup_size})
        return source, (("n", "u32"),)

    def launches(self, inputs, output, params, device) -> list[Launch]:
        n = output.size
        groups = math.ceil(n / self.workgroup_size)
        return [Launch(fold_grid(groups, device, self.name), {"n": n})]


_TO_RGBA8 = _ToRGBA8()


# -- the present pipeline: frame buffer -> colour target(s), a full-screen triangle ----------

@dataclass(frozen=True)
class PresentKey:
    formats: tuple[str, ...]


_present_lock = threading.Lock()


def _present_pipeline(device: Device, formats: tuple[str, ...]):
    """(render pipeline, bind-group layout) drawing the frame into one target per format,
    made once per device (kept in the device's caches)."""
    key = PresentKey(formats)
    with _present_lock:
        hit = device.extras.get(key)
        if hit is not None:
            return hit
        dev = device.gpu_device
        outputs = "\n".join(f"    @location({i}) c{i}: vec4<f32>," for i in range(len(formats)))
        assign = "\n".join(f"    o.c{i} = c;" for i in range(len(formats)))
        source = shaders.render(shaders.load("image/present.wgsl"),
                                {"OUTPUTS": outputs, "ASSIGN": assign})
        label = f"surface-present[{','.join(formats)}]"
        try:
            module = dev.create_shader_module(label=label, code=source)
            bgl = dev.create_bind_group_layout(label=label, entries=[
                {"binding": 0, "visibility": wgpu.ShaderStage.FRAGMENT,
                 "buffer": {"type": "read-only-storage"}},
                {"binding": 1, "visibility": wgpu.ShaderStage.FRAGMENT,
                 "buffer": {"type": "uniform"}},
            ])
            layout = dev.create_pipeline_layout(label=label, bind_group_layouts=[bgl])
            pipeline = dev.create_render_pipeline(
                label=label, layout=layout,
                vertex={"module": module, "entry_point": "vs_main", "buffers": []},
                primitive={"topology": "triangle-list"},
                fragment={"module": module, "entry_point": "fs_main",
                          "targets": [{"format": f} for f in formats]})
        except Exception as e:
            raise ShaderCompileError(label, source, str(e)) from e
        device.extras[key] = (pipeline, bgl)
        return pipeline, bgl
