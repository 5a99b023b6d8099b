#include "core/tensor.h"

#include "core/error.h"
#include "core/size_check.h"

namespace oneflow {

namespace {
thread_local bool g_grad_mode = true;
}  // namespace

bool GradModeEnabled() { return g_grad_mode; }
void SetGradMode(bool enabled) { g_grad_mode = enabled; }

Tensor Tensor::Empty(const Shape& shape, DType dtype, const Device& device) {
  // A meta tensor holds no memory, so only the counts are checked: a model described on meta
  // may be larger than this machine.
  int64_t nbytes;
  if (device.type == DeviceType::kMeta) {
    const char* op = CurrentSizeCheckOp();
    nbytes = CheckShape(shape, dtype, op ? op : "empty") * static_cast<int64_t>(SizeOf(dtype));
  } else {
    nbytes = CheckAllocation(shape, dtype, /*op=*/nullptr);
  }
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = Storage::Allocate(device, static_cast<size_t>(nbytes));
  impl->shape = shape;
  impl->strides = ContiguousStrides(shape);
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

Tensor Tensor::FromStorage(std::shared_ptr<Storage> storage, const Shape& shape, DType dtype) {
  ONEFLOW_CHECK(
      storage->nbytes() >=
          static_cast<size_t>(CheckShape(shape, dtype, "Tensor::FromStorage")) * SizeOf(dtype),
      "Tensor::FromStorage: ", storage->nbytes(), " bytes cannot hold ", shape, " of ",
      DTypeName(dtype));
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::move(storage);
  impl->shape = shape;
  impl->strides = ContiguousStrides(shape);
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

Tensor Tensor::MakeView(const Tensor& base, Shape shape, std::vector<int64_t> strides,
                        int64_t offset) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = base.storage();
  impl->shape = std::move(shape);
  impl->strides = std::move(strides);
  impl->offset = offset;
  impl->dtype = base.dtype();
  impl->extension = base.impl()->extension;
  impl->view_base = base.impl()->view_base ? base.impl()->view_base : base.impl_ptr();
  return Tensor(std::move(impl));
}

int64_t Tensor::size(int64_t dim) const { return shape()[WrapDim(dim, ndim(), "size")]; }

void Tensor::ThrowGlobalData() const {
  throw Error(StrCat("a kernel read the data of a global tensor of shape ", shape(),
                     " on the host; the op must go through the global interpreter or use "
                     "to_local() (this rank's shard)"));
}

void Tensor::ThrowMetaData() const {
  throw Error(StrCat("a meta tensor of shape ", shape(), " has no data to read; materialise it ",
                     "first (module.to_empty(device=...), or to_global of a meta module)"));
}

bool Tensor::is_contiguous() const {
  if (numel() == 0) return true;  // as PyTorch: no element is out of place (a 0-size shard)
  int64_t expected = 1;
  for (int64_t i = ndim() - 1; i >= 0; --i) {
    if (shape()[i] != 1 && strides()[i] != expected) return false;
    expected *= shape()[i];
  }
  return true;
}

Tensor& Tensor::set_requires_grad(bool requires_grad) {
  if (!is_leaf()) {
    throw Error(
        "requires_grad_: you can only change requires_grad of leaf tensors; use .detach() to get "
        "a leaf from a non-leaf");
  }
  if (requires_grad && !IsDifferentiable(dtype())) {
    throw Error(
        StrCat("requires_grad_: only tensors of floating point and complex dtype can require "
               "gradients, got ",
               DTypeName(dtype())));
  }
  impl_->mutable_autograd().requires_grad = requires_grad;
  return *this;
}

const std::shared_ptr<Node>& Tensor::grad_fn() const {
  static const std::shared_ptr<Node> none;
  return impl_->autograd ? impl_->autograd->grad_fn : none;
}

Tensor Tensor::grad() const {
  if (!impl_->autograd || !impl_->autograd->grad) return Tensor();
  return Tensor(impl_->autograd->grad);
}

void Tensor::set_grad(const Tensor& grad) {
  if (grad.defined() && grad.shape() != shape()) {
    throw Error(
        StrCat("grad: assigned grad of shape ", grad.shape(), " to a tensor of shape ", shape()));
  }
  impl_->mutable_autograd().grad = grad.impl_ptr();
}

Tensor Tensor::detach() const {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = impl_->storage;
  impl->shape = impl_->shape;
  impl->strides = impl_->strides;
  impl->offset = impl_->offset;
  impl->dtype = impl_->dtype;
  impl->extension = impl_->extension;
  return Tensor(std::move(impl));
}

std::string Tensor::ToString() const {
  if (!defined()) return "tensor(undefined)";
  return StrCat("tensor(shape=", shape(), ", dtype=", DTypeName(dtype()),
                ", device=", device().ToString(), ")");
}

}  // namespace oneflow
