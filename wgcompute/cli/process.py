"""`wgcompute process`: run an image --pipeline over files, globs and directories, decoding and
encoding on threads while the GPU works (or across a Dask cluster), outputs written atomically."""

from __future__ import annotations

import glob
import os
import sys
import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor

import numpy as np

import wgcompute as wgc

DESCRIPTION = """Run an image pipeline over image files on the GPU.

  wgcompute process photos/ extra/*.jpg -o out/ \\
      --pipeline "gaussian_blur(radius=3, sigma=1.5) | sharpen(amount=0.5) | grayscale"

Inputs are files, globs (** recurses) or directories (their image files). Every stage of
--pipeline is checked before any file is read or written. Each output is written to a
temporary file and renamed, so none is ever half-written. A file that fails is reported at
the end; the others still run, and the exit code is 1 if any failed (2 for bad arguments).
Each output keeps its input's format (--ext picks another): an animated GIF has every frame
processed and is written as an animated GIF with the same timing; a 16-bit image (grey PNG
or TIFF) is processed in float and written back with 16 bits where the format holds them.

With --workers N (a local Dask cluster of N worker processes, one per GPU) or --scheduler
ADDRESS (a running Dask cluster whose workers see the same files), the files are spread
over the workers; each decodes, runs the pipeline on its GPU and writes its outputs. A
worker that dies has its files done again by another. Needs wgcompute[dask].

Image stages, with their params and defaults:
"""

PIPELINE_DEMO = "gaussian_blur(radius=3, sigma=1.5) | sharpen(amount=0.5) | grayscale"


