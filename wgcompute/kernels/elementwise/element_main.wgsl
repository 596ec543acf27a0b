// The head of main in the programs with one invocation per output element e (numbered across
// the folded grid's workgroups; gather.wgsl's scatter, image/resize_axis.wgsl), returning
// past p.total. It opens main: the template that includes it writes element e's work and
// closes main.
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let e = (wid.y * nwg.x + wid.x) * ${WG}u + lid;
    if (e >= p.total) {
        return;
    }
