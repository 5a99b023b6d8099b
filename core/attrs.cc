#include "core/attrs.h"

namespace oneflow {

std::string Attrs::ToString() const {
  std::string s;
  for (const auto& [name, v] : items_) {
    if (!s.empty()) s += ", ";
    s += name;
    s += "=";
    std::visit(
        [&](const auto& x) {
          using X = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<X, std::vector<int64_t>>) {
            s += "[";
            for (size_t i = 0; i < x.size(); ++i) s += (i ? ", " : "") + std::to_string(x[i]);
            s += "]";
          } else if constexpr (std::is_same_v<X, std::string>) {
            s += x;
          } else if constexpr (std::is_same_v<X, DType>) {
            s += DTypeName(x);
          } else if constexpr (std::is_same_v<X, bool>) {
            s += x ? "true" : "false";
          } else {
            s += std::to_string(x);
          }
        },
        v);
  }
  return s;
}

}  // namespace oneflow
