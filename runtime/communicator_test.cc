#include "runtime/communicator.h"

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <functional>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/functional.h"

using oneflow::DType;
using oneflow::Shape;
using oneflow::Tensor;
using oneflow::runtime::Communicator;
using oneflow::runtime::ControlClient;
using oneflow::runtime::ControlServer;
using oneflow::runtime::ReduceOp;

namespace {

const char* kAddr = "127.0.0.1";
const char* kToken = "comm-test";

// Tensors are built and read through raw memory so that the rank threads touch no shared state.
Tensor Make(const std::vector<double>& v, std::vector<int64_t> dims, DType dtype) {
  Tensor t = Tensor::Empty(Shape(dims), dtype, oneflow::Device());
  for (size_t i = 0; i < v.size(); ++i) {
    if (dtype == DType::kFloat32)
      t.data<float>()[i] = static_cast<float>(v[i]);
    else if (dtype == DType::kFloat64)
      t.data<double>()[i] = v[i];
    else if (dtype == DType::kInt64)
      t.data<int64_t>()[i] = static_cast<int64_t>(v[i]);
    else if (dtype == DType::kInt32)
      t.data<int32_t>()[i] = static_cast<int32_t>(v[i]);
  }
  return t;
}

// For the test's scope, with tcp: ONEFLOW_SHM=0, so rank threads talk Gloo over TCP instead of
// shared memory.
struct OverTcp {
  explicit OverTcp(bool tcp) {
    if (tcp) setenv("ONEFLOW_SHM", "0", 1);
  }
  ~OverTcp() { unsetenv("ONEFLOW_SHM"); }
};

std::vector<double> Read(const Tensor& t) {
  std::vector<double> out(t.numel());
  for (size_t i = 0; i < out.size(); ++i) {
    if (t.dtype() == DType::kFloat32)
      out[i] = t.data<float>()[i];
    else if (t.dtype() == DType::kFloat64)
      out[i] = t.data<double>()[i];
    else if (t.dtype() == DType::kInt64)
      out[i] = static_cast<double>(t.data<int64_t>()[i]);
    else if (t.dtype() == DType::kInt32)
      out[i] = t.data<int32_t>()[i];
  }
  return out;
}

std::vector<double> Range(double start, int64_t n) {
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = start + i;
  return v;
}

// Runs body(comm, rank) on n threads, one rank each, and returns what each rank produced; a
// rank's exception is reported as its result's error.
struct RankResult {
  std::vector<std::vector<double>> outputs;
  std::string error;
};

std::vector<RankResult> RunRanks(
    int n, const std::function<std::vector<std::vector<double>>(Communicator&, int)>& body,
    double timeout_s = 20) {
  ControlServer server(kAddr, 0, kToken);
  std::vector<RankResult> results(n);
  std::vector<std::thread> threads;
  std::vector<int> ranks(n);
  std::iota(ranks.begin(), ranks.end(), 0);
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        ControlClient client(kAddr, server.port(), r, kToken, 10);
        Communicator comm(client, ranks, r, timeout_s);
        results[r].outputs = body(comm, r);
        // As communicator.h asks: no member tears its pairs down while a peer may still be
        // connecting or inside a call with it (a body of argument errors never communicates).
        comm.Barrier();
      } catch (const std::exception& e) {
        results[r].error = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  return results;
}

void CheckEqual(const std::vector<double>& got, const std::vector<double>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i);
    REQUIRE(got[i] == Approx(want[i]));
  }
}

}  // namespace

