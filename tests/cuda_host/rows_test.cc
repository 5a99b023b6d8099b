// The row kernels (core/kernels/cuda/kernels/{norm,softmax,cross_entropy,embedding}.cuh) on the
// host stand-in against naive host references in double: row lengths that reach every branch
// (1, 3, 4, 31, 32, 33, 127, 768, 1024, 1025, 4097: one pack or many per lane, partial packs of
// the warp, the block kernels), 16-byte packs and misaligned rows (no packs), rows of -inf and
// NaN, float32, float64, float16 and bfloat16.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/kernels/cuda/kernels/cross_entropy.cuh"
#include "core/kernels/cuda/kernels/embedding.cuh"
#include "core/kernels/cuda/kernels/norm.cuh"
#include "core/kernels/cuda/kernels/softmax.cuh"
#include "tests/cuda_host/standin_test_util.h"

namespace oneflow {
namespace cuda {
namespace {

using cuda_host::FromDouble;
using cuda_host::ToDouble;

const double kInf = std::numeric_limits<double>::infinity();
const double kNan = std::numeric_limits<double>::quiet_NaN();

// ---- element types: conversions and tolerances

double ToDouble(float v) { return v; }

template <typename T>
double Tol() {
  if constexpr (std::is_same_v<T, double>) return 1e-10;
  if constexpr (std::is_same_v<T, float>) return 2e-5;
  if constexpr (std::is_same_v<T, __half>) return 4e-3;
  return 3e-2;  // bfloat16: 8 bits of mantissa
}

template <typename T>
const char* Name() {
  if constexpr (std::is_same_v<T, double>) return "float64";
  if constexpr (std::is_same_v<T, float>) return "float32";
  if constexpr (std::is_same_v<T, __half>) return "float16";
  return "bfloat16";
}

// |got - want| <= tol * (scale + |want|), NaN where want is NaN, the same infinity. Checked
// per element without Catch's bookkeeping unless it fails (the runs under ThreadSanitizer
// stay short).
void Near(double got, double want, double tol, double scale, const std::string& where) {
  bool ok;
  if (std::isnan(want)) {
    ok = std::isnan(got);
  } else if (std::isinf(want)) {
    ok = got == want;
  } else {
    ok = std::abs(got - want) <= tol * (scale + std::abs(want));
  }
  if (!ok) FAIL_CHECK(where << ": got " << got << ", want " << want);
}

// Deterministic values in [lo, hi).
std::vector<double> Values(int64_t n, uint64_t seed, double lo = -2, double hi = 2) {
  std::vector<double> v(n);
  uint64_t s = seed * 6364136223846793005ull + 1442695040888963407ull;
  for (auto& e : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    e = lo + (hi - lo) * static_cast<double>(s >> 11) / static_cast<double>(1ull << 53);
  }
  return v;
}

// A device buffer of T holding v, starting `offset` elements into its storage (offset 1: rows
// not 16-byte aligned, so the kernels take their no-pack path).
template <typename T>
struct Buf {
  std::vector<T> storage;
  int offset;
  Buf(const std::vector<double>& v, int off) : storage(v.size() + off + 8), offset(off) {
    for (size_t i = 0; i < v.size(); ++i) storage[off + i] = FromDouble<T>(v[i]);
  }
  Buf(size_t n, int off) : storage(n + off + 8, FromDouble<T>(-7.0)), offset(off) {}
  T* p() { return storage.data() + offset; }
  double at(size_t i) const { return ToDouble(storage[offset + i]); }
  // The values as the kernel sees them (rounded to T).
  std::vector<double> rounded(size_t n) const {
    std::vector<double> r(n);
    for (size_t i = 0; i < n; ++i) r[i] = at(i);
    return r;
  }
};

// Row r of `rows` is replaced by a special row: 0 plain, 1 all -inf, 2 one NaN, 3 one +inf.
std::vector<double> RowsWithSpecials(int64_t rows, int64_t d, uint64_t seed) {
  std::vector<double> v = Values(rows * d, seed);
  if (rows > 1) {
    for (int64_t j = 0; j < d; ++j) v[1 * d + j] = -kInf;
  }
  if (rows > 2) v[2 * d + d / 2] = kNan;
  if (rows > 3) v[3 * d + d / 3] = kInf;
  return v;
}

const int64_t kLengths[] = {1, 3, 4, 31, 32, 33, 127, 768, 1024, 1025, 4097};

template <typename T>
std::vector<int64_t> LengthsFor() {
  if constexpr (std::is_same_v<T, float>) {
    return {std::begin(kLengths), std::end(kLengths)};
  } else {
    return {1, 4, 33, 768, 1025};
  }
}

// ---------------------------------------------------------------- layer_norm / rms_norm

template <typename T>
void CheckNorm(int64_t rows, int64_t d, int off, bool rms, bool specials) {
  const std::string where = std::string(rms ? "rms_norm " : "layer_norm ") + Name<T>() + " [" +
                            std::to_string(rows) + ", " + std::to_string(d) + "] offset " +
                            std::to_string(off) + (specials ? " specials" : "");
  const double eps = 1e-5, tol = Tol<T>();
  Buf<T> x(specials ? RowsWithSpecials(rows, d, 1) : Values(rows * d, 1), off);
  Buf<T> w(Values(d, 2, 0.5, 1.5), off), b(Values(d, 3), off), dy(Values(rows * d, 4), off);
  Buf<T> y(rows * d, off), mean(rows, 0), rstd(rows, 0), dx(rows * d, off), dw(d, 0), db(d, 0);
  norm::Forward<T>(x.p(), w.p(), rms ? nullptr : b.p(), y.p(), rms ? nullptr : mean.p(), rstd.p(),
                   rows, d, eps, rms, nullptr);
  const std::vector<double> xv = x.rounded(rows * d), wv = w.rounded(d), bv = b.rounded(d),
                            dyv = dy.rounded(rows * d);
  std::vector<double> m(rows), rs(rows);
  for (int64_t r = 0; r < rows; ++r) {
    double s = 0, q = 0;
    for (int64_t j = 0; j < d; ++j) s += xv[r * d + j];
    m[r] = rms ? 0 : s / d;
    for (int64_t j = 0; j < d; ++j) q += (xv[r * d + j] - m[r]) * (xv[r * d + j] - m[r]);
    rs[r] = 1 / std::sqrt(q / d + eps);
    if (!rms) Near(mean.at(r), m[r], tol, 1, where + " mean row " + std::to_string(r));
    Near(rstd.at(r), rs[r], tol, 0, where + " rstd row " + std::to_string(r));
    for (int64_t j = 0; j < d; ++j) {
      const double want = (xv[r * d + j] - m[r]) * rs[r] * wv[j] + (rms ? 0 : bv[j]);
      Near(y.at(r * d + j), want, tol, 1, where + " y at " + std::to_string(r * d + j));
    }
  }
  // Backward from the kernel's own statistics (as the op does).
  const std::vector<double> mk = mean.rounded(rows), rk = rstd.rounded(rows);
  norm::BackwardInput<T>(dy.p(), x.p(), rms ? nullptr : mean.p(), rstd.p(), w.p(), dx.p(), rows, d,
                         rms, nullptr);
  std::vector<Acc<T>> partial(norm::ParamPartialElems(rows, d));
  norm::BackwardParams<T>(dy.p(), x.p(), rms ? nullptr : mean.p(), rstd.p(), dw.p(),
                          rms ? nullptr : db.p(), rows, d, rms, partial.data(), nullptr);
  std::vector<double> sw(d, 0), sb(d, 0);
  for (int64_t r = 0; r < rows; ++r) {
    const double mr = rms ? 0 : mk[r];
    double sg = 0, sgx = 0;
    for (int64_t j = 0; j < d; ++j) {
      const double xh = (xv[r * d + j] - mr) * rk[r], g = dyv[r * d + j] * wv[j];
      sg += g;
      sgx += g * xh;
      sw[j] += dyv[r * d + j] * xh;
      sb[j] += dyv[r * d + j];
    }
    // The sums' rounding follows their terms' size: scale by sqrt(d) times the row's terms.
    for (int64_t j = 0; j < d; ++j) {
      const double xh = (xv[r * d + j] - mr) * rk[r], g = dyv[r * d + j] * wv[j];
      const double want = rk[r] * (g - (rms ? 0 : sg / d) - xh * sgx / d);
      Near(dx.at(r * d + j), want, tol, 4 * (std::isfinite(rk[r]) ? rk[r] : 1),
           where + " dx at " + std::to_string(r * d + j));
    }
  }
  for (int64_t j = 0; j < d; ++j) {
    Near(dw.at(j), sw[j], tol, 2.0 * rows, where + " dw at " + std::to_string(j));
    if (!rms) Near(db.at(j), sb[j], tol, 2.0 * rows, where + " db at " + std::to_string(j));
  }
}

TEMPLATE_TEST_CASE("layer_norm and rms_norm kernels match the host", "[rows][norm]", float, double,
                   __half, __nv_bfloat16) {
  for (int64_t d : LengthsFor<TestType>()) {
    for (int off : {0, 1}) {
      for (bool rms : {false, true}) CheckNorm<TestType>(d > 1024 ? 2 : 5, d, off, rms, false);
    }
  }
}

TEST_CASE("layer_norm kernels: rows of -inf, NaN and +inf give the host's NaN", "[rows][norm]") {
  for (int64_t d : {4, 33, 1025}) CheckNorm<float>(4, d, 0, false, true);
}

TEST_CASE("layer_norm weight gradient: many row tiles, rows 0", "[rows][norm]") {
  CheckNorm<float>(300, 40, 0, false, false);  // 5 tiles of 64 rows
  // No rows: dw and db are zeros.
  std::vector<float> dw(7, 1.f), db(7, 1.f);
  std::vector<float> partial(norm::ParamPartialElems(0, 7));
  norm::BackwardParams<float>(nullptr, nullptr, nullptr, nullptr, dw.data(), db.data(), 0, 7, false,
                              partial.data(), nullptr);
  for (int j = 0; j < 7; ++j) CHECK((dw[j] == 0.f && db[j] == 0.f));
}

// ---------------------------------------------------------------- softmax / log_softmax

template <typename T>
void CheckSoftmax(int64_t outer, int64_t d, int64_t inner, int off, bool log, bool specials) {
  const std::string where = std::string(log ? "log_softmax " : "softmax ") + Name<T>() + " (" +
                            std::to_string(outer) + ", " + std::to_string(d) + ", " +
                            std::to_string(inner) + ") offset " + std::to_string(off);
  const double tol = Tol<T>();
  const int64_t n = outer * d * inner;
  std::vector<double> v = Values(n, 5, -6, 6);
  if (specials && inner == 1) v = RowsWithSpecials(outer, d, 5);
  Buf<T> x(v, off), y(n, off), dy(Values(n, 6), off), dx(n, off);
  softmax::Forward<T>(x.p(), y.p(), outer, d, inner, log, nullptr);
  const std::vector<double> xv = x.rounded(n);
  std::vector<double> want(n);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      auto at = [&](int64_t k) { return (o * d + k) * inner + i; };
      double mx = -kInf;
      for (int64_t k = 0; k < d; ++k) mx = mx < xv[at(k)] ? xv[at(k)] : mx;  // NaN ignored
      if (std::isinf(mx)) mx = 0;
      double sum = 0;
      for (int64_t k = 0; k < d; ++k) sum += std::exp(xv[at(k)] - mx);
      for (int64_t k = 0; k < d; ++k) {
        want[at(k)] = log ? xv[at(k)] - mx - std::log(sum) : std::exp(xv[at(k)] - mx) / sum;
        Near(y.at(at(k)), want[at(k)], tol, log ? 1 : 0.1,
             where + " y at " + std::to_string(at(k)));
      }
    }
  }
  // Backward from the kernel's y.
  const std::vector<double> yv = y.rounded(n), dyv = dy.rounded(n);
  softmax::Backward<T>(y.p(), dy.p(), dx.p(), outer, d, inner, log, nullptr);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      auto at = [&](int64_t k) { return (o * d + k) * inner + i; };
      double s = 0;
      for (int64_t k = 0; k < d; ++k) s += log ? dyv[at(k)] : dyv[at(k)] * yv[at(k)];
      for (int64_t k = 0; k < d; ++k) {
        const double g = log ? dyv[at(k)] - std::exp(yv[at(k)]) * s : yv[at(k)] * (dyv[at(k)] - s);
        Near(dx.at(at(k)), g, tol, log ? 2 : 1, where + " dx at " + std::to_string(at(k)));
      }
    }
  }
}

