// Where a global tensor is laid out: its placement and NdSbp. The interpreter
// (oneflow/global/interpret.h) reads it from every world's tensors; GlobalMeta is one.
//
//   const Layout& l = world.LayoutOf(t);   // l.placement, l.nd_sbp
#pragma once

#include "sbp/sbp.h"

namespace oneflow {
namespace global {

struct Layout {
  sbp::Placement placement;
  sbp::NdSbp nd_sbp;
};

}  // namespace global
}  // namespace oneflow
