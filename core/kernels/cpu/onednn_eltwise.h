// oneDNN's vectorised eltwise and softmax primitives for contiguous float32 CPU data: the
// transcendental loops (erf, exp) that scalar libm makes slow. Primitives are cached by shape.
//
//   if (cpu::UseOneDnn(n)) cpu::GeluForward(x, y, n);   // else the scalar loop
#pragma once

#include <cstdint>
#include <oneapi/dnnl/dnnl.hpp>

namespace oneflow {
namespace cpu {

// The process's oneDNN CPU engine and stream (also the convolutions'), made once and never
// destroyed: cached primitives outlive static teardown.
dnnl::engine& OneDnnEngine();
dnnl::stream& OneDnnStream();

// Worth a primitive call: below this many elements the scalar loop is as fast.
inline bool UseOneDnn(int64_t n) { return n >= 4096; }

// y = gelu(x) (erf form), and dx = dy * gelu'(x).
void GeluForward(const float* x, float* y, int64_t n);
void GeluBackward(const float* dy, const float* x, float* dx, int64_t n);

// Softmax (or log-softmax) of x seen as (outer, d, inner) over d.
void Softmax(const float* x, float* y, int64_t outer, int64_t d, int64_t inner, bool log);
// Its gradient from the output y: dx = y * (dy - sum(dy * y)), or dy - exp(y) * sum(dy).
void SoftmaxBackward(const float* y, const float* dy, float* dx, int64_t outer, int64_t d,
                     int64_t inner, bool log);

}  // namespace cpu
}  // namespace oneflow
