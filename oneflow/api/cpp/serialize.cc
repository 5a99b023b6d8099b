#include "oneflow/api/cpp/serialize.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "oneflow/global/global_tensor.h"
#include "runtime/env.h"

namespace oneflow {
namespace nn {
namespace {

using json = nlohmann::json;

constexpr uint64_t kMaxHeader = 100000000;  // the reference implementation's limit

struct Code {
  const char* name;
  DType dtype;
};
constexpr Code kCodes[] = {
    {"BOOL", DType::kBool},     {"U8", DType::kUInt8},    {"I8", DType::kInt8},
    {"I32", DType::kInt32},     {"I64", DType::kInt64},   {"F16", DType::kFloat16},
    {"BF16", DType::kBFloat16}, {"F32", DType::kFloat32}, {"F64", DType::kFloat64}};
// Valid safetensors dtypes oneflow has no type for.
constexpr const char* kLacking[] = {"I16",     "U16", "U32",     "U64",     "F8_E4M3", "F8_E5M2",
                                    "F8_E8M0", "F4",  "F6_E2M3", "F6_E3M2", "C64"};

const char* CodeOf(DType d) {
  for (const auto& c : kCodes) {
    if (c.dtype == d) return c.name;
  }
  throw Error(StrCat("SaveStateDict: no safetensors dtype for ", DTypeName(d)));
}

[[noreturn]] void Refuse(const std::string& what, const std::string& why) {
  throw Error(StrCat(what, ": ", why));
}

// The whole tensor's bytes on the host (a global tensor is gathered: a collective).
Tensor Whole(const Tensor& t) {
  Tensor x = t.detach();
  if (x.is_global()) {
    const auto& meta = global::Meta(x);
    x = global::ToLocal(
        global::ToGlobal(x, meta.placement, sbp::NdSbp(meta.nd_sbp.size(), sbp::Sbp::Broadcast())));
  }
  if (!x.is_cpu()) x = fn::to_device(x, Device::CPU());
  return fn::contiguous(x);
}

void WriteAtomically(const std::string& path, const std::string& header,
                     const std::vector<Tensor>& data) {
  const std::string tmp = StrCat(path, ".", getpid(), ".tmp");
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0666);
  if (fd < 0) {
    throw Error(StrCat("SaveStateDict: cannot write '", path, "': ", std::strerror(errno)));
  }
  auto put = [&](const void* p, size_t n) {
    const char* c = static_cast<const char*>(p);
    while (n > 0) {
      ssize_t w = write(fd, c, n);
      if (w < 0) {
        int err = errno;
        close(fd);
        unlink(tmp.c_str());
        throw Error(StrCat("SaveStateDict: writing '", path, "' failed: ", std::strerror(err)));
      }
      c += w;
      n -= static_cast<size_t>(w);
    }
  };
  const uint64_t n = header.size();  // little-endian on every machine we build for
  put(&n, sizeof(n));
  put(header.data(), header.size());
  for (const Tensor& t : data)
    put(t.raw_data(), static_cast<size_t>(t.numel()) * SizeOf(t.dtype()));
  if (fsync(fd) != 0 || close(fd) != 0 || rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    unlink(tmp.c_str());
    throw Error(StrCat("SaveStateDict: cannot write '", path, "': ", std::strerror(err)));
  }
}

}  // namespace

void SaveStateDict(const StateDict& state, const std::string& path,
                   const std::map<std::string, std::string>& metadata) {
  bool any_global = false;
  struct Item {
    std::string name;
    const char* code;
    Tensor data;
  };
  std::vector<Item> items;
  for (const auto& [name, t] : state) {
    if (name == "__metadata__") Refuse("SaveStateDict", "a tensor cannot be named __metadata__");
    any_global |= t.is_global();
    items.push_back({name, CodeOf(t.dtype()), Whole(t)});
  }
  // Largest elements first, then by name: every tensor stays aligned (the reference order).
  std::stable_sort(items.begin(), items.end(), [](const Item& a, const Item& b) {
    size_t sa = SizeOf(a.data.dtype()), sb = SizeOf(b.data.dtype());
    return sa != sb ? sa > sb : a.name < b.name;
  });
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  std::vector<Tensor> data;
  for (const Item& it : items) {
    const uint64_t bytes = static_cast<uint64_t>(it.data.numel()) * SizeOf(it.data.dtype());
    header[it.name] = {{"dtype", it.code},
                       {"shape", it.data.shape().dims()},
                       {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    data.push_back(it.data);
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  runtime::Env* env = any_global ? &runtime::Env::Get() : nullptr;
  if (env == nullptr || env->rank() == 0) WriteAtomically(path, text, data);
  if (env != nullptr && env->world_size() > 1) env->WorldComm().Barrier();
}

StateDict LoadStateDict(const std::string& path) {
  const std::string what = StrCat("safe_open: '", path, "'");
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error(StrCat("safe_open: no such file '", path, "'"));
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (bytes.size() < 8) {
    Refuse(what,
           StrCat("the file holds ", bytes.size(), " bytes, less than the 8-byte header length"));
  }
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  if (n > kMaxHeader) {
    Refuse(what, StrCat("header length ", n, " exceeds the limit of ", kMaxHeader, " bytes"));
  }
  if (8 + n > bytes.size()) {
    Refuse(what, StrCat("header length ", n, " runs past the end of the file (", bytes.size(),
                        " bytes)"));
  }
  json header;
  try {
    header = json::parse(bytes.begin() + 8, bytes.begin() + 8 + static_cast<int64_t>(n));
  } catch (const json::exception& e) {
    Refuse(what, StrCat("the header is not JSON (", e.what(), ")"));
  }
  if (!header.is_object()) Refuse(what, "the header is a JSON value, not an object");
  struct Entry {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    uint64_t begin, end;
  };
  std::vector<Entry> entries;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    const std::string& name = it.key();
    const json& info = it.value();
    if (!info.is_object() || info.size() != 3 || !info.contains("dtype") ||
        !info.contains("shape") || !info.contains("data_offsets")) {
      Refuse(what, StrCat("tensor '", name, "' needs exactly dtype, shape and data_offsets"));
    }
    const std::string code = info["dtype"].is_string() ? info["dtype"].get<std::string>() : "?";
    const Code* found = nullptr;
    for (const auto& c : kCodes) {
      if (code == c.name) found = &c;
    }
    if (found == nullptr) {
      for (const char* l : kLacking) {
        if (code == l) {
          Refuse(what,
                 StrCat("tensor '", name, "' has dtype ", code, ", which oneflow does not have"));
        }
      }
      Refuse(what, StrCat("tensor '", name, "' has unknown dtype '", code, "'"));
    }
    Entry e{name, found->dtype, {}, 0, 0};
    const json& shape = info["shape"];
    bool shape_ok = shape.is_array();
    for (const auto& d : shape) {
      shape_ok &= d.is_number_integer() && d.get<int64_t>() >= 0;
      if (shape_ok) e.shape.push_back(d.get<int64_t>());
    }
    if (!shape_ok) {
      Refuse(what, StrCat("tensor '", name, "' has shape ", shape.dump(),
                          "; expected a list of sizes >= 0"));
    }
    const json& off = info["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() ||
        !off[1].is_number_unsigned()) {
      Refuse(what, StrCat("tensor '", name, "' has data_offsets ", off.dump(),
                          "; expected [begin, end]"));
    }
    e.begin = off[0].get<uint64_t>();
    e.end = off[1].get<uint64_t>();
    uint64_t numel = 1;
    for (int64_t d : e.shape) numel *= static_cast<uint64_t>(d);
    const uint64_t need = numel * SizeOf(e.dtype);
    if (e.end < e.begin || e.end - e.begin != need) {
      Refuse(what, StrCat("tensor '", name, "' of shape ", Shape(e.shape).ToString(), " and dtype ",
                          code, " needs ", need, " bytes but data_offsets ", off.dump(), " span ",
                          static_cast<int64_t>(e.end) - static_cast<int64_t>(e.begin)));
    }
    entries.push_back(std::move(e));
  }
  std::vector<const Entry*> by_offset;
  for (const auto& e : entries) by_offset.push_back(&e);
  std::sort(by_offset.begin(), by_offset.end(), [](const Entry* a, const Entry* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  const uint64_t data_size = bytes.size() - 8 - n;
  uint64_t position = 0;
  for (const Entry* e : by_offset) {
    if (e->begin != position) {
      Refuse(what, StrCat("tensor '", e->name, "' at data_offsets [", e->begin, ", ", e->end, "] ",
                          e->begin < position
                              ? "overlaps the tensor before it"
                              : StrCat("leaves bytes ", position, "..", e->begin, " unused")));
    }
    position = e->end;
  }
  if (position != data_size) {
    Refuse(what, StrCat("the tensors end at byte ", position, " of the data but the file holds ",
                        data_size, " bytes of data", position > data_size ? " (truncated?)" : ""));
  }
  // Keys in name order, as Python's safe_open lists them.
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.name < b.name; });
  StateDict out;
  const char* data = bytes.data() + 8 + n;
  for (const auto& e : entries) {
    out.emplace_back(e.name, fn::from_blob_copy(data + e.begin, Shape(e.shape), e.dtype));
  }
  return out;
}

}  // namespace nn
}  // namespace oneflow
