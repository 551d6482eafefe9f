// The conformance kernel: y[i] = a * x[i] + b for i < n, workgroup size 64.
// Rows of the grid continue the index (i = row * groups.x * 64 + column), so a 2-D grid covers
// more than the 65535-workgroup limit of one dimension.
struct Params { a: f32, b: f32, n: u32 }
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = id.y * groups.x * 64u + id.x;
    if (i < p.n) {
        y[i] = p.a * x[i] + p.b;
    }
}
