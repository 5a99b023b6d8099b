// The elementwise kernels (core/kernels/cuda/kernels/elementwise.cuh) on the host stand-in,
// launcher included, against naive host loops: every size of kSizes, fp32/fp16/bf16/fp64,
// contiguous (the vectorised kernel, its tail), misaligned pointers and views (the strided
// kernel, 32- and 64-bit), broadcasts (scalars by value, rows through strides), bool operands,
// zero inputs, the transpose tiles, the grid cap with its grid-stride loops, and FastDivmod.
// Each case also asserts which kernel the launcher picked, so every branch is reached.
#include "core/kernels/cuda/kernels/elementwise.cuh"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "tests/cuda_host/standin_test_util.h"

namespace oneflow {
namespace cuda {
namespace {

using cuda_host::FromDouble;
using cuda_host::ToDouble;

const int64_t kSizes[] = {0, 1, 3, 4, 5, 31, 32, 33, 127, 768, 1024, 1025, 4097};

// A view over a buffer: element (i_0, ..., i_k) at offset + sum i_d * strides[d].
struct View {
  std::vector<int64_t> sizes, strides;
  int64_t offset = 0;
  int64_t Numel() const {
    int64_t n = 1;
    for (int64_t s : sizes) n *= s;
    return n;
  }
  // Offset of out's linear index i (row-major over out_sizes), numpy-broadcast.
  int64_t At(const std::vector<int64_t>& out_sizes, int64_t i) const {
    int64_t off = offset;
    const int lead = static_cast<int>(out_sizes.size() - sizes.size());
    for (int d = static_cast<int>(out_sizes.size()) - 1; d >= 0; --d) {
      const int64_t idx = i % out_sizes[d];
      i /= out_sizes[d];
      const int j = d - lead;
      if (j >= 0 && sizes[j] != 1) off += idx * strides[j];
    }
    return off;
  }
};

std::vector<int64_t> Contiguous(const std::vector<int64_t>& sizes) {
  std::vector<int64_t> st(sizes.size());
  int64_t s = 1;
  for (int d = static_cast<int>(sizes.size()) - 1; d >= 0; --d) st[d] = s, s *= sizes[d];
  return st;
}

View ContiguousView(std::vector<int64_t> sizes, int64_t offset = 0) {
  View v{sizes, Contiguous(sizes), offset};
  return v;
}

template <typename T>
ElementwiseOperand Op(std::vector<T>& buf, const View& v) {
  return {buf.data() + v.offset, static_cast<int>(v.sizes.size()), v.sizes.data(),
          v.strides.data()};
}

template <typename T>
std::vector<T> Buffer(int64_t n, int seed) {
  std::vector<T> b(static_cast<size_t>(n > 0 ? n : 1));
  for (int64_t i = 0; i < n; ++i) b[i] = FromDouble<T>(((i * 7 + seed * 13) % 41 - 20) * 0.5);
  return b;
}

// a * b + c in the computing type (float for the half types), as the kernels compute it.
struct FmaF {
  template <typename A>
  __device__ A operator()(A a, A b, A c) const {
    return a * b + c;
  }
};
template <typename T>
T RefFma(T a, T b, T c) {
  using A = std::conditional_t<std::is_same_v<T, double>, double, float>;
  const A r =
      static_cast<A>(ToDouble(a)) * static_cast<A>(ToDouble(b)) + static_cast<A>(ToDouble(c));
  return FromDouble<T>(r);
}

// Runs out = a * b + c through LaunchElementwise on the given views and compares every
// element (and that out's other elements are untouched) with the host loop.
template <typename T>
void CheckFma(const View& vo, const View& va, const View& vb, const View& vc,
              ElementwiseKernel expected, int sms = 132) {
  int64_t span = 16;  // past the farthest element of any view
  for (const View* v : {&vo, &va, &vb, &vc}) {
    int64_t last = v->offset;
    for (size_t d = 0; d < v->sizes.size(); ++d) last += (v->sizes[d] - 1) * v->strides[d];
    span = std::max(span, last + 1);
  }
  std::vector<T> a = Buffer<T>(span, 1), b = Buffer<T>(span, 2), c = Buffer<T>(span, 3);
  std::vector<T> out(span, FromDouble<T>(-99)), before = out;
  ElementwiseOperand ops[4] = {Op(out, vo), Op(a, va), Op(b, vb), Op(c, vc)};
  ElementwiseKernel picked;
  REQUIRE(LaunchElementwise<StridedKernels::k32, T, T, T, T>(FmaF{}, ops, sms, nullptr, &picked) ==
          ElementwiseStatus::kDone);
  const int64_t n = vo.Numel();
  if (n > 0) CHECK(picked == expected);
  std::vector<bool> written(span, false);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t o = vo.At(vo.sizes, i);
    written[o] = true;
    const T ref = RefFma(a[va.At(vo.sizes, i)], b[vb.At(vo.sizes, i)], c[vc.At(vo.sizes, i)]);
    if (std::memcmp(&out[o], &ref, sizeof(T)) != 0) {
      FAIL_CHECK("element " << i << " of " << n << ": " << ToDouble(out[o]) << " vs "
                            << ToDouble(ref));
      return;
    }
  }
  for (int64_t o = 0; o < span; ++o) {
    if (!written[o] && std::memcmp(&out[o], &before[o], sizeof(T)) != 0) {
      FAIL_CHECK("offset " << o << " outside out's view was written");
      return;
    }
  }
}

template <typename T>
void CheckAllLayouts() {
  constexpr int kVec = VecWidth<T, T, T, T>();
  for (int64_t n : kSizes) {
    INFO("n = " << n);
    const View full = ContiguousView({n});
    // Contiguous and aligned: the vectorised kernel, with its tail.
    CheckFma<T>(full, full, full, full, ElementwiseKernel::kVec);
    // Scalars (one element, by value) beside contiguous operands.
    const View scalar = ContiguousView({}, 5);
    CheckFma<T>(full, full, scalar, ContiguousView({1}, 9), ElementwiseKernel::kVec);
    // A misaligned input or output: the strided kernel (1-D, no division).
    const ElementwiseKernel unaligned =
        kVec > 1 ? ElementwiseKernel::kStrided32 : ElementwiseKernel::kVec;
    CheckFma<T>(full, ContiguousView({n}, 1), full, full,
                n > 1 ? unaligned : ElementwiseKernel::kVec);
    CheckFma<T>(ContiguousView({n}, 3), full, scalar, full,
                n > 0 ? unaligned : ElementwiseKernel::kVec);
    // Every other element of a's buffer.
    CheckFma<T>(full, View{{n}, {2}, 0}, full, full,
                n > 1 ? ElementwiseKernel::kStrided32 : ElementwiseKernel::kVec);
  }
  // Broadcasts and views in 2-D and 3-D: rows + a row vector, a column, a transposed operand,
  // a transposed output.
  for (int64_t rows : {1, 3, 33}) {
    for (int64_t cols : {1, 4, 5, 127}) {
      INFO("rows = " << rows << ", cols = " << cols);
      const View m = ContiguousView({rows, cols});
      const ElementwiseKernel strided =
          rows > 1 && cols > 1 ? ElementwiseKernel::kStrided32 : ElementwiseKernel::kVec;
      CheckFma<T>(m, m, ContiguousView({cols}), ContiguousView({rows, 1}), strided);
      const View t{{rows, cols}, {1, rows}, 0};  // a [cols, rows] buffer seen transposed
      CheckFma<T>(m, t, m, m, strided);
      CheckFma<T>(t, m, m, ContiguousView({}), strided);
      // 3-D, sliced on every dim: [2, rows, cols] out of a [3, rows + 2, cols + 3] buffer.
      const std::vector<int64_t> big = {3, rows + 2, cols + 3};
      const View slice{{2, rows, cols}, Contiguous(big), 1 * (cols + 3) + 2};
      CheckFma<T>(ContiguousView({2, rows, cols}), slice, ContiguousView({cols}), slice,
                  ElementwiseKernel::kStrided32);
    }
  }
}

TEST_CASE("elementwise kernels match the host loops, float32", "[elementwise]") {
  CheckAllLayouts<float>();
}
TEST_CASE("elementwise kernels match the host loops, float16", "[elementwise]") {
  CheckAllLayouts<__half>();
}
TEST_CASE("elementwise kernels match the host loops, bfloat16", "[elementwise]") {
  CheckAllLayouts<__nv_bfloat16>();
}
TEST_CASE("elementwise kernels match the host loops, float64", "[elementwise]") {
  CheckAllLayouts<double>();
}

TEST_CASE("the grid cap leaves the rest to the grid-stride loops", "[elementwise]") {
  // One SM: at most kBlocksPerSm blocks, each thread loops.
  const int64_t n = 2 * kBlocksPerSm * kElementwiseThreads * kVecUnroll * 4 + 13;
  const View full = ContiguousView({n});
  CheckFma<float>(full, full, full, full, ElementwiseKernel::kVec, /*sms=*/1);
  CheckFma<float>(full, ContiguousView({n}, 1), full, full, ElementwiseKernel::kStrided32, 1);
  CHECK(ElementwiseBlocks(1000000, 512, 1) == kBlocksPerSm);
  CHECK(ElementwiseBlocks(0, 512, 4) == 1);
  CHECK(ElementwiseBlocks(1025, 512, 4) == 3);
}

// Mixed operand types: a bool condition and a bool output (the vector width is the widest
// type's), and no input at all.
struct WhereF {
  template <typename A>
  __device__ A operator()(bool c, A a, A b) const {
    return c ? a : b;
  }
};
struct GreaterF {
  template <typename A>
  __device__ bool operator()(A a, A b) const {
    return a > b;
  }
};
struct SevenF {
  __device__ float operator()() const { return 7.f; }
};

TEST_CASE("bool operands, bool outputs and zero inputs", "[elementwise]") {
  for (int64_t n : kSizes) {
    INFO("n = " << n);
    std::vector<uint8_t> cbuf(n + 1);
    for (int64_t i = 0; i < n; ++i) cbuf[i] = (i % 3 == 0);
    std::vector<float> a = Buffer<float>(n, 1), b = Buffer<float>(n, 2), out(n + 1, -1.f);
    const View v = ContiguousView({n});
    bool* cond = reinterpret_cast<bool*>(cbuf.data());
    ElementwiseOperand ops[4] = {{out.data(), 1, v.sizes.data(), v.strides.data()},
                                 {cond, 1, v.sizes.data(), v.strides.data()},
                                 {a.data(), 1, v.sizes.data(), v.strides.data()},
                                 {b.data(), 0, nullptr, nullptr}};
    ElementwiseKernel picked;
    REQUIRE(LaunchElementwise<StridedKernels::k32, float, bool, float, float>(
                WhereF{}, ops, 132, nullptr, &picked) == ElementwiseStatus::kDone);
    int64_t wrong = 0;
    for (int64_t i = 0; i < n; ++i) wrong += out[i] != (cbuf[i] ? a[i] : b[0]);
    if (n > 0) CHECK(picked == ElementwiseKernel::kVec);

    std::vector<uint8_t> gt(n + 1, 2);
    ElementwiseOperand gops[3] = {{gt.data(), 1, v.sizes.data(), v.strides.data()},
                                  {a.data(), 1, v.sizes.data(), v.strides.data()},
                                  {b.data(), 1, v.sizes.data(), v.strides.data()}};
    REQUIRE(LaunchElementwise<StridedKernels::k32, bool, float, float>(
                GreaterF{}, gops, 132, nullptr) == ElementwiseStatus::kDone);
    for (int64_t i = 0; i < n; ++i) wrong += gt[i] != (a[i] > b[i] ? 1 : 0);
    REQUIRE(gt[n] == 2);

    std::vector<float> filled(n + 1, 0.f);
    ElementwiseOperand fops[1] = {{filled.data(), 1, v.sizes.data(), v.strides.data()}};
    REQUIRE(LaunchElementwise<StridedKernels::kNone, float>(SevenF{}, fops, 132, nullptr) ==
            ElementwiseStatus::kDone);
    for (int64_t i = 0; i < n; ++i) wrong += filled[i] != 7.f;
    CHECK(wrong == 0);
    CHECK(filled[n] == 0.f);
  }
}

struct CopyF {
  template <typename A>
  __device__ A operator()(A v) const {
    return v;
  }
};

TEST_CASE("what the launcher refuses and the 64-bit strided kernel", "[elementwise]") {
  std::vector<float> x(64, 1.f), y(64, 0.f);
  // Nine dims that cannot merge: too many.
  std::vector<int64_t> sizes(9, 2), strides(9);
  for (int d = 0; d < 9; ++d) strides[d] = int64_t{1} << (2 * (8 - d));  // 4^(8-d): no merging
  std::vector<float> big(1 << 17, 0.f), out9(1 << 9);
  const std::vector<int64_t> cst = Contiguous(sizes);
  ElementwiseOperand ops9[2] = {{out9.data(), 9, sizes.data(), cst.data()},
                                {big.data(), 9, sizes.data(), strides.data()}};
  CHECK(LaunchElementwise<StridedKernels::k32, float, float>(CopyF{}, ops9, 1, nullptr) ==
        ElementwiseStatus::kTooManyDims);
  // A strided case where no strided kernel is instantiated.
  const View half_view{{32}, {2}, 0}, out_view = ContiguousView({32});
  ElementwiseOperand ops[2] = {Op(y, out_view), Op(x, half_view)};
  CHECK(LaunchElementwise<StridedKernels::kNone, float, float>(CopyF{}, ops, 1, nullptr) ==
        ElementwiseStatus::kNeedsContiguous);
  // The 64-bit strided kernel (chosen past 2^31 elements or offsets; launched directly here).
  for (int64_t rows : {1, 3, 7}) {
    const std::vector<int64_t> sz = {rows, 5}, src_st = {1, 7}, dst_st = Contiguous(sz);
    std::vector<double> src(64), dst(64, -1.0);
    for (int i = 0; i < 64; ++i) src[i] = i;
    ElementwiseOperand o2[2] = {{dst.data(), 2, sz.data(), dst_st.data()},
                                {src.data(), 2, sz.data(), src_st.data()}};
    CoalescedLayout<2> c;
    REQUIRE(CoalesceElementwise(o2, c));
    LaunchStrided<int64_t, double, CopyF, double>(CopyF{}, rows * 5, c, o2, 1, nullptr,
                                                  std::index_sequence<0>{});
    int64_t wrong = 0;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < 5; ++j) wrong += dst[r * 5 + j] != src[r + j * 7];
    CHECK(wrong == 0);
    REQUIRE(dst[rows * 5] == -1.0);
  }
}

template <typename U>
void CheckTranspose(int64_t batches, int64_t rows, int64_t cols, bool expect_tiles) {
  INFO("batches " << batches << ", rows " << rows << ", cols " << cols << ", size " << sizeof(U));
  // src: a contiguous [batches, cols, rows] buffer seen as [batches, rows, cols].
  const std::vector<int64_t> sz = {batches, rows, cols}, dst_st = Contiguous(sz),
                             src_st = {rows * cols, 1, rows};
  const int64_t n = batches * rows * cols;
  std::vector<U> src(n), dst(n + 1, U(0x5a));
  for (int64_t i = 0; i < n; ++i) src[i] = static_cast<U>(i * 2654435761u);
  const ElementwiseOperand ops[2] = {{dst.data(), 3, sz.data(), dst_st.data()},
                                     {src.data(), 3, sz.data(), src_st.data()}};
  TransposeGeometry g;
  int64_t b = 0;
  const bool tiles = TransposeLayout(ops, g, b);
  REQUIRE(tiles == expect_tiles);
  if (tiles) {
    LaunchTranspose<U>(g, b, src.data(), dst.data(), /*sms=*/1, nullptr);
  } else {
    REQUIRE(LaunchElementwise<StridedKernels::k32And64, U, U>(CopyF{}, ops, 1, nullptr) ==
            ElementwiseStatus::kDone);
  }
  int64_t wrong = 0;
  for (int64_t bi = 0; bi < batches; ++bi)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        wrong += dst[(bi * rows + r) * cols + c] != src[bi * rows * cols + c * rows + r];
  CHECK(wrong == 0);
  CHECK(dst[n] == U(0x5a));
}

TEST_CASE("transpose tiles: last two dims swapped", "[elementwise][transpose]") {
  for (int64_t batches : {1, 3}) {
    for (int64_t rows : {16, 33}) {
      for (int64_t cols : {32, 33, 100}) {
        CheckTranspose<uint8_t>(batches, rows, cols, true);
        CheckTranspose<uint16_t>(batches, rows, cols, true);
        CheckTranspose<uint32_t>(batches, rows, cols, true);
        CheckTranspose<uint64_t>(batches, rows, cols, true);
      }
    }
  }
  // Short sides take the strided kernel.
  CheckTranspose<uint32_t>(2, 3, 100, false);
  CheckTranspose<uint32_t>(2, 100, 4, false);
  // A batch of 3 transposed [17, 40] matrices, batches strided (every other of a buffer).
  const std::vector<int64_t> sz = {3, 17, 40}, dst_st = Contiguous(sz), src_st = {2 * 680, 1, 17};
  std::vector<float> src(6 * 680), dst(3 * 680);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<float>(i);
  const ElementwiseOperand ops[2] = {{dst.data(), 3, sz.data(), dst_st.data()},
                                     {src.data(), 3, sz.data(), src_st.data()}};
  TransposeGeometry g;
  int64_t b = 0;
  REQUIRE(TransposeLayout(ops, g, b));
  LaunchTranspose<uint32_t>(g, b, src.data(), dst.data(), 1, nullptr);
  int64_t wrong = 0;
  for (int64_t bi = 0; bi < 3; ++bi)
    for (int64_t r = 0; r < 17; ++r)
      for (int64_t c = 0; c < 40; ++c)
        wrong += dst[(bi * 17 + r) * 40 + c] != src[bi * 1360 + c * 17 + r];
  CHECK(wrong == 0);
}

TEST_CASE("FastDivmod divides like the hardware divider", "[elementwise][divmod]") {
  const uint32_t divisors[] = {1,
                               2,
                               3,
                               5,
                               7,
                               31,
                               32,
                               33,
                               127,
                               1000,
                               65535,
                               65536,
                               65537,
                               99991,
                               1 << 20,
                               1 << 30,
                               (1u << 31) - 1,
                               1u << 31};
  const uint32_t top = (1u << 31) - 1;
  for (uint32_t d : divisors) {
    const FastDivmod f(d);
    std::vector<uint32_t> ns = {0, 1, d - 1, d, d + 1, 2 * d - 1, top, top - 1, top / d * d};
    for (uint32_t k = 0; k < 2000; ++k) ns.push_back((k * 2654435761u) & top);
    for (uint32_t n : ns) {
      if (n > top) continue;
      if (f.Div(n) != n / d) FAIL("n " << n << " / d " << d << ": " << f.Div(n));
    }
  }
}

}  // namespace
}  // namespace cuda
}  // namespace oneflow
