#version 450
// ExecutionConformance.typed_params_code: y[i] = a * x[i] + pair[0] - pair[1] * k for i < n.
layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in;

layout(std430, set = 0, binding = 0) readonly buffer Input { float x[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Output { float y[]; };
layout(push_constant, std430) uniform Params { float a; vec2 pair; uint n; int k; } params;

void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < params.n) {
        y[i] = params.a * x[i] + params.pair.x - params.pair.y * float(params.k);
    }
}
