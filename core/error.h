// Errors a user can cause, and the one-line messages that describe them.
//
// Every message names the operation, what it got and what it needed:
//   ONEFLOW_CHECK(a.ndim() >= 1, "matmul: expected a tensor with at least 1 dim, got ", a.ndim());
//   throw oneflow::Error(StrCat("matmul: cannot multiply ", a, " by ", b));
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace oneflow {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// Raised for bad arguments whose Python equivalent is TypeError/IndexError.
class TypeError : public Error {
 public:
  using Error::Error;
};
class IndexError : public Error {
 public:
  using Error::Error;
};

template <typename... Args>
std::string StrCat(Args&&... args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  return os.str();
}

}  // namespace oneflow

#define ONEFLOW_CHECK(cond, ...)                                         \
  do {                                                                   \
    if (!(cond)) throw ::oneflow::Error(::oneflow::StrCat(__VA_ARGS__)); \
  } while (0)
