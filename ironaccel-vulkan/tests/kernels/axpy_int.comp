#version 450
// Three buffers, integer params: z[i] = k * x[i] + y[i] for i < n, 2-D grid of 64-wide rows.
layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in;

layout(std430, set = 0, binding = 0) readonly buffer X { int x[]; };
layout(std430, set = 0, binding = 1) readonly buffer Y { int y[]; };
layout(std430, set = 0, binding = 2) writeonly buffer Z { int z[]; };
layout(push_constant) uniform Params { int k; uint n; uint row; } params;

void main() {
    uint i = gl_GlobalInvocationID.y * params.row + gl_GlobalInvocationID.x;
    if (gl_GlobalInvocationID.x < params.row && i < params.n) {
        z[i] = params.k * x[i] + y[i];
    }
}
