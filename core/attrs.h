// Attrs: the non-tensor arguments of an op call (dims, flags, scalars), a small ordered list.
//
//   Attrs a;
//   a.Set("dim", std::vector<int64_t>{1}).Set("keepdim", false);
//   a.Get<bool>("keepdim");
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"

namespace oneflow {

using AttrValue = std::variant<int64_t, double, bool, std::vector<int64_t>, std::string, DType>;

class Attrs {
 public:
  // REQUIRES: name is a string literal (stored by pointer).
  Attrs& Set(const char* name, AttrValue v) {
    for (auto& kv : items_) {
      if (std::strcmp(kv.first, name) == 0) {
        kv.second = std::move(v);
        return *this;
      }
    }
    items_.emplace_back(name, std::move(v));
    return *this;
  }
  // Exact overloads: without them a double or bool literal would convert to int first.
  Attrs& Set(const char* name, int v) { return Set(name, AttrValue(static_cast<int64_t>(v))); }
  Attrs& Set(const char* name, int64_t v) { return Set(name, AttrValue(v)); }
  Attrs& Set(const char* name, double v) { return Set(name, AttrValue(v)); }
  Attrs& Set(const char* name, bool v) { return Set(name, AttrValue(v)); }
  Attrs& Set(const char* name, DType v) { return Set(name, AttrValue(v)); }
  Attrs& Set(const char* name, std::vector<int64_t> v) {
    return Set(name, AttrValue(std::move(v)));
  }
  Attrs& Set(const char* name, std::string v) { return Set(name, AttrValue(std::move(v))); }
  bool Has(const char* name) const { return Find(name) != nullptr; }
  template <typename T>
  const T& Get(const char* name) const {
    const AttrValue* v = Find(name);
    if (!v) throw Error(StrCat("attrs: missing attribute '", name, "'"));
    return std::get<T>(*v);
  }
  template <typename T>
  T GetOr(const char* name, T fallback) const {
    const AttrValue* v = Find(name);
    return v ? std::get<T>(*v) : fallback;
  }
  const std::vector<std::pair<const char*, AttrValue>>& items() const { return items_; }
  std::string ToString() const;

 private:
  const AttrValue* Find(const char* name) const {
    for (const auto& kv : items_) {
      if (std::strcmp(kv.first, name) == 0) return &kv.second;
    }
    return nullptr;
  }
  std::vector<std::pair<const char*, AttrValue>> items_;
};

}  // namespace oneflow
