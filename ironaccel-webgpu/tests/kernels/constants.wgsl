// ExecutionConformance's constants kernel: y[i] = x[i] * SCALE + BIAS for i < n (WGSL overrides).
override SCALE: f32 = 1.0;
override BIAS: i32 = 0;
struct Params { n: u32 }
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if (i < p.n) {
        y[i] = x[i] * SCALE + f32(BIAS);
    }
}
