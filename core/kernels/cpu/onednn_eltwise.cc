#include "core/kernels/cpu/onednn_eltwise.h"

#include <map>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <tuple>

namespace oneflow {
namespace cpu {

dnnl::engine& OneDnnEngine() {
  static auto* eng = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *eng;
}

dnnl::stream& OneDnnStream() {
  static auto* strm = new dnnl::stream(OneDnnEngine());
  return *strm;
}

namespace {

using dnnl::memory;

struct Runtime {
  dnnl::engine& eng = OneDnnEngine();
  dnnl::stream& strm = OneDnnStream();
  std::mutex mu;
  std::map<std::tuple<int, int64_t>, dnnl::primitive> eltwise;  // (0 fwd / 1 bwd, n)
  // (outer, d, inner, log, backward)
  std::map<std::tuple<int64_t, int64_t, int64_t, bool, bool>, dnnl::primitive> softmax;
};
Runtime& Rt() {
  static Runtime* rt = new Runtime();  // never destroyed: primitives outlive static teardown
  return *rt;
}

memory::desc Flat(int64_t n) {
  return memory::desc({n}, memory::data_type::f32, memory::format_tag::a);
}

memory Mem(const memory::desc& md, const void* p) {
  return memory(md, Rt().eng, const_cast<void*>(p));
}

dnnl::eltwise_forward::primitive_desc GeluPd(const memory::desc& md) {
  return dnnl::eltwise_forward::primitive_desc(
      dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_training,
                                  dnnl::algorithm::eltwise_gelu_erf, md, 0.f, 0.f),
      Rt().eng);
}

}  // namespace

void GeluForward(const float* x, float* y, int64_t n) {
  Runtime& rt = Rt();
  std::lock_guard<std::mutex> lock(rt.mu);
  const memory::desc md = Flat(n);
  auto it = rt.eltwise.find({0, n});
  if (it == rt.eltwise.end()) {
    it = rt.eltwise.emplace(std::make_tuple(0, n), dnnl::eltwise_forward(GeluPd(md))).first;
  }
  it->second.execute(rt.strm, {{DNNL_ARG_SRC, Mem(md, x)}, {DNNL_ARG_DST, Mem(md, y)}});
  rt.strm.wait();
}

void GeluBackward(const float* dy, const float* x, float* dx, int64_t n) {
  Runtime& rt = Rt();
  std::lock_guard<std::mutex> lock(rt.mu);
  const memory::desc md = Flat(n);
  auto it = rt.eltwise.find({1, n});
  if (it == rt.eltwise.end()) {
    dnnl::eltwise_backward::desc d(dnnl::algorithm::eltwise_gelu_erf, md, md, 0.f, 0.f);
    dnnl::eltwise_backward::primitive_desc pd(d, rt.eng, GeluPd(md));
    it = rt.eltwise.emplace(std::make_tuple(1, n), dnnl::eltwise_backward(pd)).first;
  }
  it->second.execute(rt.strm, {{DNNL_ARG_SRC, Mem(md, x)},
                               {DNNL_ARG_DIFF_DST, Mem(md, dy)},
                               {DNNL_ARG_DIFF_SRC, Mem(md, dx)}});
  rt.strm.wait();
}

namespace {

// The (log-)softmax primitive over d of (outer, d, inner), forward or backward, made once per
// shape. REQUIRES: rt.mu held.
dnnl::primitive& SoftmaxPrimitive(Runtime& rt, const memory::desc& md, int64_t outer, int64_t d,
                                  int64_t inner, bool log, bool backward) {
  auto key = std::make_tuple(outer, d, inner, log, backward);
  auto it = rt.softmax.find(key);
  if (it != rt.softmax.end()) return it->second;
  const auto prop =
      backward ? dnnl::prop_kind::forward_training : dnnl::prop_kind::forward_inference;
  dnnl::primitive p;
  if (log) {
    dnnl::logsoftmax_forward::primitive_desc fwd({prop, md, 1}, rt.eng);
    p = backward ? dnnl::primitive(dnnl::logsoftmax_backward(
                       dnnl::logsoftmax_backward::primitive_desc({md, md, 1}, rt.eng, fwd)))
                 : dnnl::primitive(dnnl::logsoftmax_forward(fwd));
  } else {
    dnnl::softmax_forward::primitive_desc fwd({prop, md, 1}, rt.eng);
    p = backward ? dnnl::primitive(dnnl::softmax_backward(
                       dnnl::softmax_backward::primitive_desc({md, md, 1}, rt.eng, fwd)))
                 : dnnl::primitive(dnnl::softmax_forward(fwd));
  }
  return rt.softmax.emplace(key, p).first->second;
}

memory::desc Rows3(int64_t outer, int64_t d, int64_t inner) {
  return memory::desc({outer, d, inner}, memory::data_type::f32, memory::format_tag::abc);
}

}  // namespace

void Softmax(const float* x, float* y, int64_t outer, int64_t d, int64_t inner, bool log) {
  Runtime& rt = Rt();
  std::lock_guard<std::mutex> lock(rt.mu);
  const memory::desc md = Rows3(outer, d, inner);
  SoftmaxPrimitive(rt, md, outer, d, inner, log, false)
      .execute(rt.strm, {{DNNL_ARG_SRC, Mem(md, x)}, {DNNL_ARG_DST, Mem(md, y)}});
  rt.strm.wait();
}

void SoftmaxBackward(const float* y, const float* dy, float* dx, int64_t outer, int64_t d,
                     int64_t inner, bool log) {
  Runtime& rt = Rt();
  std::lock_guard<std::mutex> lock(rt.mu);
  const memory::desc md = Rows3(outer, d, inner);
  SoftmaxPrimitive(rt, md, outer, d, inner, log, true)
      .execute(rt.strm, {{DNNL_ARG_DST, Mem(md, y)},
                         {DNNL_ARG_DIFF_DST, Mem(md, dy)},
                         {DNNL_ARG_DIFF_SRC, Mem(md, dx)}});
  rt.strm.wait();
}

}  // namespace cpu
}  // namespace oneflow
