"""Image kernels on RGBA8 and f32 images (filters, colour, resize, gradients, convolutions),
and the surface's programs: to_rgba8 makes a frame, present draws it."""
