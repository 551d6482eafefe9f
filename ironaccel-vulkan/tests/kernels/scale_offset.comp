#version 450
// The conformance kernel: y[i] = a * x[i] + b for i < n (ironaccel.testing.conformance).
// A 1-D grid is the contract; a 2-D grid of rows also works, for n over 64 * maxComputeWorkGroupCount[0].
layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in;

layout(std430, set = 0, binding = 0) readonly buffer Input { float x[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Output { float y[]; };
layout(push_constant) uniform Params { float a; float b; uint n; } params;

void main() {
    uint i = gl_GlobalInvocationID.y * gl_NumWorkGroups.x * gl_WorkGroupSize.x + gl_GlobalInvocationID.x;
    if (i < params.n) {
        y[i] = params.a * x[i] + params.b;
    }
}
