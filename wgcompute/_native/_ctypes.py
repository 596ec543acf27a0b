"""cffi's C types that a process's first GPU work needs, parsed in one go. cffi turns each new
type string (``ffi.new("WGPUDeviceDescriptor *")``, a callback's signature) into a type by
running pycparser over a prelude that declares every typedef of webgpu.h (~430 lines) and then
the string: 15-30 ms per string, and opening a device, compiling a kernel, running it and
reading it back asks for ~50 of them (1.3 s of a first tiny op's 1.4 s on lavapipe). Parsed
together, the prelude is read once (~30 ms). The types are made by cffi's own calls, exactly as
``ffi.typeof`` would make them; where its internals differ, nothing is done (they are then
parsed one by one, as before)."""

from __future__ import annotations

import logging
import re

log = logging.getLogger("wgcompute")

# What wgpu-py and wgcompute's fast path ask for between opening a device and reading a result
# back (found by recording the strings cffi parses in a fresh process; "WGPUAdapter[]" where
# the adapters are listed: wgc.devices(), an index, a name, a backend), spelled exactly as asked.
FIRST_USE = (
    "WGPUAdapterInfo *", "WGPUAdapter[]", "WGPUBindGroupDescriptor *", "WGPUBindGroupEntry *",
    "WGPUBindGroupEntry[]", "WGPUBindGroupLayoutDescriptor *", "WGPUBindGroupLayoutEntry *",
    "WGPUBindGroupLayoutEntry[]", "WGPUBindGroupLayout[]", "WGPUBufferBindingLayout *",
    "WGPUBufferDescriptor *", "WGPUBufferMapCallbackInfo *", "WGPUChainedStruct *",
    "WGPUChainedStruct * ", "WGPUCommandBufferDescriptor *", "WGPUCommandBuffer[]",
    "WGPUCommandEncoderDescriptor *", "WGPUComputePassDescriptor *",
    "WGPUComputePipelineDescriptor *", "WGPUComputeState *", "WGPUDeviceDescriptor *",
    "WGPUDeviceExtras *", "WGPUDeviceLostCallbackInfo *", "WGPUFeatureName[]",
    "WGPUInstanceDescriptor *", "WGPULimits *", "WGPUNativeLimits *",
    "WGPUPipelineLayoutDescriptor *", "WGPUQueueDescriptor *",
    "WGPUQueueWorkDoneCallbackInfo *", "WGPURequestAdapterCallbackInfo *",
    "WGPURequestAdapterOptions *", "WGPURequestDeviceCallbackInfo *",
    "WGPUShaderModuleDescriptor *", "WGPUShaderSourceWGSL *", "WGPUStringView *",
    "WGPUUncapturedErrorCallbackInfo *", "WGPUSupportedFeatures *", "WGPUFeatureName *",
    "WGPUPassTimestampWrites *", "WGPUQuerySetDescriptor *",
    "WGPUTexelCopyBufferInfo *", "WGPUTexelCopyTextureInfo *", "WGPUExtent3D *",
    "WGPUOrigin3D *", "WGPUTextureDescriptor *", "WGPUTextureViewDescriptor *",
    "WGPUSamplerDescriptor *", "WGPUTextureBindingLayout *", "WGPUSamplerBindingLayout *",
    "WGPUStorageTextureBindingLayout *", "WGPUConstantEntry[]",
    "char []", "char[]", "intptr_t", "uintptr_t", "void *", "uint32_t *", "uint64_t *",
    "void(WGPUDevice const *, WGPUDeviceLostReason, WGPUStringView, void *, void *)",
    "void(WGPUDevice const *, WGPUErrorType, WGPUStringView, void *, void *)",
    "void(WGPULogLevel, WGPUStringView, void *)",
    "void(WGPUMapAsyncStatus, WGPUStringView, void *, void *)",
    "void(WGPUQueueWorkDoneStatus, WGPUStringView, void *, void *)",
    "void(WGPURequestAdapterStatus, WGPUAdapter, WGPUStringView, void *, void *)",
    "void(WGPURequestDeviceStatus, WGPUDevice, WGPUStringView, void *, void *)",
    "void(WGPUPopErrorScopeStatus, WGPUErrorType, WGPUStringView, void *, void *)",
)


def prime(ffi, cdecls=FIRST_USE) -> int:
    """Parse the type strings ``cdecls`` that ``ffi`` has not parsed yet, together, into its
    cache (what ``ffi.typeof(cdecl)`` does one at a time). Returns how many were added; 0 where
    cffi's internals are not the ones this was written for, or a string does not parse."""
    try:
        with ffi._lock:
            cache = ffi._parsed_types
            parser = ffi._parser
            known = parser._declarations  # a type name this webgpu.h lacks fails the batch
            todo = [c for c in dict.fromkeys(cdecls) if c not in cache and all(
                f"typedef {name}" in known for name in re.findall(r"WGPU\w+", c))]
            if not todo:
                return 0
            source = "\n".join(f"void __dummy{i}(\n{c}\n);" for i, c in enumerate(todo))
            ast, macros = parser._parse(source)[:2]
            if macros or len(ast.ext) < len(todo):
                return 0
            made = {}
            for cdecl, decl in zip(todo, ast.ext[-len(todo):]):
                node = decl.type.args.params[0]
                tp = parser._get_type_and_quals(node.type)[0]
                is_function = tp.is_raw_function
                if is_function:
                    tp = tp.as_function_pointer()
                made[cdecl] = (ffi._get_cached_btype(tp), is_function)
            cache.update(made)
            return len(made)
    except Exception as e:  # noqa: BLE001 - another cffi, a type this wgpu lacks: parse lazily
        log.debug("wgcompute: C types left to cffi's parser: %s", e)
        return 0
