"""Transformers through ONNX, every peer in one run: ViT-B/16 (torchvision) and BERT-base
(transformers, sequence 128), random weights, exported to ONNX (opset 17, dynamic batch),
run by wgcompute (numpy in -> numpy out, wall clock, the median of --repeat calls after a
warm-up and the background tuning), checked against onnxruntime (CPU) at 1e-4 relative, beside
onnxruntime CPU, torch eager fp32 on CUDA, and where they run (benchmarks/peers_onnx.py) ONNX
Runtime's WebGPU backend with and without graph capture and torch CUDA graphs fp32 / fp16;
and wgcompute with dtype="f16" (f32 sums, and precision="mixed") where the adapter has f16.

    python -m benchmarks.bench_transformers [--models vit,bert] [--batches 1,32]
        [--repeat 10] [--json PATH]

It needs torch, torchvision and transformers to export the models (the GPU machine has them)."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np

from benchmarks.harness import median_time, save_rows


def export_vit(folder: str):
    import torch
    import torchvision

    net = torchvision.models.vit_b_16(weights=None).eval()
    # torchvision zero-initializes the classification head: with random weights its logits are
    # all 0, which would compare nothing; the encoder's class-token features are compared
    net.heads = torch.nn.Identity()
    path = os.path.join(folder, "vit_b_16.onnx")
    torch.onnx.export(net, torch.zeros(1, 3, 224, 224), path, input_names=["pixels"],
                      output_names=["logits"], dynamic_axes={"pixels": {0: "N"}},
                      opset_version=17, dynamo=False)

    def inputs(b, rng):
        return {"pixels": rng.standard_normal((b, 3, 224, 224)).astype(np.float32)}

    def torch_fn(feeds):
        x = torch.from_numpy(feeds["pixels"]).cuda()
        with torch.no_grad():
            return net.cuda()(x).cpu().numpy()

    return path, inputs, torch_fn, (net, lambda m, t: m(t["pixels"]))


def export_bert(folder: str, seq: int = 128):
    import torch
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    bert = BertModel(BertConfig()).eval()  # bert-base: 12 layers, 768 wide, random weights

    class Encoder(torch.nn.Module):  # by keyword: BertModel's positional arguments shift
        def __init__(self):
            super().__init__()
            self.bert = bert

        def forward(self, input_ids, attention_mask):
            out = self.bert(input_ids=input_ids, attention_mask=attention_mask)
            return out.last_hidden_state, out.pooler_output

    net = Encoder().eval()
    path = os.path.join(folder, "bert_base.onnx")
    ids = torch.zeros(1, seq, dtype=torch.int64)
    torch.onnx.export(net, (ids, torch.ones_like(ids)), path,
                      input_names=["input_ids", "attention_mask"],
                      output_names=["last_hidden_state", "pooler_output"],
                      dynamic_axes={"input_ids": {0: "N"}, "attention_mask": {0: "N"}},
                      opset_version=17, dynamo=False)

    def inputs(b, rng):
        mask = np.ones((b, seq), np.int64)
        mask[:, seq - 16:] = 0  # padding at the end of each sequence
        return {"input_ids": rng.integers(0, 30522, (b, seq)).astype(np.int64),
                "attention_mask": mask}

    def torch_fn(feeds):
        with torch.no_grad():
            out = net.cuda()(torch.from_numpy(feeds["input_ids"]).cuda(),
                             torch.from_numpy(feeds["attention_mask"]).cuda())
            return out[0].cpu().numpy()

    return path, inputs, torch_fn, (net, lambda m, t: m(t["input_ids"], t["attention_mask"])[0])


def _peers(path, feeds, graphable, repeat, want) -> dict:
    """ms per call of each GPU peer that runs here (ORT WebGPU with and without graph capture,
    torch CUDA graphs fp32 and fp16), and the largest relative error of each against ``want``."""
    from benchmarks import peers_onnx

    net, call = graphable
    makers = {"ort_webgpu": lambda: peers_onnx.ort_webgpu(path, feeds),
              "ort_webgpu_capture": lambda: peers_onnx.ort_webgpu(path, feeds, True),
              "torch_graph_fp32": lambda: peers_onnx.torch_graph(call, net, feeds),
              "torch_graph_fp16": lambda: peers_onnx.torch_graph(call, net, feeds, True)}
    out = {}
    for key, make in makers.items():
        try:
            fn = make()
            if fn is None:
                continue
            got = fn(feeds)
            out[key + "_ms"] = median_time(lambda fn=fn: fn(feeds), repeat) * 1e3
            out[key + "_rel_err"] = float(np.abs(got - want).max() /
                                          max(np.abs(want).max(), 1e-30))
        except Exception as e:  # noqa: BLE001 - the peer's failure, named; the others go on
            print(f"  {key}: failed ({type(e).__name__}: {str(e)[:200]})", flush=True)
    return out


def _half_rows(path, feeds, repeat, want) -> dict:
    """ms per call and relative error (against onnxruntime's f32) of the model loaded with
    dtype="f16": f32 sums (precision "f32") and f16 sums within each k slice ("mixed"); a
    refusal is printed, not timed."""
    import wgcompute as wgc

    out = {}
    if not wgc.current_device().has("shader-f16"):
        return out
    for precision in ("f32", "mixed"):
        try:
            half = wgc.ml.load_onnx(path, dtype="f16", precision=precision)
            got = half.run(feeds)[0]
            wgc.autotune_wait()
        except wgc.WgComputeError as e:
            print(f"  f16 ({precision} sums): refused ({type(e).__name__}: {str(e)[:200]})")
            return out
        key = "wgcompute_f16" + ("_mixed" if precision == "mixed" else "")
        out[key + "_ms"] = median_time(lambda half=half: half.run(feeds), repeat) * 1e3
        out[key + "_rel_err"] = float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-30))
        half.free()
    return out


def run_case(name, path, inputs, torch_fn, batches, repeat, rows, graphable=None):
    import onnxruntime as ort

    import wgcompute as wgc

    model = wgc.ml.load_onnx(path)
    print(f"{name}: {model!r}", flush=True)
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    for b in batches:
        feeds = inputs(b, rng)
        t0 = time.perf_counter()
        got = model.run(feeds)[0]
        first = time.perf_counter() - t0
        want = sess.run(None, feeds)[0]
        wgc.autotune_wait()  # background tuning of the first call's kernels, then steady
        rel = float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-30))
        t_wgc = median_time(lambda feeds=feeds: model.run(feeds), repeat)
        t_ort = median_time(lambda feeds=feeds: sess.run(None, feeds), max(2, repeat // 3))
        t_torch = None
        try:
            import torch

            if torch.cuda.is_available():
                def tfn(feeds=feeds):
                    torch_fn(feeds)
                    torch.cuda.synchronize()
                t_torch = median_time(tfn, repeat)
        except ImportError:
            pass
        row = {"model": name, "batch": b, "wgcompute_ms": t_wgc * 1e3, "first_call_s": first,
               "ort_cpu_ms": t_ort * 1e3, "torch_eager_ms": None if t_torch is None else
               t_torch * 1e3, "max_rel_err_vs_ort": rel}
        if graphable is not None:
            row.update(_peers(path, feeds, graphable, repeat, want))
        row.update(_half_rows(path, feeds, repeat, want))
        rows.append(row)
        peers = "".join(f", {k[:-3]} {v:.2f} ms ({t_wgc * 1e3 / v:.2f}x)"
                        for k, v in row.items() if k.endswith("_ms") and k.startswith(
                            ("ort_webgpu", "torch_graph")))
        torch_text = "" if t_torch is None else f", torch eager fp32 {t_torch * 1e3:.2f} ms"
        half = "".join(f", {k[:-3].replace('_', ' ')} {v:.2f} ms (rel err "
                       f"{row[k[:-3] + '_rel_err']:.1e})"
                       for k, v in row.items() if k.startswith("wgcompute_f16") and
                       k.endswith("_ms"))
        print(f"{name} b{b}: wgcompute {t_wgc * 1e3:.2f} ms (first call {first:.2f} s)"
              f"{half}, onnxruntime CPU {t_ort * 1e3:.2f} ms{torch_text}{peers}; max rel err "
              f"vs ORT {rel:.1e} (wgcompute f32 / peer in parentheses)", flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="vit,bert")
    ap.add_argument("--batches", default="1,32")
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--json", default="")
    args = ap.parse_args(argv)
    batches = [int(b) for b in args.batches.split(",")]
    exporters = {"vit": ("ViT-B/16", export_vit), "bert": ("BERT-base seq 128", export_bert)}
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for key in args.models.split(","):
            name, export = exporters[key]
            try:
                path, inputs, torch_fn, graphable = export(folder)
            except Exception as e:  # noqa: BLE001 - a missing exporter: say so, go on
                print(f"{name}: not exported ({type(e).__name__}: {e})")
                continue
            try:
                run_case(name, path, inputs, torch_fn, batches, args.repeat, rows, graphable)
            except Exception as e:  # noqa: BLE001 - the error, named, then the next model
                print(f"{name}: failed ({type(e).__name__}: {e})")
    save_rows(args.json, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