TEMPLATE_TEST_CASE("softmax and log_softmax kernels match the host", "[rows][softmax]", float,
                   double, __half, __nv_bfloat16) {
  for (int64_t d : LengthsFor<TestType>()) {
    for (int off : {0, 1}) {
      for (bool log : {false, true})
        CheckSoftmax<TestType>(d > 1024 ? 2 : 5, d, 1, off, log, false);
    }
  }
  // Columns (inner > 1): tails of 32 columns, one and many lanes down the dim.
  for (int64_t inner : {2, 33}) {
    for (int64_t d : {1, 9, 40}) {
      for (bool log : {false, true}) CheckSoftmax<TestType>(3, d, inner, 0, log, false);
    }
  }
}

TEST_CASE("softmax kernels: rows of -inf, NaN and +inf as the host", "[rows][softmax]") {
  for (int64_t d : {4, 33, 768, 1025, 13000}) {  // 13000: a long row not kept in shared memory
    for (bool log : {false, true}) CheckSoftmax<float>(4, d, 1, 0, log, true);
  }
}

// ---------------------------------------------------------------- cross_entropy

template <typename T>
void CheckCrossEntropy(int64_t rows, int64_t c, int off, int reduction, double smoothing,
                       bool specials) {
  using A = Acc<T>;
  const std::string where = std::string("cross_entropy ") + Name<T>() + " [" +
                            std::to_string(rows) + ", " + std::to_string(c) + "] reduction " +
                            std::to_string(reduction) + " smoothing " + std::to_string(smoothing);
  const double tol = Tol<T>();
  const int64_t ignore = -100;
  Buf<T> x(specials ? RowsWithSpecials(rows, c, 7) : Values(rows * c, 7, -5, 5), off);
  std::vector<int64_t> target(rows);
  for (int64_t r = 0; r < rows; ++r) target[r] = r % 4 == 1 ? ignore : (r * 7 + 3) % c;
  const int64_t outs = reduction == cross_entropy::kNone ? rows : 1;
  Buf<T> y(outs, 0), dy(Values(outs, 8), 0), dx(rows * c, off);
  std::vector<A> lse(rows), loss_rows(rows);
  unsigned long long bad = ~0ull;
  cross_entropy::Forward<T>(x.p(), target.data(), rows, c, ignore, smoothing, reduction, y.p(),
                            lse.data(), loss_rows.data(), &bad, nullptr);
  CHECK(bad == ~0ull);
  const std::vector<double> xv = x.rounded(rows * c);
  std::vector<double> l(rows), loss(rows, 0);
  double total = 0;
  int64_t count = 0;
  for (int64_t r = 0; r < rows; ++r) {
    double mx = -kInf, sum = 0, sx = 0;
    for (int64_t j = 0; j < c; ++j) mx = mx < xv[r * c + j] ? xv[r * c + j] : mx;
    if (std::isinf(mx)) mx = 0;
    for (int64_t j = 0; j < c; ++j) sum += std::exp(xv[r * c + j] - mx), sx += xv[r * c + j];
    l[r] = mx + std::log(sum);
    Near(lse[r], l[r], tol, 1, where + " lse row " + std::to_string(r));
    if (target[r] == ignore) continue;
    loss[r] = l[r] - (1 - smoothing) * xv[r * c + target[r]];
    if (smoothing != 0) loss[r] -= smoothing / c * sx;  // no 0 * inf
    total += loss[r];
    ++count;
  }
  if (reduction == cross_entropy::kNone) {
    for (int64_t r = 0; r < rows; ++r)
      Near(y.at(r), loss[r], tol, 1, where + " loss row " + std::to_string(r));
  } else {
    Near(y.at(0), reduction == cross_entropy::kMean ? total / count : total, tol, 1,
         where + " loss");
  }
  int64_t kept = -1;
  const std::vector<double> dyv = dy.rounded(outs);
  cross_entropy::Backward<T>(dy.p(), x.p(), target.data(), lse.data(), rows, c, ignore, smoothing,
                             reduction, &kept, dx.p(), nullptr);
  for (int64_t r = 0; r < rows; ++r) {
    double scale = 0;
    if (target[r] != ignore) {
      scale = dyv[reduction == cross_entropy::kNone ? r : 0];
      if (reduction == cross_entropy::kMean) scale /= count;
    }
    for (int64_t j = 0; j < c; ++j) {
      const double p = std::exp(xv[r * c + j] - static_cast<double>(lse[r]));
      const double want = scale * (p - (j == target[r] ? 1 - smoothing : 0) - smoothing / c);
      Near(dx.at(r * c + j), want, tol, 1, where + " dx at " + std::to_string(r * c + j));
    }
  }
}

