// State dicts on disk, in the files Python reads: safetensors (huggingface's format: an 8-byte
// header length, a JSON header of dtype / shape / data_offsets, raw little-endian data).
// Python loads them with `flow.load(path)` (or oneflow.utils.safetensors.load_file) and writes
// them with `oneflow.utils.safetensors.save_file(model.state_dict(), path)`.
//
//   nn::SaveStateDict(model->state_dict(), "model.safetensors");
//   model->load_state_dict(nn::LoadStateDict("model.safetensors"));
//
// Global tensors are saved whole (gathered: every rank calls SaveStateDict; rank 0 writes the
// file, atomically, and every rank returns once it is complete). A file whose header does not
// describe its data exactly is refused with one line (the same lines Python prints).
#pragma once

#include <map>
#include <string>

#include "oneflow/api/cpp/nn.h"

namespace oneflow {
namespace nn {

void SaveStateDict(const StateDict& state, const std::string& path,
                   const std::map<std::string, std::string>& metadata = {});
StateDict LoadStateDict(const std::string& path);

}  // namespace nn
}  // namespace oneflow
