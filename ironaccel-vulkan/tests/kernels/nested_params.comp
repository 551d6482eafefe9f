#version 450
// Typed params beyond the conformance kit's: a nested struct, an array, a 64-bit scalar and an int vector.
// y[i] = (first.scale * x[i] + first.shift) * (weights[0] + weights[1] + weights[2]) + offset.x - offset.y, i < n.
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in;

struct Affine { float scale; float shift; };

layout(std430, set = 0, binding = 0) readonly buffer Input { float x[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Output { float y[]; };
layout(push_constant, std430) uniform Params {
    Affine first;
    float weights[3];
    uint64_t n;
    ivec2 offset;
} params;

void main() {
    uint i = gl_GlobalInvocationID.x;
    if (uint64_t(i) < params.n) {
        float sum = params.weights[0] + params.weights[1] + params.weights[2];
        y[i] = (params.first.scale * x[i] + params.first.shift) * sum + float(params.offset.x - params.offset.y);
    }
}
