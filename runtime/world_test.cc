#include "runtime/world.h"

#include <catch2/catch.hpp>
#include <cstdlib>

#include "core/error.h"

using oneflow::runtime::WorldFromEnv;
using oneflow::runtime::WorldInfo;

namespace {

const char* kAllVars[] = {
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "SLURM_PROCID",
    "SLURM_NTASKS",
    "SLURM_LOCALID",
    "SLURM_NTASKS_PER_NODE",
    "SLURM_TASKS_PER_NODE",
    "SLURM_LAUNCH_NODE_IPADDR",
    "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "OMPI_COMM_WORLD_LOCAL_SIZE",
    "ONEFLOW_JOB_TOKEN",
    "ONEFLOW_TIMEOUT_SECONDS",
};

void ClearEnv() {
  for (const char* v : kAllVars) unsetenv(v);
}

}  // namespace

TEST_CASE("world: nothing set is rank 0 of 1", "[runtime]") {
  ClearEnv();
  WorldInfo w = WorldFromEnv();
  REQUIRE(w.rank == 0);
  REQUIRE(w.world_size == 1);
  REQUIRE(w.local_rank == 0);
  REQUIRE(w.local_world_size == 1);
  REQUIRE(w.master_addr == "127.0.0.1");
  REQUIRE(w.master_port == 29500);
  REQUIRE(w.token.empty());
  REQUIRE(w.timeout_seconds == 300);
  REQUIRE(w.source == "none");
}

TEST_CASE("world: torchrun variables", "[runtime]") {
  ClearEnv();
  setenv("RANK", "5", 1);
  setenv("WORLD_SIZE", "8", 1);
  setenv("LOCAL_RANK", "1", 1);
  setenv("LOCAL_WORLD_SIZE", "4", 1);
  setenv("MASTER_ADDR", "10.0.0.7", 1);
  setenv("MASTER_PORT", "29511", 1);
  setenv("ONEFLOW_JOB_TOKEN", "abc123", 1);
  setenv("ONEFLOW_TIMEOUT_SECONDS", "42", 1);
  // torchrun wins over variables another launcher may have left behind.
  setenv("OMPI_COMM_WORLD_RANK", "0", 1);
  setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
  WorldInfo w = WorldFromEnv();
  REQUIRE(w.source == "torchrun");
  REQUIRE(w.rank == 5);
  REQUIRE(w.world_size == 8);
  REQUIRE(w.local_rank == 1);
  REQUIRE(w.local_world_size == 4);
  REQUIRE(w.master_addr == "10.0.0.7");
  REQUIRE(w.master_port == 29511);
  REQUIRE(w.token == "abc123");
  REQUIRE(w.timeout_seconds == 42);
  ClearEnv();
}

TEST_CASE("world: SLURM variables", "[runtime]") {
  ClearEnv();
  setenv("SLURM_PROCID", "3", 1);
  setenv("SLURM_NTASKS", "4", 1);
  setenv("SLURM_LOCALID", "1", 1);
  setenv("SLURM_NTASKS_PER_NODE", "2", 1);
  setenv("SLURM_LAUNCH_NODE_IPADDR", "10.1.2.3", 1);
  WorldInfo w = WorldFromEnv();
  REQUIRE(w.source == "slurm");
  REQUIRE(w.rank == 3);
  REQUIRE(w.world_size == 4);
  REQUIRE(w.local_rank == 1);
  REQUIRE(w.local_world_size == 2);
  REQUIRE(w.master_addr == "10.1.2.3");
  REQUIRE(w.timeout_seconds == 300);

  unsetenv("SLURM_NTASKS_PER_NODE");
  setenv("SLURM_TASKS_PER_NODE", "2(x2)", 1);
  setenv("MASTER_ADDR", "node01", 1);
  w = WorldFromEnv();
  REQUIRE(w.local_world_size == 2);
  REQUIRE(w.master_addr == "node01");

  // Rank 0 runs on the step's first node; the port follows the job id.
  unsetenv("MASTER_ADDR");
  setenv("SLURM_STEP_NODELIST", "gpu[007-009,12],login1", 1);
  setenv("SLURM_JOB_ID", "123456", 1);
  w = WorldFromEnv();
  REQUIRE(w.master_addr == "gpu007");
  REQUIRE(w.master_port == 20000 + 123456 % 20000);
  setenv("SLURM_STEP_NODELIST", "login1,gpu[1-2]", 1);
  setenv("MASTER_PORT", "29999", 1);
  w = WorldFromEnv();
  REQUIRE(w.master_addr == "login1");
  REQUIRE(w.master_port == 29999);
  ClearEnv();
}

