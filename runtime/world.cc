#include "runtime/world.h"

#include <cstdlib>
#include <optional>

#include "core/error.h"

namespace oneflow {
namespace runtime {
namespace {

std::optional<std::string> Env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

long ParseInt(const char* name, const std::string& value, bool allow_suffix = false) {
  size_t used = 0;
  long n = 0;
  try {
    n = std::stol(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || (!allow_suffix && used != value.size())) {
    throw Error(StrCat("world: ", name, "='", value, "' is not an integer"));
  }
  return n;
}

int IntEnv(const char* name, int fallback, bool allow_suffix = false) {
  auto v = Env(name);
  return v ? static_cast<int>(ParseInt(name, *v, allow_suffix)) : fallback;
}

}  // namespace

WorldInfo WorldFromEnv() {
  WorldInfo w;
  if (Env("RANK") && Env("WORLD_SIZE")) {
    w.source = "torchrun";
    w.rank = IntEnv("RANK", 0);
    w.world_size = IntEnv("WORLD_SIZE", 1);
    w.local_rank = IntEnv("LOCAL_RANK", w.rank);
    w.local_world_size = IntEnv("LOCAL_WORLD_SIZE", w.world_size);
  } else if (Env("SLURM_PROCID") && Env("SLURM_NTASKS")) {
    w.source = "slurm";
    w.rank = IntEnv("SLURM_PROCID", 0);
    w.world_size = IntEnv("SLURM_NTASKS", 1);
    w.local_rank = IntEnv("SLURM_LOCALID", 0);
    // SLURM_NTASKS_PER_NODE is set only with --ntasks-per-node; SLURM_TASKS_PER_NODE reads
    // like "4(x2),3": the leading count is this job's usual tasks per node.
    if (Env("SLURM_NTASKS_PER_NODE")) {
      w.local_world_size = IntEnv("SLURM_NTASKS_PER_NODE", 1);
    } else {
      w.local_world_size = IntEnv("SLURM_TASKS_PER_NODE", w.world_size, /*allow_suffix=*/true);
    }
    if (!Env("MASTER_ADDR") && Env("SLURM_LAUNCH_NODE_IPADDR")) {
      w.master_addr = *Env("SLURM_LAUNCH_NODE_IPADDR");
    }
  } else if (Env("OMPI_COMM_WORLD_RANK") && Env("OMPI_COMM_WORLD_SIZE")) {
    w.source = "openmpi";
    w.rank = IntEnv("OMPI_COMM_WORLD_RANK", 0);
    w.world_size = IntEnv("OMPI_COMM_WORLD_SIZE", 1);
    w.local_rank = IntEnv("OMPI_COMM_WORLD_LOCAL_RANK", 0);
    w.local_world_size = IntEnv("OMPI_COMM_WORLD_LOCAL_SIZE", w.world_size);
  }
  if (auto a = Env("MASTER_ADDR")) w.master_addr = *a;
  w.master_port = IntEnv("MASTER_PORT", w.master_port);
  if (auto t = Env("ONEFLOW_JOB_TOKEN")) w.token = *t;
  if (auto t = Env("ONEFLOW_TIMEOUT_SECONDS")) {
    w.timeout_seconds = ParseInt("ONEFLOW_TIMEOUT_SECONDS", *t);
    ONEFLOW_CHECK(w.timeout_seconds > 0, "world: ONEFLOW_TIMEOUT_SECONDS=", *t,
                  " must be positive");
  }

  ONEFLOW_CHECK(w.world_size >= 1, "world: world size ", w.world_size, " (from ", w.source,
                ") must be at least 1");
  ONEFLOW_CHECK(w.rank >= 0 && w.rank < w.world_size, "world: rank ", w.rank, " (from ", w.source,
                ") is outside [0, ", w.world_size, ")");
  ONEFLOW_CHECK(w.local_world_size >= 1 && w.local_rank >= 0 && w.local_rank < w.local_world_size,
                "world: local rank ", w.local_rank, " (from ", w.source, ") is outside [0, ",
                w.local_world_size, ")");
  ONEFLOW_CHECK(w.master_port > 0 && w.master_port < 65536, "world: MASTER_PORT=", w.master_port,
                " is not a TCP port");
  return w;
}

}  // namespace runtime
}  // namespace oneflow