TEMPLATE_TEST_CASE("cross_entropy kernels match the host", "[rows][cross_entropy]", float, double,
                   __half, __nv_bfloat16) {
  for (int64_t c : LengthsFor<TestType>()) {
    for (int reduction : {0, 1, 2}) {
      CheckCrossEntropy<TestType>(c > 1024 ? 3 : 6, c, reduction == 1 ? 1 : 0, reduction,
                                  reduction == 2 ? 0.1 : 0.0, false);
    }
  }
}

TEST_CASE("cross_entropy kernels: rows of -inf, NaN and +inf, no rows, a bad target",
          "[rows][cross_entropy]") {
  for (int64_t c : {4, 33, 1025}) CheckCrossEntropy<float>(4, c, 0, 0, 0.0, true);
  // No rows: 'sum' 0, 'mean' 0 / 0.
  std::vector<float> y(1, 5.f);
  unsigned long long bad = ~0ull;
  for (int reduction : {1, 2}) {
    cross_entropy::Forward<float>(nullptr, nullptr, 0, 3, -100, 0.0, reduction, y.data(), nullptr,
                                  nullptr, &bad, nullptr);
    if (reduction == 1) CHECK(y[0] == 0.f);
    if (reduction == 2) CHECK(std::isnan(y[0]));
  }
  // Targets 5 and -2 of 4 classes: the first bad row is recorded, no read outside the row.
  std::vector<float> x(3 * 4, 0.5f), lse(3), rows(3);
  std::vector<int64_t> target = {1, 5, -2};
  cross_entropy::Forward<float>(x.data(), target.data(), 3, 4, -100, 0.0, 1, y.data(), lse.data(),
                                rows.data(), &bad, nullptr);
  CHECK(bad == 1);
}