TEST_CASE("communicator: every collective against hand-computed values", "[runtime]") {
  // Threads of one process share a machine: shared memory unless ONEFLOW_SHM=0 (Gloo's TCP).
  const bool over_tcp = GENERATE(false, true);
  OverTcp transport(over_tcp);
  for (int n : {2, 4}) {
    for (DType dtype : {DType::kFloat32, DType::kInt64}) {
      INFO("world " << n << " dtype " << oneflow::DTypeName(dtype));
      // Rank r holds r*10 + i (i = 0..5, shape [3, 2]) unless noted.
      auto results = RunRanks(n, [&](Communicator& c, int r) {
        std::vector<std::vector<double>> out;
        auto mine = [&](int rank) { return Range(rank * 10, 6); };
        Tensor t = Make(mine(r), {3, 2}, dtype);
        c.AllReduce(t, ReduceOp::kSum);
        out.push_back(Read(t));
        t = Make(mine(r), {3, 2}, dtype);
        c.AllReduce(t, ReduceOp::kMax);
        out.push_back(Read(t));
        t = Make(mine(r), {3, 2}, dtype);
        c.AllReduce(t, ReduceOp::kMin);
        out.push_back(Read(t));
        if (dtype == DType::kFloat32) {
          t = Make(mine(r), {3, 2}, dtype);
          c.AllReduce(t, ReduceOp::kAvg);
          out.push_back(Read(t));
        }
        // broadcast from the last rank
        t = Make(mine(r), {3, 2}, dtype);
        c.Broadcast(t, n - 1);
        out.push_back(Read(t));
        // all_gather: [3,2] each -> [3n,2]
        Tensor g = Make(std::vector<double>(6 * n, -1), {3 * n, 2}, dtype);
        c.AllGather(Make(mine(r), {3, 2}, dtype), g);
        out.push_back(Read(g));
        // all_gather_v: rank k gives k+1 rows of 2
        std::vector<int64_t> counts;
        int64_t total = 0;
        for (int k = 0; k < n; ++k) counts.push_back(k + 1), total += k + 1;
        Tensor gv = Make(std::vector<double>(total * 2, -1), {total, 2}, dtype);
        c.AllGatherV(Make(Range(r * 100, (r + 1) * 2), {r + 1, 2}, dtype), gv, counts);
        out.push_back(Read(gv));
        // reduce_scatter even: in [2n, 3] = r*10 + i, out [2, 3]
        Tensor rs = Make(std::vector<double>(6, -1), {2, 3}, dtype);
        c.ReduceScatter(Make(Range(r * 10, 6 * n), {2 * n, 3}, dtype), rs, ReduceOp::kSum);
        out.push_back(Read(rs));
        // reduce_scatter uneven: rank k receives k+1 rows of 1
        Tensor rsv = Make(std::vector<double>(r + 1, -1), {r + 1}, dtype);
        c.ReduceScatterV(Make(Range(r, total), {total}, dtype), rsv, counts, ReduceOp::kMax);
        out.push_back(Read(rsv));
        // all_to_all even: rank r sends r*100 + j*10 + {0,1} to rank j
        std::vector<double> a2a;
        for (int j = 0; j < n; ++j)
          a2a.push_back(r * 100 + j * 10), a2a.push_back(r * 100 + j * 10 + 1);
        Tensor a2a_out = Make(std::vector<double>(2 * n, -1), {n, 2}, dtype);
        c.AllToAll(Make(a2a, {n, 2}, dtype), a2a_out);
        out.push_back(Read(a2a_out));
        // all_to_all uneven: rank r sends (j + 1) rows to rank j, each row [r, j]
        std::vector<double> v_in;
        std::vector<int64_t> in_counts, out_counts;
        for (int j = 0; j < n; ++j) {
          in_counts.push_back(j + 1);
          out_counts.push_back(r + 1);
          for (int k = 0; k <= j; ++k) v_in.push_back(r), v_in.push_back(j);
        }
        int64_t in_rows = total, out_rows = int64_t(n) * (r + 1);
        Tensor v_out = Make(std::vector<double>(out_rows * 2, -1), {out_rows, 2}, dtype);
        c.AllToAllV(Make(v_in, {in_rows, 2}, dtype), v_out, in_counts, out_counts);
        out.push_back(Read(v_out));
        // send/recv ring: r sends to r+1, receives from r-1, two tags
        Tensor recv_a = Make(std::vector<double>(4, -1), {4}, dtype);
        Tensor recv_b = Make(std::vector<double>(1, -1), {1}, dtype);
        int next = (r + 1) % n, prev = (r + n - 1) % n;
        if (r % 2 == 0) {
          c.Send(Make(Range(r * 1000, 4), {4}, dtype), next, 7);
          c.Send(Make({double(-r)}, {1}, dtype), next, 8);
          c.Recv(recv_a, prev, 7);
          c.Recv(recv_b, prev, 8);
        } else {
          c.Recv(recv_a, prev, 7);
          c.Recv(recv_b, prev, 8);
          c.Send(Make(Range(r * 1000, 4), {4}, dtype), next, 7);
          c.Send(Make({double(-r)}, {1}, dtype), next, 8);
        }
        out.push_back(Read(recv_a));
        out.push_back(Read(recv_b));
        c.Barrier();
        return out;
      });

      for (int r = 0; r < n; ++r) {
        INFO("rank " << r);
        REQUIRE(results[r].error == "");
        const auto& o = results[r].outputs;
        size_t k = 0;
        std::vector<double> sum(6), mx(6), mn(6), avg(6);
        for (int i = 0; i < 6; ++i) {
          for (int q = 0; q < n; ++q) sum[i] += q * 10 + i;
          mx[i] = (n - 1) * 10 + i;
          mn[i] = i;
          avg[i] = sum[i] / n;
        }
        CheckEqual(o[k++], sum);
        CheckEqual(o[k++], mx);
        CheckEqual(o[k++], mn);
        if (dtype == DType::kFloat32) CheckEqual(o[k++], avg);
        CheckEqual(o[k++], Range((n - 1) * 10, 6));
        std::vector<double> gathered;
        for (int q = 0; q < n; ++q) {
          auto v = Range(q * 10, 6);
          gathered.insert(gathered.end(), v.begin(), v.end());
        }
        CheckEqual(o[k++], gathered);
        std::vector<double> gathered_v;
        for (int q = 0; q < n; ++q) {
          auto v = Range(q * 100, (q + 1) * 2);
          gathered_v.insert(gathered_v.end(), v.begin(), v.end());
        }
        CheckEqual(o[k++], gathered_v);
        std::vector<double> rs(6);
        for (int i = 0; i < 6; ++i) {
          for (int q = 0; q < n; ++q) rs[i] += q * 10 + r * 6 + i;
        }
        CheckEqual(o[k++], rs);
        // uneven reduce_scatter (max): element e of the total is max_q (q + e) = n - 1 + e
        int64_t start = r * (r + 1) / 2;
        std::vector<double> rsv;
        for (int i = 0; i <= r; ++i) rsv.push_back(n - 1 + start + i);
        CheckEqual(o[k++], rsv);
        std::vector<double> a2a;
        for (int j = 0; j < n; ++j)
          a2a.push_back(j * 100 + r * 10), a2a.push_back(j * 100 + r * 10 + 1);
        CheckEqual(o[k++], a2a);
        std::vector<double> a2av;
        for (int j = 0; j < n; ++j) {
          for (int i = 0; i <= r; ++i) a2av.push_back(j), a2av.push_back(r);
        }
        CheckEqual(o[k++], a2av);
        int prev = (r + n - 1) % n;
        CheckEqual(o[k++], Range(prev * 1000, 4));
        CheckEqual(o[k++], {double(-prev)});
      }
    }
  }
}

