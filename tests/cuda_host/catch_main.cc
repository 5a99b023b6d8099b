// The main of the stand-in's Catch2 tests (tests/cuda_host/*_test.cc): Catch only, no core
// library, so tools/cuda_host/check.sh builds each test under a sanitizer in seconds.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
