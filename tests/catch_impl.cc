// Catch's implementation without a main, so that tools can link the test helpers
// (tools/op_facets names the samples of tests/op_samples.cc); catch_main.cc's main runs it.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

namespace oneflow {
namespace testing {
int RunCatch(int argc, char* argv[]) { return Catch::Session().run(argc, argv); }
}  // namespace testing
}  // namespace oneflow
