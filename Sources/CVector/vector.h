// Lane-wise vector operations for the core's hot loops, as clang's portable vector
// builtins. Swift's SIMD squareRoot runs lane by lane on this toolchain (a scalar sqrt and a
// libm call per lane); through these the compiler emits one vector instruction. Nothing here
// is platform-specific: clang lowers each builtin for whatever target the core is built for.
#ifndef UPSCALE_VECTOR_H
#define UPSCALE_VECTOR_H

typedef float upscale_float16 __attribute__((ext_vector_type(16)));

static inline __attribute__((always_inline)) upscale_float16 upscale_sqrt16(upscale_float16 v) {
    return __builtin_elementwise_sqrt(v);
}

#endif
