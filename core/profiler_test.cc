#include "core/profiler.h"

#include <catch2/catch.hpp>
#include <optional>
#include <string>

#include "core/error.h"

using namespace oneflow;

TEST_CASE("profiler: off records nothing, on records nested ranges", "[profiler]") {
  {
    profiler::Range off(profiler::Kind::kOp, "before");
    REQUIRE_FALSE(off.active());
  }
  profiler::Start(profiler::Options{});
  {
    profiler::Range outer(profiler::Kind::kUser, "outer");
    REQUIRE(outer.active());
    profiler::Range inner(profiler::Kind::kCollective, "all_reduce");
    inner.set_bytes(64).set_detail("cpu:[0,1] shm");
  }
  std::vector<profiler::Event> events = profiler::Stop();
  REQUIRE(events.size() == 2);
  REQUIRE(events[0].name == "outer");
  REQUIRE(events[1].name == "all_reduce");
  REQUIRE(events[1].bytes == 64);
  REQUIRE(events[1].detail == "cpu:[0,1] shm");
  REQUIRE(std::string(profiler::KindName(events[1].kind)) == "collective");
  REQUIRE(events[0].start_ns <= events[1].start_ns);
  REQUIRE(events[1].end_ns <= events[0].end_ns);
  REQUIRE(events[0].thread == events[1].thread);
  REQUIRE(profiler::Stop().empty());
}

TEST_CASE("profiler: a range open across stop and start is dropped", "[profiler]") {
  profiler::Start(profiler::Options{});
  std::optional<profiler::Range> r;
  r.emplace(profiler::Kind::kOp, "straddles");
  profiler::Stop();
  profiler::Start(profiler::Options{});
  r.reset();
  REQUIRE(profiler::Stop().empty());
}

TEST_CASE("profiler: memory is counted per range when asked", "[profiler]") {
  profiler::Options o;
  o.profile_memory = true;
  profiler::Start(o);
  {
    profiler::Range r(profiler::Kind::kOp, "alloc");
    profiler::CountMemory(0, 1000);
    profiler::CountMemory(0, -200);
    profiler::CountMemory(1, 50);
  }
  std::vector<profiler::Event> events = profiler::Stop();
  REQUIRE(events.size() == 1);
  REQUIRE(events[0].memory[0] == 800);
  REQUIRE(events[0].memory[1] == 50);
}

TEST_CASE("profiler: one session at a time", "[profiler]") {
  profiler::Start(profiler::Options{});
  REQUIRE_THROWS_WITH(profiler::Start(profiler::Options{}),
                      "profiler: recording is already on (one profile at a time per process)");
  profiler::Stop();
  REQUIRE_FALSE(profiler::Enabled());
}

TEST_CASE("profiler: with_stack takes the installed provider's stack", "[profiler]") {
  profiler::Options o;
  o.with_stack = true;
  REQUIRE_THROWS_WITH(profiler::Start(o), Catch::Contains("with_stack needs a stack provider"));
  profiler::SetStackProvider(
      [] { return std::string("model.py(7): forward\ntrain.py(3): <module>"); });
  profiler::Start(o);
  REQUIRE(profiler::WithStack());
  {
    profiler::Range r(profiler::Kind::kOp, "relu");
    r.set_stack(profiler::CurrentStack());
  }
  std::vector<profiler::Event> events = profiler::Stop();
  REQUIRE_FALSE(profiler::WithStack());
  REQUIRE(events.size() == 1);
  REQUIRE(events[0].stack == "model.py(7): forward\ntrain.py(3): <module>");
  profiler::SetStackProvider(nullptr);
}
