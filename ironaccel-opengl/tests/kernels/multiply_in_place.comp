#version 430
// Three buffers, no params: z[i] = x[i] * y[i], then x[i] = -1. Workgroups of 8 x 8.
layout(local_size_x = 8, local_size_y = 8) in;
layout(std430, binding = 0) buffer X { int x[]; };
layout(std430, binding = 1) readonly buffer Y { int y[]; };
layout(std430, binding = 2) buffer Z { int z[]; };
void main() {
    uint i = gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 8u + gl_GlobalInvocationID.x;
    if (i < uint(z.length())) {
        z[i] = x[i] * y[i];
        x[i] = -1;
    }
}
