// Three buffers, no params: z[i] = x[i] * y[i], then x[i] = -1. Binding 1 uses the default access (read).
@group(0) @binding(0) var<storage, read_write> x: array<i32>;
@group(0) @binding(1) var<storage> y: array<i32>;   // access defaults to read
@group(0) @binding(2) var<storage, read_write> z: array<i32>;
@compute @workgroup_size(8, 8)
fn main(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) n: vec3<u32>) {
    let i = id.y * n.x * 8u + id.x;
    if (i < arrayLength(&z)) {
        z[i] = x[i] * y[i];
        x[i] = -1;
    }
}