TEST_CASE("world: Open MPI variables", "[runtime]") {
  ClearEnv();
  setenv("OMPI_COMM_WORLD_RANK", "2", 1);
  setenv("OMPI_COMM_WORLD_SIZE", "6", 1);
  setenv("OMPI_COMM_WORLD_LOCAL_RANK", "0", 1);
  setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "3", 1);
  // On several nodes nothing in Open MPI's variables says where rank 0 is.
  REQUIRE_THROWS_WITH(WorldFromEnv(),
                      Catch::Contains("world: started by Open MPI on several nodes (6 ranks, 3 on "
                                      "this one): set MASTER_ADDR to rank 0's host, e.g. mpirun "
                                      "-x MASTER_ADDR=<host of rank 0> ..."));
  setenv("MASTER_ADDR", "node01", 1);
  WorldInfo w = WorldFromEnv();
  REQUIRE(w.source == "openmpi");
  REQUIRE(w.rank == 2);
  REQUIRE(w.world_size == 6);
  REQUIRE(w.local_rank == 0);
  REQUIRE(w.local_world_size == 3);
  REQUIRE(w.master_addr == "node01");
  unsetenv("MASTER_ADDR");
  setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "6", 1);  // one node: the master is this host
  REQUIRE(WorldFromEnv().master_addr == "127.0.0.1");
  ClearEnv();
}

TEST_CASE("world: the job's description and this rank's address", "[runtime]") {
  ClearEnv();
  WorldInfo w;
  w.world_size = 4;
  w.local_world_size = 2;
  w.master_addr = "10.0.0.1";
  w.master_port = 29501;
  std::string job = JobDescription(w);
  REQUIRE_THAT(job, Catch::StartsWith("command=world_test"));  // the program's name, no path
  REQUIRE_THAT(job, Catch::EndsWith("\nworld size=4\nranks per node=2\nmaster=10.0.0.1:29501\n"));
  w.master_addr = "127.0.0.1";
  REQUIRE(ReachableAddress(w) == "127.0.0.1");  // the whole job is on this host
  w.master_addr = "localhost";
  REQUIRE(ReachableAddress(w) == "127.0.0.1");
  setenv("ONEFLOW_HOSTNAME", "node7.example", 1);
  REQUIRE(ReachableAddress(w) == "node7.example");
  unsetenv("ONEFLOW_HOSTNAME");
  w.master_addr = "no-such-host.invalid";
  REQUIRE_THROWS_WITH(ReachableAddress(w),
                      Catch::Contains("world: cannot resolve the master address "
                                      "'no-such-host.invalid': "));
  ClearEnv();
}

TEST_CASE("world: bad values name the variable", "[runtime]") {
  ClearEnv();
  setenv("RANK", "two", 1);
  setenv("WORLD_SIZE", "4", 1);
  REQUIRE_THROWS_WITH(WorldFromEnv(), Catch::Contains("world: RANK='two' is not an integer"));
  setenv("RANK", "4", 1);
  REQUIRE_THROWS_WITH(WorldFromEnv(), Catch::Contains("rank 4 (from torchrun) is outside [0, 4)"));
  ClearEnv();
  setenv("ONEFLOW_TIMEOUT_SECONDS", "soon", 1);
  REQUIRE_THROWS_WITH(WorldFromEnv(),
                      Catch::Contains("world: ONEFLOW_TIMEOUT_SECONDS='soon' is not an integer"));
  ClearEnv();
}
