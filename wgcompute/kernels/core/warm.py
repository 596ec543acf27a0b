"""Compiling the distinct pipelines of a multi-step binding (a network's plan) side by side on a few
threads while its steps are checked and bound in order: wgpu-native releases the GIL while naga
and the driver compile, and Kernel.compiled compiles each program once, whoever asks first."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

# threads compiling one binding's pipelines (besides its own, which compiles what none of them
# has begun when its step needs it); 1: each pipeline compiles as its step binds
THREADS = min(8, os.cpu_count() or 1)


class Compiler:
    """The compiles one binding starts (``start``): on THREADS threads, made on the first
    pipeline the device lacks. Leaving the ``with`` block waits for the threads (compiles not
    started yet are dropped: the binding failed)."""

    def __init__(self, device):
        self.device = device
        self.pool: ThreadPoolExecutor | None = None
        self.jobs: dict = {}  # PipelineKey -> its compile

    def start(self, kernel, key):
        """Start compiling ``key``'s pipeline, if the device lacks it: a function returning the
        pipeline (it waits for the compile, or does it on the caller if no thread has begun
        it), or None where the binding takes the pipeline itself (cached, or THREADS is 1)."""
        if THREADS < 2 or key in self.device.pipelines:
            return None
        job = self.jobs.get(key)
        if job is None:
            if self.pool is None:
                self.pool = ThreadPoolExecutor(THREADS, thread_name_prefix="wgcompute-compile")
            job = self.jobs[key] = self.pool.submit(kernel.compiled, key, self.device)

        def pipeline():
            if job.cancel():  # no thread has begun it: compile here rather than wait
                return kernel.compiled(key, self.device)
            return job.result()  # its error raised in the step that needs it

        return pipeline

    def __enter__(self) -> Compiler:
        return self

    def __exit__(self, *exc) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
