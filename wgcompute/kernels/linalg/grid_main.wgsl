// The head of main in the programs spread over the whole GPU (qr_parallel.wgsl,
// qr_apply.wgsl): workgroup w of the folded grid, and the matrices' m and n. It opens main:
// the template that includes it writes the work of its phases and closes main.
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) t: u32) {
    let w = wid.y * nwg.x + wid.x;
    let m = p.m;
    let n = p.n;
