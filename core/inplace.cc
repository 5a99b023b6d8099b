#include "core/inplace.h"

#include "core/autograd.h"
#include "core/dispatch.h"
#include "core/functional.h"

namespace oneflow {

namespace {

// Where a view's elements sit in its root (a contiguous tensor), as the autograd nodes below
// need it: they gather a view's gradient out of the root's and scatter it back, with ops
// (gather, scatter_add, mul) so that gradients through them are differentiable again.
struct ViewGeometry {
  Shape shape;
  std::vector<int64_t> strides;
  int64_t offset = 0;  // from the root's element 0
  TensorMeta root;

  // The root's flat position of each of the view's elements, in the view's order (1-D int64).
  Tensor Positions(const Device& device) const {
    const int64_t n = shape.numel();
    Tensor p = Tensor::Empty(Shape({n}), DType::kInt64, Device::CPU());
    int64_t* d = p.data<int64_t>();
    std::vector<int64_t> idx(shape.ndim(), 0);
    for (int64_t i = 0; i < n; ++i) {
      int64_t off = offset;
      for (int64_t k = 0; k < shape.ndim(); ++k) off += idx[k] * strides[k];
      d[i] = off;
      for (int64_t k = shape.ndim() - 1; k >= 0; --k) {
        if (++idx[k] < shape[k]) break;
        idx[k] = 0;
      }
    }
    return fn::to_device(p, device);
  }
  // g (the view's shape) scattered into zeros of the root's shape.
  Tensor Scatter(const Tensor& g) const {
    static const OpDef& scatter_add = OpRegistry::Global().Get("scatter_add");
    Attrs a;
    a.Set("dim", int64_t{0}).Set("shape", std::vector<int64_t>{root.shape.numel()});
    Tensor flat = CallOp1(scatter_add, {Positions(g.device()), fn::reshape(g, {-1})}, a);
    return fn::reshape(flat, root.shape.dims());
  }
  // The view's part of g (the root's shape).
  Tensor Gather(const Tensor& g) const {
    Tensor flat = fn::gather(fn::reshape(g, {-1}), 0, Positions(g.device()));
    return fn::reshape(flat, shape.dims());
  }
};

ViewGeometry GeometryOf(const Tensor& view, const Tensor& root, const char* op) {
  if (!root.is_contiguous()) {
    throw Error(StrCat(op, ": writing in place into a view of a non-contiguous tensor (",
                       root.ToString(), ") that autograd follows is not supported; write into ",
                       "a contiguous copy"));
  }
  return ViewGeometry{view.shape(), view.strides(), view.offset() - root.offset(), root.meta()};
}

// The history of a view of a root: its gradient goes to the root's, scattered into zeros.
class ViewOfRootNode : public Node {
 public:
  explicit ViewOfRootNode(ViewGeometry g) : g_(std::move(g)) {}
  std::vector<Tensor> Apply(std::vector<Tensor>&& grads) override {
    if (!grads[0].defined()) return {Tensor()};
    return {g_.Scatter(grads[0])};
  }
  std::string name() const override { return "AsStridedBackward0"; }

 private:
  ViewGeometry g_;
};

// The root's history after a write into one of its views: next_edges are the root's old
// history (which gets the gradient outside the view) and the written value's (inside it).
class CopySlicesNode : public Node {
 public:
  explicit CopySlicesNode(ViewGeometry g) : g_(std::move(g)) {}
  std::vector<Tensor> Apply(std::vector<Tensor>&& grads) override {
    const Tensor& g = grads[0];
    if (!g.defined()) return {Tensor(), Tensor()};
    Tensor mask;
    {
      NoGradGuard no_grad;
      mask = fn::ones(g_.root.shape, g.dtype(), g.device());
      fn::fill_(Tensor::MakeView(mask, g_.shape, g_.strides, g_.offset), 0.0);
    }
    Tensor outside = next_edges[0].fn ? fn::mul(g, mask) : Tensor();
    Tensor inside = next_edges[1].fn ? g_.Gather(g) : Tensor();
    return {outside, inside};
  }
  std::string name() const override { return "CopySlices"; }

 private:
  ViewGeometry g_;
};

// A write of a value that does not depend on the old one (fill_, zero_, a constant copy_):
// the old history gets zeros.
class OverwrittenNode : public Node {
 public:
  OverwrittenNode(Tensor like, std::string name) : like_(std::move(like)), name_(std::move(name)) {}
  std::vector<Tensor> Apply(std::vector<Tensor>&&) override { return {fn::zeros_like(like_)}; }
  std::string name() const override { return name_; }

