// Constants: y[i] = x[i] * SCALE + BIAS for i < n.  Each constant's default sits under its own guard;
// pipeline(constants={...}) puts "#define NAME value" after #version, so the guard skips the default.
#version 430
#ifndef SCALE
#define SCALE 1.0
#endif
#ifndef BIAS
#define BIAS 0
#endif
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) buffer Y { float y[]; };
layout(std140, binding = 0) uniform Params { uint n; };

void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < n) {
        y[i] = x[i] * float(SCALE) + float(BIAS);
    }
}
