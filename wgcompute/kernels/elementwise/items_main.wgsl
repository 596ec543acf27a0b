// The head of main in the programs that take U items per invocation (elementwise.wgsl,
// elementwise_broadcast.wgsl, astype.wgsl, where.wgsl, fused.wgsl): invocation lid of a
// workgroup takes items base, base + WG, ... (neighbouring invocations, neighbouring items),
// each as `i`, and returns at the first past p.n. It opens main and that loop: the template
// that includes it writes item i's work, then closes the loop and main. HEAD: lines run
// once per invocation before the loop (a strided program's index decode of item base).
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let base = (wid.y * nwg.x + wid.x) * (${WG}u * ${U}u) + lid;
#for line in HEAD
    ${line}
#endfor
    for (var j = 0u; j < ${U}u; j = j + 1u) {
        let i = base + j * ${WG}u;
        if (i >= p.n) {
            return;
        }