TEST_CASE("communicator: groups that are a subset of the ranks", "[runtime]") {
  ControlServer server(kAddr, 0, kToken);
  std::vector<std::string> errors(4);
  std::vector<std::vector<double>> got(4);
  std::vector<std::thread> threads;
  for (int r = 0; r < 4; ++r) {
    threads.emplace_back([&, r] {
      try {
        ControlClient client(kAddr, server.port(), r, kToken, 10);
        std::vector<int> group = r % 2 ? std::vector<int>{3, 1} : std::vector<int>{0, 2};
        Communicator comm(client, group, r, 10);
        Tensor t = Make({double(r), 1}, {2}, DType::kFloat64);
        comm.AllReduce(t, ReduceOp::kSum);
        comm.Broadcast(t, group[1]);  // no-op on values but exercises global roots
        got[r] = Read(t);
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 4; ++r) {
    INFO("rank " << r);
    REQUIRE(errors[r] == "");
    CheckEqual(got[r], r % 2 ? std::vector<double>{4, 2} : std::vector<double>{2, 2});
  }
}

TEST_CASE("communicator: argument errors are one line", "[runtime]") {
  std::vector<std::vector<std::string>> messages(2);
  auto capture = [](std::vector<std::string>& into, const std::function<void()>& f) {
    try {
      f();
      into.push_back("");
    } catch (const std::exception& e) {
      into.push_back(e.what());
    }
  };
  auto results = RunRanks(2, [&](Communicator& c, int r) {
    Tensor in = Make({1, 2}, {2}, DType::kFloat32);
    Tensor bad = Make({0, 0, 0}, {3}, DType::kFloat32);
    Tensor ints = Make({1, 2}, {2}, DType::kInt64);
    capture(messages[r], [&] { c.AllGather(in, bad); });
    capture(messages[r], [&] { c.Broadcast(in, 5); });
    capture(messages[r], [&] { c.AllReduce(ints, ReduceOp::kAvg); });
    return std::vector<std::vector<double>>();
  });
  for (int r = 0; r < 2; ++r) {
    REQUIRE(results[r].error == "");
    REQUIRE(messages[r].size() == 3);
    REQUIRE_THAT(messages[r][0], Catch::Contains("all_gather: output has 3"));
    REQUIRE_THAT(messages[r][1], Catch::Contains("rank 5 is not in group cpu:[0,1]"));
    REQUIRE_THAT(messages[r][2], Catch::Contains("floating point"));
  }
}

TEST_CASE("communicator: a rank that never joins makes the others time out", "[runtime]") {
  ControlServer server(kAddr, 0, kToken);
  const double timeout_s = 2;
  std::string error;
  double elapsed_s = -1;
  std::atomic<bool> done{false};
  std::thread r0([&] {
    try {
      ControlClient client(kAddr, server.port(), 0, kToken, 10);
      Communicator comm(client, {0, 1}, 0, timeout_s);
      Tensor t = Make({1, 2, 3}, {3}, DType::kFloat32);
      auto start = std::chrono::steady_clock::now();
      try {
        comm.AllReduce(t, ReduceOp::kSum);
      } catch (const std::exception& e) {
        error = e.what();
      }
      elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    } catch (const std::exception& e) {
      error = std::string("setup: ") + e.what();
    }
    done = true;
  });
  std::thread r1([&] {
    try {
      ControlClient client(kAddr, server.port(), 1, kToken, 10);
      Communicator comm(client, {0, 1}, 1, timeout_s);
      while (!done) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    } catch (const std::exception&) {
    }
  });
  r0.join();
  r1.join();
  // What the other member posted (call_watch.h): nothing, it is in no collective.
  REQUIRE(error ==
          "all_reduce: rank 0 timed out after 2 s in group cpu:[0,1] "
          "(is another rank dead or stuck?); rank 1 posted nothing (in no collective: "
          "computing, or stuck outside collectives)");
  REQUIRE(elapsed_s >= timeout_s - 0.5);
  REQUIRE(elapsed_s < timeout_s + 3);
}

TEST_CASE("communicator: a missing peer fails the connect within the timeout", "[runtime]") {
  ControlServer server(kAddr, 0, kToken);
  ControlClient client(kAddr, server.port(), 0, kToken, 10);
  auto start = std::chrono::steady_clock::now();
  REQUIRE_THROWS_WITH(Communicator(client, {0, 1}, 0, 1),
                      Catch::Contains("rank 0") && Catch::Contains("cpu:[0,1]"));
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  REQUIRE(elapsed < 5);
}

TEST_CASE("communicator: uneven collectives with a rank that has no rows", "[runtime]") {
  // Rank 0 contributes / receives nothing; ranks 1 and 2 two rows each.
  auto results = RunRanks(3, [](Communicator& c, int r) {
    std::vector<std::vector<double>> out;
    std::vector<int64_t> counts = {0, 2, 2};
    Tensor in = Make(Range(r * 10, counts[r]), {counts[r]}, DType::kInt64);
    Tensor g = Make(std::vector<double>(4, -1), {4}, DType::kInt64);
    c.AllGatherV(in, g, counts);
    out.push_back(Read(g));
    Tensor rs = Make(std::vector<double>(counts[r], -1), {counts[r]}, DType::kInt64);
    c.ReduceScatterV(Make(Range(r, 4), {4}, DType::kInt64), rs, counts, ReduceOp::kSum);
    out.push_back(Read(rs));
    // all_to_all_v: rank 0 sends nothing and receives nothing; 1 and 2 swap one row each
    // and keep one.
    std::vector<int64_t> ic =
        r == 0 ? std::vector<int64_t>{0, 0, 0} : std::vector<int64_t>{0, 1, 1};
    Tensor a = r == 0 ? Make({}, {0}, DType::kInt64)
                      : Make({double(r * 10), double(r * 10 + 1)}, {2}, DType::kInt64);
    Tensor b = Make(std::vector<double>(r == 0 ? 0 : 2, -1), {r == 0 ? 0 : 2}, DType::kInt64);
    c.AllToAllV(a, b, ic, ic);
    out.push_back(Read(b));
    return out;
  });
  for (int r = 0; r < 3; ++r) {
    INFO("rank " << r);
    REQUIRE(results[r].error == "");
    CheckEqual(results[r].outputs[0], {10, 11, 20, 21});
    std::vector<double> rs;
    if (r == 1) rs = {3, 6};
    if (r == 2) rs = {9, 12};
    CheckEqual(results[r].outputs[1], rs);
    std::vector<double> a2a;
    if (r == 1) a2a = {10, 20};
    if (r == 2) a2a = {11, 21};
    CheckEqual(results[r].outputs[2], a2a);
  }
}

TEST_CASE("communicator: shared memory across several chunks, uneven, every op", "[runtime]") {
  // 300k elements: several 256 KiB chunks, and a length that splits unevenly over 3 ranks.
  const int64_t count = 300001;
  auto results = RunRanks(3, [&](Communicator& c, int r) {
    REQUIRE(std::string(c.transport()) == "shm");
    std::vector<std::vector<double>> out;
    Tensor t = Make(Range(r, count), {count}, DType::kFloat64);
    c.AllReduce(t, ReduceOp::kSum);
    out.push_back(Read(t));
    Tensor b = Make(Range(r * 7, count), {count}, DType::kFloat64);
    c.Broadcast(b, 1);
    out.push_back(Read(b));
    Tensor g = Make(std::vector<double>(3 * count), {3 * count}, DType::kFloat64);
    c.AllGather(Make(Range(r * 1e6, count), {count}, DType::kFloat64), g);
    out.push_back(Read(g));
    return out;
  });
  for (int r = 0; r < 3; ++r) {
    INFO("rank " << r);
    REQUIRE(results[r].error == "");
    const auto& o = results[r].outputs;
    for (int64_t i = 0; i < count; i += 997) {
      REQUIRE(o[0][i] == 3.0 * i + 3.0);
      REQUIRE(o[1][i] == 7.0 + i);
      for (int q = 0; q < 3; ++q) REQUIRE(o[2][q * count + i] == q * 1e6 + i);
    }
    REQUIRE(o[0][count - 1] == 3.0 * (count - 1) + 3.0);
  }
}

TEST_CASE("communicator: all-reduce in place in shared memory (DDP's buckets)", "[runtime]") {
  const bool over_tcp = GENERATE(false, true);
  const int n = GENERATE(2, 3);
  OverTcp transport(over_tcp);
  // Two shared tensors; views at offsets 0, 100000 (an empty one) and 100000 of the first, the
  // parts not on cache-line or page boundaries; the second reduced whole with max.
  const int64_t total = 300001;
  auto results = RunRanks(n, [&](Communicator& c, int r) {
    Tensor a = c.EmptyShared(total, DType::kFloat64);
    Tensor b = c.EmptyShared(5, DType::kInt64);
    REQUIRE(a.shape() == Shape({total}));
    for (int64_t i = 0; i < total; ++i) a.data<double>()[i] = static_cast<double>(i + r * 1000);
    for (int64_t i = 0; i < 5; ++i) b.data<int64_t>()[i] = (i + r) % 5;
    Tensor head = Tensor::MakeView(a, Shape({100000}), {1}, 0);
    Tensor none = Tensor::MakeView(a, Shape({0}), {1}, 100000);
    Tensor tail = Tensor::MakeView(a, Shape({200001}), {1}, 100000);
    c.AllReduce(head, ReduceOp::kAvg);
    c.AllReduce(none, ReduceOp::kSum);
    c.AllReduce(tail, ReduceOp::kSum);
    c.AllReduce(b, ReduceOp::kMax);
    return std::vector<std::vector<double>>{Read(a), Read(b)};
  });
  const double ranks_sum = 1000.0 * n * (n - 1) / 2;  // sum over r of r * 1000
  auto expected = [&](int64_t i) {
    return i < 100000 ? i + ranks_sum / n : static_cast<double>(n) * i + ranks_sum;
  };
  for (int r = 0; r < n; ++r) {
    INFO("rank " << r << " of " << n << (over_tcp ? " gloo" : " shm"));
    REQUIRE(results[r].error == "");
    const auto& o = results[r].outputs[0];
    REQUIRE(static_cast<int64_t>(o.size()) == total);
    for (int64_t i : {int64_t{0}, int64_t{99999}, int64_t{100000}, total - 1}) {
      REQUIRE(o[i] == expected(i));
    }
    for (int64_t i = 0; i < total; i += 997) {
      INFO("element " << i);
      REQUIRE(o[i] == expected(i));
    }
    const std::vector<double> most =
        n == 2 ? std::vector<double>{1, 2, 3, 4, 4} : std::vector<double>{2, 3, 4, 4, 4};
    REQUIRE(results[r].outputs[1] == most);
  }
}

TEST_CASE("communicator: out-of-place all-reduce leaves its input alone (boxing P -> B)",
          "[runtime]") {
  const bool over_tcp = GENERATE(false, true);
  const int n = GENERATE(2, 3);
  OverTcp transport(over_tcp);
  // Sizes that grow the scratch (small, larger, then small again in the grown one), a
  // transposed input, integers with max, and an average.
  auto results = RunRanks(n, [&](Communicator& c, int r) {
    std::vector<std::vector<double>> out;
    for (int64_t count : {int64_t{7}, int64_t{100003}, int64_t{5}}) {
      std::vector<double> v(count);
      for (int64_t i = 0; i < count; ++i) v[i] = static_cast<double>(i + r * 1000);
      Tensor x = Make(v, {count}, DType::kFloat32);
      Tensor y = c.AllReduced(x);
      REQUIRE(y.data<float>() != x.data<float>());
      out.push_back(Read(y));
      out.push_back(Read(x));  // untouched
    }
    const double s = r + 1;
    Tensor m = Make({s, 2 * s, 3 * s, 4 * s, 5 * s, 6 * s}, {2, 3}, DType::kFloat64);
    Tensor t = c.AllReduced(Tensor::MakeView(m, Shape({3, 2}), {1, 3}, 0),  // m.T
                            ReduceOp::kAvg);
    REQUIRE(t.shape() == Shape({3, 2}));
    out.push_back(Read(t));
    Tensor k = Make({static_cast<double>(r), static_cast<double>(-r)}, {2}, DType::kInt64);
    out.push_back(Read(c.AllReduced(k, ReduceOp::kMax)));
    return out;
  });
  const double ranks_sum = 1000.0 * n * (n - 1) / 2;
  const double mean = (n + 1) / 2.0;  // of r + 1 over the ranks
  for (int r = 0; r < n; ++r) {
    INFO("rank " << r << " of " << n << (over_tcp ? " gloo" : " shm"));
    REQUIRE(results[r].error == "");
    const auto& o = results[r].outputs;
    for (int call = 0; call < 3; ++call) {
      const auto &sum = o[2 * call], &in = o[2 * call + 1];
      for (size_t i = 0; i < sum.size(); ++i) {
        REQUIRE(sum[i] == static_cast<float>(n * static_cast<double>(i) + ranks_sum));
        REQUIRE(in[i] == static_cast<float>(static_cast<double>(i) + r * 1000));
      }
    }
    REQUIRE(o[6] ==
            std::vector<double>{1 * mean, 4 * mean, 2 * mean, 5 * mean, 3 * mean, 6 * mean});
    REQUIRE(o[7] == std::vector<double>{static_cast<double>(n - 1), 0});
  }
}

TEST_CASE("communicator: shared all-reduce reads this rank's part from local pieces", "[runtime]") {
  const int n = GENERATE(2, 3);
  const int64_t total = 1000;
  std::vector<std::string> errors(n);
  auto results = RunRanks(n, [&](Communicator& c, int r) {
    { Tensor gone = c.EmptyShared(8, DType::kFloat32); }  // forgotten by the next EmptyShared
    Tensor t = c.EmptyShared(total, DType::kFloat64);
    const auto [lo, hi] = c.SharedPartOf(t);
    REQUIRE(hi - lo >= 30);
    // In the region: this rank's values, except NaN where a local piece stands in for them.
    for (int64_t i = 0; i < total; ++i) t.data<double>()[i] = static_cast<double>(i + r * 1000);
    std::vector<double> mine;
    for (int64_t i = lo + 10; i < hi - 10; ++i) {
      mine.push_back(static_cast<double>(i + r * 1000));
      t.data<double>()[i] = std::nan("");
    }
    Tensor piece = Make(mine, {static_cast<int64_t>(mine.size())}, DType::kFloat64);
    c.AllReduce(t, ReduceOp::kSum, {{lo + 10, piece}});
    try {  // every rank names an offset outside its part, so every rank fails before meeting
      c.AllReduce(t, ReduceOp::kSum, {{hi, piece}});
    } catch (const std::exception& e) {
      errors[r] = e.what();
    }
    return std::vector<std::vector<double>>{Read(t),
                                            {static_cast<double>(lo), static_cast<double>(hi)}};
  });
  std::vector<char> covered(total, 0);
  for (int r = 0; r < n; ++r) {
    INFO("rank " << r << " of " << n);
    REQUIRE(results[r].error == "");
    const auto& o = results[r].outputs[0];
    for (int64_t i = 0; i < total; ++i) REQUIRE(o[i] == n * i + 1000.0 * n * (n - 1) / 2);
    const auto& part = results[r].outputs[1];
    for (int64_t i = static_cast<int64_t>(part[0]); i < static_cast<int64_t>(part[1]); ++i) {
      ++covered[i];
    }
    REQUIRE_THAT(errors[r], Catch::Matchers::Contains("all_reduce: local piece [") &&
                                Catch::Matchers::Contains("lies outside this rank's part"));
  }
  REQUIRE(std::count(covered.begin(), covered.end(), 1) == total);  // the parts tile the tensor
}

TEST_CASE("communicator: local pieces need shared memory", "[runtime]") {
  OverTcp transport(true);
  std::string error;
  auto results = RunRanks(2, [&](Communicator& c, int r) {
    Tensor t = c.EmptyShared(10, DType::kFloat32);
    REQUIRE(c.SharedPartOf(t) == std::pair<int64_t, int64_t>{0, 0});
    try {
      c.AllReduce(t, ReduceOp::kSum, {{0, Make({1.0}, {1}, DType::kFloat32)}});
    } catch (const std::exception& e) {
      if (r == 0) error = e.what();
    }
    return std::vector<std::vector<double>>{};
  });
  REQUIRE(error ==
          "all_reduce: local pieces need a tensor in shared memory (from EmptyShared, in a group "
          "on one machine)");
}

TEST_CASE("communicator: asynchronous calls run in order and wait() returns their result",
          "[runtime]") {
  auto results = RunRanks(2, [&](Communicator& c, int r) {
    std::vector<Tensor> ts;
    std::vector<std::shared_ptr<oneflow::runtime::Work>> works;
    for (int k = 0; k < 8; ++k) {
      ts.push_back(Make(Range(r + k, 1000), {1000}, DType::kFloat32));
      Tensor t = ts.back();
      works.push_back(c.Async([t](Communicator& cc) mutable { cc.AllReduce(t); }));
    }
    Tensor sync = Make({double(r)}, {1}, DType::kFloat32);
    c.AllReduce(sync);  // waits for the queued ones first
    std::vector<std::vector<double>> out;
    for (auto& w : works) {
      REQUIRE(w->IsCompleted());
      w->Wait();
    }
    for (auto& t : ts) out.push_back(Read(t));
    out.push_back(Read(sync));
    // An error inside an asynchronous call comes back from wait().
    auto bad = c.Async([](Communicator& cc) {
      Tensor none;
      cc.Broadcast(none, 0);
    });
    REQUIRE_THROWS_WITH(bad->Wait(), "broadcast: tensor is an undefined tensor");
    return out;
  });
  for (int r = 0; r < 2; ++r) {
    REQUIRE(results[r].error == "");
    for (int k = 0; k < 8; ++k) {
      for (int i = 0; i < 1000; i += 111) REQUIRE(results[r].outputs[k][i] == 2.0 * (k + i) + 1);
    }
    REQUIRE(results[r].outputs[8][0] == 1.0);
  }
}

TEST_CASE("communicator: a group of one needs no network", "[runtime]") {
  Communicator c(0);
  REQUIRE(std::string(c.transport()) == "self");
  Tensor t = Make({1, 2, 3}, {3}, DType::kFloat32);
  c.AllReduce(t, ReduceOp::kAvg);
  REQUIRE(Read(t) == std::vector<double>{1, 2, 3});
  Tensor g = Make({0, 0, 0}, {3}, DType::kFloat32);
  c.AllGather(t, g);
  REQUIRE(Read(g) == std::vector<double>{1, 2, 3});
  REQUIRE_THROWS_WITH(c.Send(t, 0), "send: rank 0 cannot send to itself");
}

TEST_CASE("communicator: calls the members disagree on are refused on every member", "[runtime]") {
  for (bool tcp : {false, true}) {
    OverTcp over(tcp);
    // Each case: rank 0's call and rank 1's; both ranks must throw the same line, and the group
    // must still work afterwards.
    std::vector<std::string> errors(2);
    auto results = RunRanks(2, [&](Communicator& comm, int rank) {
      auto refused = [&](const std::function<void()>& f) {
        try {
          f();
          errors[rank] += "accepted|";
        } catch (const std::exception& e) {
          errors[rank] += std::string(e.what()) + "|";
        }
      };
      const int64_t n = rank == 0 ? 4 : 1004;
      refused([&] {
        Tensor t = Make(Range(0, n), {n}, DType::kFloat32);
        comm.AllReduce(t, ReduceOp::kSum);
      });
      refused([&] {
        Tensor t = Make(Range(0, 4), {4}, rank == 0 ? DType::kFloat32 : DType::kFloat64);
        comm.AllReduce(t, ReduceOp::kSum);
      });
      refused([&] {
        Tensor t = Make(Range(0, 4), {4}, DType::kFloat32);
        if (rank == 0) {
          comm.AllReduce(t, ReduceOp::kMax);
        } else {
          comm.Barrier();
        }
      });
      Tensor t = Make({1.0 + rank}, {1}, DType::kFloat32);
      comm.AllReduce(t, ReduceOp::kSum);
      return std::vector<std::vector<double>>{Read(t)};
    });
    const std::string tail = " (group cpu:[0,1]; every member must make the same call)|";
    for (int r = 0; r < 2; ++r) {
      INFO("tcp " << tcp << " rank " << r);
      REQUIRE(results[r].error == "");
      REQUIRE(errors[r] ==
              "all_reduce: rank 0 called all_reduce(float32, 4 elements), rank 1 called "
              "all_reduce(float32, 1004 elements)" +
                  tail +
                  "all_reduce: rank 0 called all_reduce(float32, 4 elements), rank 1 called "
                  "all_reduce(float64, 4 elements)" +
                  tail + (r == 0 ? "all_reduce" : "barrier") +
                  ": rank 0 called all_reduce(float32, 4 elements, max), rank 1 called "
                  "barrier()" +
                  tail);
      REQUIRE(results[r].outputs == std::vector<std::vector<double>>{{3.0}});
    }
  }
}
