// ExecutionConformance's typed-params kernel: y[i] = a * x[i] + pair[0] - pair[1] * k for i < n.
struct Params { a: f32, pair: vec2<f32>, n: u32, k: i32 }
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if (i < p.n) {
        y[i] = p.a * x[i] + p.pair.x - p.pair.y * f32(p.k);
    }
}
