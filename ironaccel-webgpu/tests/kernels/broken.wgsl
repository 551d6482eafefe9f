// Does not compile: assigns a u32 to an f32.
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    let bad: f32 = 1u;
    y[id.x] = x[id.x] + bad;
}
