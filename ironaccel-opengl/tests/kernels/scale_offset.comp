// The conformance kernel: y[i] = a * x[i] + b for i < n, workgroup size 64.
// Rows of the grid continue the index (i = row * groups.x * 64 + column), so a 2-D grid covers
// more than one dimension's workgroup-count limit.
#version 430
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer Y { float y[]; };
layout(std140, binding = 0) uniform Params { float a; float b; uint n; };

void main() {
    uint i = gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 64u + gl_GlobalInvocationID.x;
    if (i < n) {
        y[i] = a * x[i] + b;
    }
}
