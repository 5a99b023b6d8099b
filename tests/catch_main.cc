// The main of every Catch suite (Catch itself: tests/catch_impl.cc).
namespace oneflow {
namespace testing {
int RunCatch(int argc, char* argv[]);
}  // namespace testing
}  // namespace oneflow

int main(int argc, char* argv[]) { return oneflow::testing::RunCatch(argc, argv); }
