#include "core/shard_window.h"

namespace oneflow {

namespace {
thread_local ShardWindowScope* t_scope = nullptr;
}  // namespace

ShardWindowScope::ShardWindowScope(ShardWindowFn fn) : fn_(std::move(fn)), outer_(t_scope) {
  t_scope = this;
}

ShardWindowScope::~ShardWindowScope() { t_scope = outer_; }

ShardWindowPause::ShardWindowPause() : saved_(t_scope) { t_scope = nullptr; }
ShardWindowPause::~ShardWindowPause() { t_scope = saved_; }

std::optional<ShardWindow> TakeShardWindow(const Shape& logical) {
  ShardWindowScope* s = t_scope;
  if (s == nullptr || s->taken_) return std::nullopt;
  ShardWindow w = s->fn_(logical);  // may throw (a layout the shape cannot take): not taken
  s->taken_ = true;
  s->logical_ = logical;
  return w;
}

}  // namespace oneflow
