// Typed params: y[i] = a * x[i] + pair.x - pair.y * k for i < n (std140 block, fields read by name).
#version 430
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) buffer Y { float y[]; };
layout(std140, binding = 0) uniform Params { float a; vec2 pair; uint n; int k; };

void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < n) {
        y[i] = a * x[i] + pair.x - pair.y * float(k);
    }
}
