// Who this process is in the job: rank, world size and where the master listens, read from
// the environment the launcher left (torchrun's names first, then SLURM, then Open MPI; with
// none of them the process is rank 0 of 1 and needs no network).
//
//   WorldInfo w = WorldFromEnv();
//   if (w.world_size > 1) ControlClient c(w.master_addr, w.master_port, w.rank, w.token);
#pragma once

#include <string>

namespace oneflow {
namespace runtime {

struct WorldInfo {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  std::string token;             // ONEFLOW_JOB_TOKEN, empty when unset
  double timeout_seconds = 300;  // ONEFLOW_TIMEOUT_SECONDS
  std::string source = "none";   // "torchrun", "slurm", "openmpi" or "none"
};

// Reads the environment; throws oneflow::Error naming the variable when a value is not a
// number or the ranks are inconsistent (rank outside [0, world_size)).
WorldInfo WorldFromEnv();

}  // namespace runtime
}  // namespace oneflow
