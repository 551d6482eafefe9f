#version 430
// Does not compile: uses a name that is never declared.
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) buffer Y { float y[]; };
void main() {
    y[gl_GlobalInvocationID.x] = x[gl_GlobalInvocationID.x] + undeclared_name;
}