 private:
  Tensor like_;  // detached: the old value's shape, dtype, device, placement
  std::string name_;
};

// The tensor's history becomes the written value's when that value is someone else's tensor.
class PassThroughNode : public Node {
 public:
  std::vector<Tensor> Apply(std::vector<Tensor>&& grads) override { return std::move(grads); }
  std::string name() const override { return "CopyBackwards"; }
};

// "fill_" -> "FillBackward0".
std::string BackwardName(const char* op) {
  std::string n;
  bool upper = true;
  for (const char* p = op; *p; ++p) {
    if (*p == '_') {
      upper = true;
      continue;
    }
    n += upper ? static_cast<char>(std::toupper(static_cast<unsigned char>(*p))) : *p;
    upper = false;
  }
  return n + "Backward0";
}

void CheckFits(const Tensor& r, const Tensor& t, const char* op) {
  if (r.shape() == t.shape()) return;
  Shape s = BroadcastShapes(t.shape(), r.shape(), op);
  if (s != t.shape()) {
    throw Error(StrCat(op, ": result of shape ", r.shape(),
                       " does not fit the in-place tensor of shape ", t.shape()));
  }
}

// r broadcast, cast and moved to be t's new value, differentiably.
Tensor Fit(Tensor r, const Tensor& t, const char* op) {
  CheckFits(r, t, op);
  if (r.shape() != t.shape()) r = fn::expand(r, t.shape().dims());
  if (r.dtype() != t.dtype()) r = fn::to_dtype(r, t.dtype());
  if (!t.is_global() && !r.is_global() && r.device() != t.device()) {
    r = fn::to_device(r, t.device());
  }
  return r;
}

void SetHistory(const Tensor& t, std::shared_ptr<Node> node, int output_nr) {
  AutogradMeta& am = t.impl()->mutable_autograd();
  am.grad_fn = std::move(node);
  am.output_nr = output_nr;
  am.requires_grad = true;
  ++am.generation;
}

std::shared_ptr<Node> MakeViewHistory(const Tensor& view, const Tensor& root) {
  auto node = std::make_shared<ViewOfRootNode>(GeometryOf(view, root, "autograd"));
  node->next_edges.push_back(GradientEdge(root));
  node->output_metas.push_back(view.meta());
  return node;
}

struct InstallViewHistoryMaker {
  InstallViewHistoryMaker() { SetViewHistoryMaker(&MakeViewHistory); }
} install_view_history_maker;

}  // namespace

void CheckInPlace(const Tensor& t, const char* op) {
  if (!GradModeEnabled()) return;
  Tensor base = t.view_base();
  for (const Tensor& u : {t, base}) {
    if (u.defined() && u.requires_grad() && u.is_leaf()) {
      throw Error(StrCat(op, ": a leaf tensor that requires grad",
                         u.is_same(t) ? "" : " (or a view of one)",
                         " cannot be modified in place; wrap the update in `with "
                         "oneflow.no_grad():`"));
    }
  }
}

void InPlace(const Tensor& t, const std::function<Tensor(const Tensor&)>& f, const char* op) {
  if (!GradModeEnabled()) {
    Tensor r = f(t);
    CheckFits(r, t, op);
    fn::copy_(t, r);
    return;
  }
  RefreshViewHistory(t);
  CheckInPlace(t, op);
  Tensor root = t.view_base();
  const bool tracked = t.requires_grad() || (root.defined() && root.requires_grad());
  if (!tracked) {
    // Nothing to follow unless the written value requires grad.
    Tensor r = f(t.detach());
    if (!r.requires_grad()) {
      CheckFits(r, t, op);
      fn::copy_(t, r);
      return;
    }
  }
  if (root.defined() && t.is_global()) {
    throw Error(StrCat(op, ": in-place writes into a view of a global tensor are not followed by ",
                       "autograd; write the whole tensor, or compute the result out of place"));
  }
  ViewGeometry geometry;
  if (root.defined()) geometry = GeometryOf(t, root, op);
  // f sees a copy of t's value with t's history: what f's gradient saves stays intact.
  Tensor src;
  {
    NoGradGuard no_grad;
    src = fn::contiguous_copy(t);
  }
  if (root.defined() && root.requires_grad()) {
    auto node = std::make_shared<ViewOfRootNode>(geometry);
    node->next_edges.push_back(GradientEdge(root));
    node->output_metas.push_back(t.meta());
    SetHistory(src, node, 0);
  } else if (!root.defined() && t.requires_grad()) {
    Edge e = GradientEdge(t);
    SetHistory(src, e.fn, e.input_nr);
  }
  Tensor r = Fit(f(src), t, op);
  {
    NoGradGuard no_grad;
    fn::copy_(t, r.detach());
  }

  if (root.defined()) {
    auto copy_slices = std::make_shared<CopySlicesNode>(geometry);
    copy_slices->next_edges.push_back(GradientEdge(root));  // the root's history so far
    copy_slices->next_edges.push_back(r.requires_grad() ? GradientEdge(r) : Edge{});
    copy_slices->output_metas.push_back(root.meta());
    SetHistory(root, copy_slices, 0);
    auto view_node = std::make_shared<ViewOfRootNode>(geometry);
    view_node->next_edges.push_back(Edge{copy_slices, 0});
    view_node->output_metas.push_back(t.meta());
    SetHistory(t, view_node, 0);
    AutogradMeta& am = t.impl()->mutable_autograd();
    am.is_view = true;
    am.root_generation = root.impl()->autograd->generation;
    return;
  }
  // A fresh result (only this handle on it) lends t its node; another tensor's (copy_ of a
  // tensor) or a leaf's gets one of t's own.
  if (r.requires_grad() && !r.is_leaf() && r.impl_ptr().use_count() == 1) {
    Edge e = GradientEdge(r);
    SetHistory(t, e.fn, e.input_nr);
    return;
  }
  std::shared_ptr<Node> node;
  if (r.requires_grad()) {
    node = std::make_shared<PassThroughNode>();
    node->next_edges.push_back(GradientEdge(r));
  } else {
    node = std::make_shared<OverwrittenNode>(t.detach(), BackwardName(op));
    node->next_edges.push_back(GradientEdge(src));
  }
  node->output_metas.push_back(t.meta());
  SetHistory(t, node, 0);
}

}  // namespace oneflow
