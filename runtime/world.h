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
// number or the ranks are inconsistent (rank outside [0, world_size)). Under Slurm the master
// is the first node of the step (port MASTER_PORT, else one derived from the job id); under
// Open MPI on one node it is 127.0.0.1, on several MASTER_ADDR must name rank 0's host.
WorldInfo WorldFromEnv();

// ONEFLOW_HEARTBEAT_TIMEOUT_SECONDS (default 10): how long the master waits for a silent rank
// before it aborts the job (and how long a rank waits for that verdict after a broken link).
double HeartbeatTimeoutSeconds();

// What every rank of one job shares, as "key=value" lines: the command (without the
// interpreter's path and PyTorch's per-rank --local_rank argument), the sizes and the master.
// Without ONEFLOW_JOB_TOKEN it is the job's token, so the same command started on every node joins
// without any other setting, and a different job on the same port is refused with what differs.
std::string JobDescription(const WorldInfo& w);

// The address this rank's peers reach it at: $ONEFLOW_HOSTNAME, else the address of the
// interface that routes to the master ($ONEFLOW_IFNAME picks an interface instead, see
// Communicator), 127.0.0.1 when the master is this host's loopback (a one-host job).
std::string ReachableAddress(const WorldInfo& w);

}  // namespace runtime
}  // namespace oneflow
