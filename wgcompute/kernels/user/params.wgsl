// The head both user kernels share (elementwise.wgsl, reduction.wgsl): enable lines, the
// generic types' aliases, the uniform's fields (the kernel's own first, then the broadcast
// inputs' sizes and strides, then the scalars), the storage bindings with the uniform after
// them, and packed.wgsl when a packed dtype is read or written.
// Templates: ENABLE, ALIASES, FIELDS (name, type), STORAGE (binding, access, name, WGSL
//   element), UB, PACKED (signature.program_values makes them).
${ENABLE}
${ALIASES}

struct Params {
#for f in FIELDS
    ${f[0]}: ${f[1]},
#endfor
}

#for b in STORAGE
@group(0) @binding(${b[0]}) var<storage, ${b[1]}> ${b[2]}: array<${b[3]}>;
#endfor
@group(0) @binding(${UB}) var<uniform> p: Params;
#if PACKED

#include "elementwise/packed.wgsl"
#endif
