#version 450
// ExecutionConformance.constants_code: y[i] = x[i] * SCALE + BIAS for i < n (specialization constants).
layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in;

layout(constant_id = 0) const float SCALE = 1.0;
layout(constant_id = 1) const int BIAS = 0;

layout(std430, set = 0, binding = 0) readonly buffer Input { float x[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Output { float y[]; };
layout(push_constant) uniform Params { uint n; } params;

void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < params.n) {
        y[i] = x[i] * SCALE + float(BIAS);
    }
}
