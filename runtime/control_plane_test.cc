#include "runtime/control_plane.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"

using oneflow::runtime::ControlClient;
using oneflow::runtime::ControlServer;
using oneflow::runtime::JobShape;

namespace {

const char* kAddr = "127.0.0.1";
const char* kToken = "test-token";

std::string Target(int port) { return std::string(kAddr) + ":" + std::to_string(port); }

// Runs f in a thread and hands back the error message it threw ("" when it returned).
std::thread CaptureError(std::string* message, std::function<void()> f) {
  return std::thread([message, f] {
    try {
      f();
      *message = "";
    } catch (const std::exception& e) {
      *message = e.what();
    }
  });
}

}  // namespace

TEST_CASE("control plane: set, get, wait and add", "[runtime]") {
  ControlServer server(kAddr, 0, kToken);
  REQUIRE(server.port() > 0);
  ControlClient c0(kAddr, server.port(), 0, kToken, 5);
  ControlClient c1(kAddr, server.port(), 1, kToken, 5);

  REQUIRE_FALSE(c1.Get("missing").has_value());
  c0.Set("k", std::string("v\0w", 3));
  auto v = c1.Get("k");
  REQUIRE(v.has_value());
  REQUIRE(*v == std::string("v\0w", 3));
  c1.Set("k", "overwritten");
  REQUIRE(*c0.Get("k") == "overwritten");

  // A wait returns once every key exists, also when the key arrives while it waits.
  c1.Wait({"k"}, 1);
  std::thread setter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    c0.Set("late", "1");
  });
  c1.Wait({"k", "late"}, 10);
  setter.join();

  REQUIRE(c0.Add("counter", 1) == 1);
  REQUIRE(c1.Add("counter", 5) == 6);
  REQUIRE(c0.Add("counter", -2) == 4);
  REQUIRE(*c1.Get("counter") == "4");

  // Many concurrent adds lose nothing.
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      ControlClient c(kAddr, server.port(), t, kToken, 5);
      for (int i = 0; i < 25; ++i) c.Add("sum", 1);
    });
  }
  for (auto& t : threads) t.join();
  REQUIRE(*c0.Get("sum") == "100");
  c0.Heartbeat();
}

TEST_CASE("control plane: barrier of 4 clients, twice", "[runtime]") {
  ControlServer server(kAddr, 0, kToken);
  std::atomic<int> before{0}, after_first{0};
  std::atomic<bool> early{false};
  std::vector<std::thread> threads;
  for (int r = 0; r < 4; ++r) {
    threads.emplace_back([&, r] {
      ControlClient c(kAddr, server.port(), r, kToken, 5);
      std::this_thread::sleep_for(std::chrono::milliseconds(50 * r));
      ++before;
      c.Barrier("init", 4, 10);
      if (before.load() != 4) early = true;
      ++after_first;
      c.Barrier("init", 4, 10);  // the same barrier can be used again
      if (after_first.load() != 4) early = true;
    });
  }
  for (auto& t : threads) t.join();
  REQUIRE_FALSE(early.load());
}

TEST_CASE("control plane: wait timeout names the key", "[runtime]") {
  ControlServer server(kAddr, 0, kToken);
  ControlClient c(kAddr, server.port(), 1, kToken, 5);
  c.Set("present", "1");
  auto start = std::chrono::steady_clock::now();
  REQUIRE_THROWS_WITH(
      c.Wait({"present", "x"}, 2),
      Catch::Contains("control plane: rank 1 timed out after 2 s waiting for key 'x'"));
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  REQUIRE(took >= 1.9);
  REQUIRE(took < 6);
}