// ---------------------------------------------------------------- embedding

// An element of E (any trivially copyable type) from a number, every byte of it depending on v.
template <typename E>
E MakeElem(uint64_t v) {
  unsigned char bytes[sizeof(E)];
  for (size_t i = 0; i < sizeof(E); ++i) bytes[i] = static_cast<unsigned char>(v * 31 + i * 7);
  E e;
  std::memcpy(&e, bytes, sizeof(E));
  return e;
}
template <typename E>
bool SameElem(const E& a, const E& b) {
  return std::memcmp(&a, &b, sizeof(E)) == 0;
}

template <typename E>
void CheckEmbedding(int64_t outer, int64_t n, int64_t inner, int64_t count) {
  const std::string where = "index_select (" + std::to_string(outer) + ", " + std::to_string(n) +
                            ", " + std::to_string(inner) + ") count " + std::to_string(count);
  std::vector<int64_t> index(count);
  for (int64_t j = 0; j < count; ++j) index[j] = (j * 5 + 2) % n - (j % 3 == 0 ? n : 0);
  std::vector<E> x(outer * n * inner), y(outer * count * inner, MakeElem<E>(999));
  for (size_t i = 0; i < x.size(); ++i) x[i] = MakeElem<E>(i + 1);
  embedding::Forward<E, int64_t>(x.data(), y.data(), index.data(), 1, count, outer, n, inner,
                                 nullptr);
  for (int64_t i = 0; i < outer; ++i) {
    for (int64_t j = 0; j < count; ++j) {
      const int64_t t = index[j] < 0 ? index[j] + n : index[j];
      for (int64_t k = 0; k < inner; ++k) {
        if (!SameElem(y[(i * count + j) * inner + k], x[(i * n + t) * inner + k])) {
          FAIL_CHECK(where << " at (" << i << ", " << j << ", " << k << ")");
        }
      }
    }
  }
}

