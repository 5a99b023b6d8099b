#include "runtime/world.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>

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

// The first host of a Slurm host list: "node[3-5,9],gpu01" -> "node3" (zero padding kept).
std::string FirstSlurmHost(const std::string& list) {
  std::string first;
  int depth = 0;
  for (char c : list) {
    if (c == ',' && depth == 0) break;
    if (c == '[') ++depth;
    if (c == ']') --depth;
    first += c;
  }
  auto open = first.find('[');
  if (open == std::string::npos) return first;
  std::string range = first.substr(open + 1);
  size_t end = range.find_first_of("-,]");
  return first.substr(0, open) + range.substr(0, end);
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
    // Rank 0 runs on the step's first node (the launch node may be another machine).
    if (auto nodes =
            Env("SLURM_STEP_NODELIST") ? Env("SLURM_STEP_NODELIST") : Env("SLURM_JOB_NODELIST")) {
      w.master_addr = FirstSlurmHost(*nodes);
    } else if (Env("SLURM_LAUNCH_NODE_IPADDR")) {
      w.master_addr = *Env("SLURM_LAUNCH_NODE_IPADDR");
    }
    // One port per job, so two jobs sharing a node do not meet on 29500.
    if (auto job = Env("SLURM_JOB_ID")) {
      w.master_port = 20000 + static_cast<int>(ParseInt("SLURM_JOB_ID", *job) % 20000);
    }
  } else if (Env("OMPI_COMM_WORLD_RANK") && Env("OMPI_COMM_WORLD_SIZE")) {
    w.source = "openmpi";
    w.rank = IntEnv("OMPI_COMM_WORLD_RANK", 0);
    w.world_size = IntEnv("OMPI_COMM_WORLD_SIZE", 1);
    w.local_rank = IntEnv("OMPI_COMM_WORLD_LOCAL_RANK", 0);
    w.local_world_size = IntEnv("OMPI_COMM_WORLD_LOCAL_SIZE", w.world_size);
    if (w.local_world_size < w.world_size && !Env("MASTER_ADDR")) {
      throw Error(StrCat("world: started by Open MPI on several nodes (", w.world_size, " ranks, ",
                         w.local_world_size, " on this one): set MASTER_ADDR to ",
                         "rank 0's host, e.g. mpirun -x MASTER_ADDR=<host of rank 0> ..."));
    }
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

double HeartbeatTimeoutSeconds() {
  auto v = Env("ONEFLOW_HEARTBEAT_TIMEOUT_SECONDS");
  const double s = v ? std::atof(v->c_str()) : 0;
  return s > 0 ? s : 10.0;
}

std::string JobDescription(const WorldInfo& w) {
  std::string command;
  std::ifstream f("/proc/self/cmdline", std::ios::binary);
  std::string arg;
  bool first = true, skip_next = false;
  while (std::getline(f, arg, '\0')) {
    if (first) {  // the interpreter or program: its name, not where it is installed
      arg = arg.substr(arg.rfind('/') + 1);
      first = false;
    }
    // PyTorch's older launchers hand each rank its own --local_rank: not part of the job.
    if (skip_next) {
      skip_next = false;
      continue;
    }
    if (arg == "--local_rank" || arg == "--local-rank") {
      skip_next = true;
      continue;
    }
    if (arg.rfind("--local_rank=", 0) == 0 || arg.rfind("--local-rank=", 0) == 0) continue;
    command += (command.empty() ? "" : " ") + arg;
  }
  std::ostringstream os;
  os << "command=" << command << "\n"
     << "world size=" << w.world_size << "\n"
     << "ranks per node=" << w.local_world_size << "\n"
     << "master=" << w.master_addr << ":" << w.master_port << "\n";
  return os.str();
}

namespace {

bool IsLoopback(const sockaddr* a) {
  if (a->sa_family == AF_INET) {
    return (ntohl(reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr) >> 24) == 127;
  }
  if (a->sa_family == AF_INET6) {
    return IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr);
  }
  return false;
}

}  // namespace

std::string ReachableAddress(const WorldInfo& w) {
  if (auto host = Env("ONEFLOW_HOSTNAME")) return *host;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  int rc =
      getaddrinfo(w.master_addr.c_str(), std::to_string(w.master_port).c_str(), &hints, &found);
  if (rc != 0 || found == nullptr) {
    throw Error(StrCat("world: cannot resolve the master address '", w.master_addr,
                       "': ", gai_strerror(rc), " (MASTER_ADDR / --master_addr)"));
  }
  std::unique_ptr<addrinfo, void (*)(addrinfo*)> guard(found, freeaddrinfo);
  if (IsLoopback(found->ai_addr)) return "127.0.0.1";  // the whole job is on this host
  // A UDP socket "connected" to the master sends nothing; it only asks the kernel for the
  // route, whose source address is the one the master's network reaches this host at.
  int fd = socket(found->ai_family, SOCK_DGRAM, 0);
  if (fd < 0) throw Error(StrCat("world: socket: ", std::strerror(errno)));
  sockaddr_storage local{};
  socklen_t len = sizeof(local);
  bool ok = connect(fd, found->ai_addr, found->ai_addrlen) == 0 &&
            getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0;
  int err = errno;
  close(fd);
  if (!ok) {
    throw Error(StrCat("world: no route to the master ", w.master_addr, ": ", std::strerror(err),
                       " (set ONEFLOW_IFNAME to the interface its peers reach this host on)"));
  }
  char text[INET6_ADDRSTRLEN] = {0};
  const void* addr =
      local.ss_family == AF_INET
          ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&local)->sin_addr)
          : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr);
  inet_ntop(local.ss_family, addr, text, sizeof(text));
  return text;
}

}  // namespace runtime
}  // namespace oneflow