TEST_CASE("control plane: barrier timeout names the missing ranks", "[runtime]") {
  ControlServer server(kAddr, 0, kToken);
  ControlClient c0(kAddr, server.port(), 0, kToken, 5);
  std::string m2 = "unset";
  std::thread t2 = CaptureError(&m2, [&] {
    ControlClient c(kAddr, server.port(), 2, kToken, 5);
    c.Barrier("sync", 4, 2);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  std::string m0 = "unset";
  try {
    c0.Barrier("sync", 4, 1);
  } catch (const oneflow::Error& e) {
    m0 = e.what();
  }
  t2.join();
  REQUIRE_THAT(m0, Catch::Contains("control plane: rank 0 timed out after 1 s in barrier 'sync' "
                                   "of 4 ranks: arrived ranks 0, 2; missing ranks 1, 3"));
  REQUIRE_THAT(m2, Catch::Contains("control plane: rank 2 timed out after 2 s in barrier 'sync' "
                                   "of 4 ranks: arrived ranks 0, 2; missing ranks 1, 3"));

  ControlClient c(kAddr, server.port(), 3, kToken, 5);
  REQUIRE_THROWS_WITH(c.Barrier("alone", 2, 0.5),
                      Catch::Contains("control plane: rank 3 timed out after 0.5 s in barrier "
                                      "'alone' of 2 ranks: arrived ranks 3; missing ranks 0, 1"));
}

TEST_CASE("control plane: wrong token is refused", "[runtime]") {
  ControlServer server(kAddr, 0, kToken);
  REQUIRE_THROWS_WITH(ControlClient(kAddr, server.port(), 1, "stranger", 5),
                      Catch::Contains("control plane: rank 1 was refused by the master at " +
                                      Target(server.port()) + ": its job token differs"));
}

TEST_CASE("control plane: a refused rank learns what differs; a gathering job stops", "[runtime]") {
  const std::string ours = "command=python3 -u a.py\nworld size=2\nranks per node=1\n";
  const std::string theirs = "command=python3 -u b.py\nworld size=2\nranks per node=1\n";
  ControlServer server(kAddr, 0, ours, 0, JobShape{2, 1, ours});
  ControlClient rank0(kAddr, server.port(), 0, ours, 5, ours);
  REQUIRE_THROWS_WITH(ControlClient(kAddr, server.port(), 1, theirs, 5, theirs),
                      Catch::Contains(": its command is 'python3 -u b.py' but this job's is "
                                      "'python3 -u a.py' (another job on this port?"));
  // Rank 1 of this job will not come: rank 0 learns at once instead of at its timeout.
  REQUIRE_THROWS_WITH(rank0.Barrier("join", 2, 60),
                      Catch::Contains("the master refused a rank 1 from "));
}

TEST_CASE("control plane: once every rank joined, a stranger is only refused", "[runtime]") {
  const std::string ours = "command=a\n";
  ControlServer server(kAddr, 0, ours, 0, JobShape{1, 1, ours});
  ControlClient rank0(kAddr, server.port(), 0, ours, 5, ours);
  REQUIRE_THROWS(ControlClient(kAddr, server.port(), 1, "command=b\n", 5, "command=b\n"));
  rank0.Barrier("after", 1, 5);  // the job goes on
}

TEST_CASE("control plane: unreachable master", "[runtime]") {
  int port = 0;
  {
    ControlServer server(kAddr, 0, kToken);
    port = server.port();
  }  // closed again: nothing listens on port now
  auto start = std::chrono::steady_clock::now();
  REQUIRE_THROWS_WITH(ControlClient(kAddr, port, 1, kToken, 1),
                      Catch::Contains("control plane: rank 1 could not reach the master at " +
                                      Target(port) + " within 1 s"));
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  REQUIRE(took < 5);
}

TEST_CASE("control plane: port in use", "[runtime]") {
  ControlServer first(kAddr, 0, kToken);
  REQUIRE_THROWS_WITH(ControlServer(kAddr, first.port(), kToken),
                      Catch::Contains("control plane: cannot listen on " + Target(first.port()) +
                                      " (address already in use?) as rank 0"));
  // The first server still works.
  ControlClient c(kAddr, first.port(), 1, kToken, 5);
  c.Set("a", "b");
  REQUIRE(*c.Get("a") == "b");
}

TEST_CASE("control plane: abort reaches pending and later waits", "[runtime]") {
  ControlServer server(kAddr, 0, kToken);
  std::string wait_msg = "unset", barrier_msg = "unset";
  std::thread waiter = CaptureError(&wait_msg, [&] {
    ControlClient c(kAddr, server.port(), 1, kToken, 5);
    c.Wait({"never"}, 30);
  });
  std::thread barrier = CaptureError(&barrier_msg, [&] {
    ControlClient c(kAddr, server.port(), 2, kToken, 5);
    c.Barrier("step", 3, 30);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto start = std::chrono::steady_clock::now();
  ControlClient aborter(kAddr, server.port(), 3, kToken, 5);
  aborter.Abort("CUDA out of memory");
  waiter.join();
  barrier.join();
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  REQUIRE(took < 5);
  REQUIRE_THAT(wait_msg, Catch::Contains("control plane: rank 1 ") &&
                             Catch::Contains("rank 3 aborted the job: CUDA out of memory"));
  REQUIRE_THAT(barrier_msg, Catch::Contains("control plane: rank 2 ") &&
                                Catch::Contains("barrier 'step'") &&
                                Catch::Contains("rank 3 aborted the job: CUDA out of memory"));

  ControlClient later(kAddr, server.port(), 0, kToken, 5);
  later.Set("ready", "1");
  REQUIRE_THROWS_WITH(later.Wait({"ready"}, 5),
                      Catch::Contains("rank 3 aborted the job: CUDA out of memory"));
  REQUIRE_THROWS_WITH(later.Barrier("next", 2, 5),
                      Catch::Contains("rank 3 aborted the job: CUDA out of memory"));
  REQUIRE_THROWS_WITH(later.Heartbeat(),
                      Catch::Contains("rank 3 aborted the job: CUDA out of memory"));
}

TEST_CASE("control plane: a client's clock offset to the master's", "[runtime]") {
  ControlServer server(kAddr, 0, kToken);
  ControlClient c(kAddr, server.port(), 0, kToken, 5);
  auto [offset, rtt] = c.MasterClockOffset(4);
  // One process, one steady clock: the offset is within the round trip it was measured over.
  REQUIRE(rtt > 0);
  REQUIRE(std::abs(offset) <= rtt);
}
