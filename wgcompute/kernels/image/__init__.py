"""Image kernels on RGBA8 and f32 images (filters, colour, resize, gradients, convolutions),
and the surface's programs: to_rgba8 makes a frame, present draws it."""

from __future__ import annotations

from ..core.base import Kernel
from .color import BrightnessContrast, GenerateGradient, Grayscale, Invert, Threshold
from .filters import BoxBlur, Convolve2d, GaussianBlur, Sharpen, Sobel
from .resize import Preprocess, Resize


def image_kernels() -> list[Kernel]:
    return [GaussianBlur(), BoxBlur(), Sharpen(), Grayscale(), Preprocess(), GenerateGradient(),
            Resize(), BrightnessContrast(), Invert(), Threshold(), Sobel(), Convolve2d()]
