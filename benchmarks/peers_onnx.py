"""Inference peers for the model benchmarks, each numpy in -> numpy out as a user's script
gets it: ONNX Runtime's WebGPU backend (the `onnxruntime-ep-webgpu` plugin, with and without
its graph capture) and torch CUDA graphs (fp32 with TF32 off, and fp16). A peer that cannot
run here returns None and says why (printed), so a table names what is missing."""

from __future__ import annotations

import copy

import numpy as np


def ort_webgpu(path: str, feeds: dict, graph_capture: bool = False):
    """fn(feeds) -> the first output, through ONNX Runtime's WebGPU execution provider; None
    (said why) where the plugin or an adapter is missing. Graph capture records the run once
    and replays it; ONNX Runtime then wants the inputs and outputs bound on the device
    (IOBinding), so the copies in and out are part of each call."""
    try:
        import onnxruntime as ort
        import onnxruntime_ep_webgpu as ep
    except ImportError as e:
        print(f"  ORT WebGPU: not installed ({e})")
        return None
    try:
        ort.register_execution_provider_library("webgpu", ep.get_library_path())
    except Exception:  # noqa: BLE001 - registered already in this process
        pass
    devices = [d for d in ort.get_ep_devices() if "webgpu" in d.ep_name.lower()]
    if not devices:
        print("  ORT WebGPU: the plugin sees no device")
        return None
    so = ort.SessionOptions()
    so.add_provider_for_devices(devices[:1], {"enableGraphCapture": "1"} if graph_capture
                                else {})
    sess = ort.InferenceSession(path, sess_options=so)
    if not graph_capture:
        return lambda f: sess.run(None, f)[0]
    binding = sess.io_binding()
    name0 = sess.get_outputs()[0].name
    values = {k: ort.OrtValue.ortvalue_from_numpy(v, "webgpu", 0) for k, v in feeds.items()}
    for k, v in values.items():
        binding.bind_ortvalue_input(k, v)
    outs = [ort.OrtValue.ortvalue_from_shape_and_type(
        _out_shape(sess, o, feeds), np.float32, "webgpu", 0) for o in sess.get_outputs()]
    for o, v in zip(sess.get_outputs(), outs, strict=True):
        binding.bind_ortvalue_output(o.name, v)
    ro = ort.RunOptions()

    def run(f):
        for k, v in f.items():
            values[k].update_inplace(v)
        sess.run_with_iobinding(binding, ro)
        return outs[[o.name for o in sess.get_outputs()].index(name0)].numpy()

    return run


def _out_shape(sess, out, feeds) -> list[int]:
    """An output's shape with its symbolic batch dimension resolved from the feeds."""
    batch = next(iter(feeds.values())).shape[0]
    return [d if isinstance(d, int) else batch for d in out.shape]


def torch_graph(call, module, feeds: dict, half: bool = False):
    """fn(feeds) -> the first output as numpy, through a CUDA graph of ``call(net, tensors)``
    (tensors: the feeds on the GPU, by name) recorded once: ``module`` in fp32 with TF32 off,
    or with ``half`` a copy of it and the float feeds in fp16. None where CUDA is not seen."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        print("  torch CUDA graph: no CUDA device")
        return None
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    net = (copy.deepcopy(module).half() if half else module).cuda().eval()
    static = {k: torch.from_numpy(v).cuda() for k, v in feeds.items()}
    if half:
        static = {k: v.half() if v.is_floating_point() else v for k, v in static.items()}
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.no_grad(), torch.cuda.stream(side):
        for _ in range(3):
            call(net, static)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.no_grad(), torch.cuda.graph(graph):
        out = call(net, static)

    def run(f):
        for k, v in f.items():
            static[k].copy_(torch.from_numpy(v))
        graph.replay()
        return out.float().cpu().numpy()

    return run