def bundled_photo() -> str | None:
    """examples/data/chelsea.png of a source checkout (a wheel does not ship examples/)."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    path = os.path.join(root, "examples", "data", "chelsea.png")
    return path if os.path.isfile(path) else None


IMAGE_EXTS = {".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp"}


def add_arguments(p) -> None:
    p.description = DESCRIPTION + wgc.image.stage_help()
    p.add_argument("inputs", nargs="+", metavar="IN", help="image files, globs or directories")
    p.add_argument("-o", "--out", required=True, metavar="OUTDIR",
                   help="folder for the results (created if missing)")
    p.add_argument("--pipeline", required=True,
                   help='stages separated by "|", e.g. "gaussian_blur(sigma=2) | grayscale"')
    p.add_argument("--ext", default=None,
                   help="output format by extension (png, jpg, ...); default: the input's")
    p.add_argument("--suffix", default="", help="added to each output file's stem")
    p.add_argument("--threads", type=int, default=None,
                   help="threads decoding and encoding files (default: min(4, CPUs); on a "
                        "cluster: chunks each worker takes at once, default 4)")
    p.add_argument("--workers", type=int, default=None, metavar="N",
                   help="run on a local Dask cluster of N worker processes, each on its own "
                        "GPU (in turn if there are fewer GPUs)")
    p.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="run on the Dask cluster at ADDRESS (e.g. tcp://host:8786)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


class UsageError(Exception):
    pass


def _sig(x: float) -> str:
    """x with three significant digits (0.0423, 1.23, 12.3), whole with separators from 100."""
    return f"{x:,.0f}" if x >= 100 else f"{x:.3g}"


def rate(count: int, seconds: float, unit: str = "images") -> str:
    """"12.3 images/s"; a slow run also in seconds per item ("0.0423 images/s, 23.6 s/image"),
    so that no rate reads as 0.0."""
    if count <= 0:
        return f"0 {unit}/s"
    per_s = count / seconds if seconds > 0 else float("inf")
    if per_s >= 1:
        return f"{_sig(per_s)} {unit}/s"
    return f"{_sig(per_s)} {unit}/s, {_sig(seconds / count)} s/{unit.removesuffix('s')}"


def check_parallel_args(args) -> None:
    """--threads, --workers and --scheduler, which process and infer share."""
    if args.threads is not None and args.threads < 1:
        raise UsageError(f"--threads: expected a positive int, got {args.threads}")
    if args.workers is not None and args.workers < 1:
        raise UsageError(f"--workers: expected a positive int, got {args.workers}")
    if args.workers is not None and args.scheduler is not None:
        raise UsageError("--workers: give --workers (a local cluster) or --scheduler (a "
                         "running one), not both")


def expand_inputs(specs) -> list[str]:
    """Files, globs and directories -> image files, in order, without duplicates."""
    out, seen = [], set()

    def take(path):
        key = os.path.abspath(path)
        if key not in seen:
            seen.add(key)
            out.append(path)

    for spec in specs:
        if os.path.isdir(spec):
            found = sorted(os.path.join(spec, n) for n in os.listdir(spec)
                           if os.path.splitext(n)[1].lower() in IMAGE_EXTS
                           and os.path.isfile(os.path.join(spec, n)))
            if not found:
                raise UsageError(f"IN: directory {spec!r} holds no image files "
                                 f"({', '.join(sorted(IMAGE_EXTS))})")
        elif os.path.isfile(spec):
            found = [spec]
        elif glob.has_magic(spec):
            found = sorted(f for f in glob.glob(spec, recursive=True) if os.path.isfile(f))
            if not found:
                raise UsageError(f"IN: glob {spec!r} matches no file")
        else:
            raise UsageError(f"IN: {spec!r} is not a file, directory or glob that matches")
        for f in found:
            take(f)
    return out


def plan_outputs(files, outdir: str, ext: str | None, suffix: str) -> list[str]:
    if ext is not None:
        ext = "." + ext.lstrip(".").lower()
        if ext not in wgc.image.WRITE_EXTS:
            raise UsageError(f"--ext: {ext!r} is not one of {', '.join(wgc.image.WRITE_EXTS)}")
    dests, owner = [], {}
    inputs = {os.path.abspath(f) for f in files}
    for f in files:
        stem, own_ext = os.path.splitext(os.path.basename(f))
        own_ext = own_ext.lower() if own_ext.lower() in wgc.image.WRITE_EXTS else ".png"
        dest = os.path.join(outdir, stem + suffix + (ext or own_ext))
        key = os.path.abspath(dest)
        if key in owner:
            raise UsageError(f"-o: {f!r} and {owner[key]!r} would both write {dest!r} (use "
                             f"separate runs or --suffix)")
        if key in inputs:
            raise UsageError(f"-o: writing {dest!r} would replace an input; choose another "
                             f"OUTDIR, --suffix or --ext")
        owner[key] = f
        dests.append(dest)
    return dests


class _Progress:
    def __init__(self, total: int, enabled: bool):
        self.bar = None
        self.lock = threading.Lock()
        if enabled:
            try:
                from tqdm import tqdm
            except ImportError:
                tqdm = None
            if tqdm is not None:
                self.bar = tqdm(total=total, unit="img", desc="process", file=sys.stderr,
                                dynamic_ncols=True)

    def step(self, failed: bool) -> None:
        if self.bar is not None:
            with self.lock:
                self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def decode(path):
    """(frames, timing) of one input: every frame of an animated GIF with its timing
    (durations, loop), else the one image and None; 16-bit files come as f32 (see
    wgc.image.read_file)."""
    frames, timing = wgc.image.read_frames(path)
    return frames, (timing if len(frames) > 1 else None)


def read_still(path):
    """One input for a cluster worker: a single image (an animation is refused, not cut to
    its first frame)."""
    frames, _ = wgc.image.read_frames(path)
    if len(frames) > 1:
        raise wgc.ShapeError(f"path: {path!r} is an animation of {len(frames)} frames; "
                             f"--workers and --scheduler process single images (run without "
                             f"them to process every frame)")
    return frames[0]


def save_image(result, dest) -> None:
    """Write one result of the pipeline: 8 bits, or 16 where the result is float (a 16-bit
    input's) and the format holds them (PNG, TIFF)."""
    sixteen = result.dtype == np.float32 and \
        os.path.splitext(dest)[1].lower() in wgc.image.SIXTEEN_BIT_EXTS
    wgc.image.write_file(wgc.image.file_array(result, 16 if sixteen else 8), dest)


def save_animation(results, timing, dest) -> None:
    wgc.image.write_frames([wgc.image.as_rgba8(r) for r in results], dest,
                           timing["durations"], timing["loop"])


def _submit_file(path, dest, fut, stages):
    """One decoded file (``fut``, its decode) uploaded and its stages submitted, one command
    per image or frame. Returns (jobs, timing, pixels); on failure frees what it made."""
    jobs = []
    try:
        frames, timing = fut.result()
        ext = os.path.splitext(dest)[1].lower()
        if timing is not None and ext not in wgc.image.ANIMATION_EXTS:
            raise wgc.ArgumentError(
                f"--ext: {path!r} is an animation of {len(frames)} frames, written as "
                f"{', '.join(wgc.image.ANIMATION_EXTS)}; {ext} holds one image (drop "
                f"--ext, or take one frame with wgc.image.load(path, frame=i))")
        for i, arr in enumerate(frames):
            img = wgc.image._upload(arr, f"{os.path.basename(path)}[{i}]")
            cmd, out = wgc.image.submit_stages(img, stages, label=f"process:{path}")
            img.free()  # freed once the submitted command is done with it
            jobs.append((cmd, out))
    except Exception:
        for _, out in jobs:
            out.free()
        raise
    return jobs, timing, sum(a.shape[0] * a.shape[1] for a in frames)


def process(files, dests, stages, workers: int, progress: bool):
    """Decode on ``workers`` threads, upload and submit on this thread (one submit per image
    or frame), wait, read back and encode on ``workers`` threads. Returns (done, failures,
    pixels)."""
    failures: list[tuple[str, str]] = []
    lock = threading.Lock()
    pixels = [0]
    done = [0]
    bar = _Progress(len(files), progress)

    def fail(path, e):
        with lock:
            failures.append((path, f"{type(e).__name__}: {e}"))
        bar.step(True)

    def finish(jobs, timing, path, dest, npix):
        try:
            results = []
            for cmd, out in jobs:
                cmd.wait()
                results.append(out.to_numpy())
            if timing is None:
                save_image(results[0], dest)  # RGB when opaque, one channel when also grey
            else:
                save_animation(results, timing, dest)
        except Exception as e:  # one file's failure must not stop the batch
            fail(path, e)
            return
        finally:
            for _, out in jobs:
                out.free()
        with lock:
            done[0] += 1
            pixels[0] += npix
        bar.step(False)

    ahead = max(2, 2 * workers)
    with ThreadPoolExecutor(workers, thread_name_prefix="decode") as dec, \
            ThreadPoolExecutor(workers, thread_name_prefix="encode") as enc:
        queue = deque()
        todo = iter(zip(files, dests, strict=True))
        encodes = deque()

        def refill():
            while len(queue) < ahead:
                item = next(todo, None)
                if item is None:
                    return
                queue.append((item, dec.submit(decode, item[0])))

        refill()
        while queue:
            (path, dest), fut = queue.popleft()
            refill()
            try:
                jobs, timing, npix = _submit_file(path, dest, fut, stages)
            except Exception as e:
                fail(path, e)
                continue
            encodes.append(enc.submit(finish, jobs, timing, path, dest, npix))
            while len(encodes) > ahead:  # bound the images in flight (GPU and host memory)
                encodes.popleft().result()
        for f in encodes:
            f.result()
    bar.close()
    return done[0], failures, pixels[0]


def process_on_cluster(files, dests, stages, progress: bool, *, workers=None, scheduler=None,
                       threads=None):
    """The files spread over a Dask cluster's workers (a local one of ``workers`` processes,
    or the one at ``scheduler``): each reads, runs the stages as one pipeline through its
    own stream_map and writes. Returns (done, failures, pixels) as process() does."""
    steps = [(s.kernel, s.params, [] if s.weights is None else [s.weights]) for s in stages]
    bar = _Progress(len(files), progress)
    kw = {} if scheduler is not None or threads is None else {"threads_per_worker": threads}
    try:
        with wgc.dask.connect(workers=workers, scheduler=scheduler, **kw) as client:
            results, failures = wgc.dask.map_files(
                steps, files, dests, load=read_still, save=save_image, client=client,
                progress=lambda ok: bar.step(not ok), cleanup=wgc.image.remove_stale_temps,
                like=((64, 64, 4), "u8"))
    finally:
        bar.close()
    ok = [r for r in results if r is not None]
    return len(ok), failures, sum(shape[0] * shape[1] for shape, _ in ok)


def run(args) -> int:
    if not wgc.image.has_imageio():  # once, before any file is read
        print(f"wgcompute process: error: reading and writing image files needs imageio, "
              f"which is not installed: {wgc.image.INSTALL_HINT}", file=sys.stderr)
        return 2
    try:
        check_parallel_args(args)
        stages = wgc.image.parse_pipeline(args.pipeline)
        files = expand_inputs(args.inputs)
        if os.path.exists(args.out) and not os.path.isdir(args.out):
            raise UsageError(f"-o: {args.out!r} exists and is not a directory")
        dests = plan_outputs(files, args.out, args.ext, args.suffix)
    except (UsageError, wgc.WgComputeError) as e:
        print(f"wgcompute process: error: {e}", file=sys.stderr)
        return 2
    try:
        os.makedirs(args.out, exist_ok=True)
    except OSError as e:
        reason = e.strerror or type(e).__name__
        print(f"wgcompute process: error: -o: cannot create the folder {args.out!r} "
              f"({reason})", file=sys.stderr)
        return 2
    stale = [p for dest in dests for p in wgc.image.remove_stale_temps(dest)]
    if stale:
        print(f"removed {len(stale)} temporary file(s) left by an interrupted run",
              file=sys.stderr)
    progress = not args.no_progress and sys.stderr.isatty()
    t0 = time.perf_counter()
    if args.workers is not None or args.scheduler is not None:
        done, failures, pixels = process_on_cluster(
            files, dests, stages, progress, workers=args.workers, scheduler=args.scheduler,
            threads=args.threads)
    else:
        done, failures, pixels = process(files, dests, stages,
                                         args.threads or min(4, os.cpu_count() or 1), progress)
    dt = time.perf_counter() - t0
    print(f"processed {done} of {len(files)} image(s) in {dt:.2f} s: {rate(done, dt)}, "
          f"{_sig(pixels / dt / 1e6)} Mpix/s -> {args.out}")
    if failures:
        print(f"{len(failures)} failed:", file=sys.stderr)
        for path, msg in failures:
            print(f"  {path}: {msg}", file=sys.stderr)
        return 1
    return 0