TEST_CASE("index_select (embedding) kernels copy the named rows", "[rows][embedding]") {
  CheckEmbedding<uint32_t>(1, 7, 1, 9);    // short rows: a thread per element
  CheckEmbedding<uint32_t>(2, 5, 31, 4);   // still short
  CheckEmbedding<uint16_t>(1, 9, 33, 12);  // a warp per row, a tail lane
  CheckEmbedding<uint64_t>(3, 4, 100, 5);
  CheckEmbedding<row::Pack<uint32_t, 4>>(1, 6, 48, 7);  // 16-byte packs (192 float32 per row)
}

template <typename T>
void CheckEmbeddingGrad(int64_t outer, int64_t n, int64_t inner, int64_t count, int stride) {
  const std::string where = std::string("index_select_grad ") + Name<T>() + " (" +
                            std::to_string(outer) + ", " + std::to_string(n) + ", " +
                            std::to_string(inner) + ") count " + std::to_string(count);
  // Repeats, negative values, one out of range (dropped; reported by the check kernel).
  std::vector<int32_t> index(count * stride, 99);
  for (int64_t j = 0; j < count; ++j) {
    index[j * stride] = static_cast<int32_t>((j * j + 1) % n - (j % 4 == 0 ? n : 0));
  }
  if (count > 2) index[2 * stride] = static_cast<int32_t>(n);
  Buf<T> g(Values(outer * count * inner, 9), 0), dx(outer * n * inner, 0);
  for (auto& e : dx.storage) e = FromDouble<T>(0.0);
  std::vector<int64_t> keys(count), pos(count);
  embedding::SortKeys<int32_t>(index.data(), stride, count, n, keys.data(), pos.data(), nullptr);
  // CUB's stable radix sort on the GPU; a stable sort here.
  std::vector<int64_t> order(count);
  for (int64_t j = 0; j < count; ++j) order[j] = j;
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return keys[a] < keys[b]; });
  std::vector<int64_t> sk(count), sp(count);
  for (int64_t j = 0; j < count; ++j) sk[j] = keys[order[j]], sp[j] = pos[order[j]];
  embedding::Backward<T>(g.p(), sk.data(), sp.data(), count, outer, n, inner, dx.p(), nullptr);
  const std::vector<double> gv = g.rounded(outer * count * inner);
  std::vector<double> want(outer * n * inner, 0.0);
  for (int64_t i = 0; i < outer; ++i) {
    for (int64_t j = 0; j < count; ++j) {
      int64_t t = index[j * stride];
      if (t < -n || t >= n) continue;
      if (t < 0) t += n;
      for (int64_t k = 0; k < inner; ++k) {
        want[(i * n + t) * inner + k] += gv[(i * count + j) * inner + k];
      }
    }
  }
  for (size_t e = 0; e < want.size(); ++e) {
    Near(dx.at(e), want[e], Tol<T>(), 2, where + " dx at " + std::to_string(e));
  }
}

