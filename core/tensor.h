// Tensor: a handle to a strided view of a Storage plus its autograd state.
// Copying a Tensor copies the handle; views (reshape, transpose, slice, expand) share storage.
//
//   Tensor x = Tensor::Empty(Shape({2, 3}), DType::kFloat32, Device::CPU());
//   x.set_requires_grad(true);
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/shape.h"
#include "core/storage.h"

namespace oneflow {

class Node;
class Tensor;
class TensorImpl;

// Metadata a layer above core attaches to a tensor (the global tensor's placement and nd_sbp).
// core only checks for its presence to route op calls to the installed interpreter.
struct TensorExtension {
  virtual ~TensorExtension() = default;
};

struct AutogradMeta {
  bool requires_grad = false;
  bool retains_grad = false;
  std::shared_ptr<Node> grad_fn;  // null for leaves
  int output_nr = 0;
  std::shared_ptr<TensorImpl> grad;
  std::weak_ptr<Node> grad_accumulator;
  // Run after a gradient was accumulated into this leaf (DDP's bucketing hooks here).
  std::vector<std::function<void(const Tensor&)>> post_accumulate_grad_hooks;
  // A leaf's gradient hooks (register_hook), run in order on each gradient before it is
  // accumulated; each may return a replacement (undefined: keep). A non-leaf's hooks live on
  // its grad_fn (Node::grad_hooks), which sees its gradient whole.
  std::vector<std::pair<int64_t, std::function<Tensor(const Tensor&)>>> grad_hooks;
  // Where this leaf's next gradient is best computed (DDP points it into its bucket): offered
  // to the one node that produces the whole gradient while .grad is unset, which may write the
  // gradient there and hand that tensor on; it then becomes .grad without a copy.
  std::shared_ptr<TensorImpl> grad_buffer;
  // Bumped each time an in-place write rebases this tensor's history (a new grad_fn).
  uint64_t generation = 0;
  // A differentiable view (a view op's output of a tensor that required grad, or a view written
  // in place): its history is a view of its root's (TensorImpl::view_base). root_generation is
  // the root's generation that grad_fn was made against; once an in-place write rebased the
  // root since, grad_fn is remade as a view of the root's new history (RefreshViewHistory).
  bool is_view = false;
  uint64_t root_generation = 0;
};

class TensorImpl {
 public:
  std::shared_ptr<Storage> storage;
  Shape shape;
  std::vector<int64_t> strides;  // in elements
  int64_t offset = 0;            // in elements
  DType dtype = DType::kFloat32;
  std::unique_ptr<AutogradMeta> autograd;  // created on first use
  std::shared_ptr<TensorExtension> extension;
  // The tensor this one is a view of (the root, never itself a view); null for non-views.
  std::shared_ptr<TensorImpl> view_base;

  AutogradMeta& mutable_autograd() {
    if (!autograd) autograd = std::make_unique<AutogradMeta>();
    return *autograd;
  }
};

struct TensorMeta {
  Shape shape;
  DType dtype;
  Device device;
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // Uninitialised contiguous tensor.
  static Tensor Empty(const Shape& shape, DType dtype, const Device& device);
  static Tensor Empty(const TensorMeta& meta) { return Empty(meta.shape, meta.dtype, meta.device); }
  // A contiguous tensor over existing storage (at least shape.numel() elements of dtype).
  static Tensor FromStorage(std::shared_ptr<Storage> storage, const Shape& shape, DType dtype);
  // A view of base's storage with new geometry; no autograd state.
  static Tensor MakeView(const Tensor& base, Shape shape, std::vector<int64_t> strides,
                         int64_t offset);

  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const { return impl_->shape; }
  int64_t ndim() const { return impl_->shape.ndim(); }
  int64_t numel() const { return impl_->shape.numel(); }
  int64_t size(int64_t dim) const;  // negative dims count from the end
  DType dtype() const { return impl_->dtype; }
  const Device& device() const { return impl_->storage->device(); }
  const std::vector<int64_t>& strides() const { return impl_->strides; }
  int64_t offset() const { return impl_->offset; }
  TensorMeta meta() const { return TensorMeta{shape(), dtype(), device()}; }
  bool is_contiguous() const;
  bool is_cpu() const { return device().type == DeviceType::kCPU; }
  bool is_global() const { return impl_->extension != nullptr; }
  [[noreturn]] void ThrowGlobalData() const;
  [[noreturn]] void ThrowMetaData() const;
  // While nn.Graph traces (core/trace.h), host code touching a tensor's memory outside a kernel
  // is reported: a replay could not redo it.
  static thread_local bool t_trace_host_access;
  void NoteHostAccess() const;

  // Address of element 0 of this view. A global tensor holds no data of its own (its shard
  // does): asking for it is an error, not a read of nothing.
  void* raw_data() const {
    if (impl_->extension) ThrowGlobalData();
    if (impl_->storage->device().type == DeviceType::kMeta) ThrowMetaData();
    if (t_trace_host_access) NoteHostAccess();
    return static_cast<char*>(impl_->storage->data()) + impl_->offset * SizeOf(dtype());
  }
  template <typename T>
  T* data() const {
    return static_cast<T*>(raw_data());
  }
  const std::shared_ptr<Storage>& storage() const { return impl_->storage; }

  // Autograd.
  bool requires_grad() const { return impl_->autograd && impl_->autograd->requires_grad; }
  // REQUIRES: a leaf (setting it on a non-leaf is an error, as in PyTorch).
  Tensor& set_requires_grad(bool requires_grad);
  bool is_leaf() const { return !impl_->autograd || !impl_->autograd->grad_fn; }
  const std::shared_ptr<Node>& grad_fn() const;
  Tensor grad() const;
  void set_grad(const Tensor& grad);
  void retain_grad();
  // A new handle on the same data, cut from the graph.
  Tensor detach() const;
  // REQUIRES: grad given unless this holds one element. RunBackward({*this}, {grad},
  // retain_graph), the free function of autograd's engine, which defines this member
  // (core/autograd.cc): the engine sits above the tensor and the op calls.
  void backward(const Tensor& grad = Tensor(), bool retain_graph = false) const;

  // "tensor(shape=(2, 3), dtype=float32, device=cpu)" for messages.
  std::string ToString() const;

  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool is_same(const Tensor& o) const { return impl_ == o.impl_; }
  // The tensor this is a view of; undefined when it is not a view.
  Tensor view_base() const { return Tensor(impl_->view_base); }

 private:
  std::shared_ptr<TensorImpl> impl_;
};

// Grad mode: while disabled, op calls record no graph (oneflow.no_grad()).
bool GradModeEnabled();
void SetGradMode(bool enabled);
class NoGradGuard {
 public:
  NoGradGuard() : prev_(GradModeEnabled()) { SetGradMode(false); }
  ~NoGradGuard() { SetGradMode(prev_); }

 private:
  bool prev_;
};

}  // namespace oneflow