TEMPLATE_TEST_CASE("index_select_grad kernels add each index's rows", "[rows][embedding]", float,
                   double, __half, __nv_bfloat16) {
  CheckEmbeddingGrad<TestType>(1, 7, 40, 23, 1);
  CheckEmbeddingGrad<TestType>(2, 5, 3, 9, 2);   // a strided index
  CheckEmbeddingGrad<TestType>(1, 1, 33, 5, 1);  // every index the same row
}

TEST_CASE("index_select_grad sums in position order: the CPU's float32 bits", "[rows][embedding]") {
  // Values whose float sum depends on the order: the kernel must add in position order.
  const int64_t count = 6, inner = 32;
  std::vector<int32_t> index = {1, 0, 1, 1, 0, 1};
  std::vector<float> g(count * inner);
  const float vals[] = {1e8f, 3.f, -1e8f, 0.5f, 7.f, 1.25f};
  for (int64_t j = 0; j < count; ++j)
    for (int64_t k = 0; k < inner; ++k) g[j * inner + k] = vals[j] * (k + 1);
  std::vector<int64_t> keys(count), pos(count);
  embedding::SortKeys<int32_t>(index.data(), 1, count, 2, keys.data(), pos.data(), nullptr);
  std::vector<int64_t> order = {1, 4, 0, 2, 3, 5};  // stable order by key
  std::vector<int64_t> sk(count), sp(count);
  for (int64_t j = 0; j < count; ++j) sk[j] = keys[order[j]], sp[j] = pos[order[j]];
  std::vector<float> dx(2 * inner, -1.f);
  embedding::Backward<float>(g.data(), sk.data(), sp.data(), count, 1, 2, inner, dx.data(),
                             nullptr);
  for (int64_t k = 0; k < inner; ++k) {
    float a = 0.f, b = 0.f;
    for (int64_t j = 0; j < count; ++j) (index[j] == 0 ? a : b) += g[j * inner + k];
    CHECK(dx[k] == a);
    CHECK(dx[inner + k] == b);
  }
}

}  // namespace
}  // namespace cuda
}  // namespace oneflow
