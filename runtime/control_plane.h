// The control plane: how the ranks of a job find each other and agree before any tensor moves.
//
// Rank 0 runs a ControlServer (gRPC, runtime/control.proto) holding a key-value store, named
// barriers, heartbeats and the job's abort flag; every rank (rank 0 included) talks to it
// through a ControlClient. Gloo's rendezvous store and NCCL's unique id go through it. Every
// call carries the job token, and every wait has a deadline: nothing here blocks forever, and
// each error is one line naming the rank, the operation and what was missing.
//
//   ControlServer server("127.0.0.1", 29500, token);   // rank 0 only
//   ControlClient c("127.0.0.1", 29500, rank, token); c.Set("k", "v"); c.Barrier("init", 4, 300);
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace oneflow {
namespace runtime {

// What the master knows of the job it serves: how many ranks (0: unknown) on how many per node,
// and its description ("key=value" lines, as JobDescription in world.h writes them).
struct JobShape {
  int world_size = 0;
  int ranks_per_node = 0;
  std::string job;
};

// "2, 3 (node 1)": ranks, and the nodes they run on (rank / ranks_per_node) when
// ranks_per_node > 0. For the lines that name missing or lost ranks.
std::string RanksWithNodes(const std::vector<int>& ranks, int ranks_per_node);

class ControlServer {
 public:
  // Binds addr:port (port 0 picks a free port: read it back with port()). A port already in
  // use throws oneflow::Error. heartbeat_timeout_s > 0 starts a watchdog: ranks that have sent
  // a heartbeat and then stay silent that long (without leaving) abort the job, named (with
  // their node). A rank refused for its token is told what differs between its job and this
  // one; while the job has not gathered all its ranks, the refusal also aborts it (a node
  // started with other settings would otherwise leave the others waiting for the timeout).
  ControlServer(const std::string& addr, int port, std::string token,
                double heartbeat_timeout_s = 0, JobShape shape = {});
  ~ControlServer();
  ControlServer(const ControlServer&) = delete;
  ControlServer& operator=(const ControlServer&) = delete;

  int port() const;
  // Wakes every pending Wait/Barrier and stops serving. The destructor calls it.
  void Shutdown();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

class ControlClient {
 public:
  // Connects to the master within connect_timeout_s and checks the token (job: this rank's
  // job description, sent along for the master to say what differs); throws oneflow::Error
  // when the master is unreachable or refuses the token.
  ControlClient(const std::string& master_addr, int master_port, int rank, std::string token,
                double connect_timeout_s = 300, const std::string& job = "");
  ~ControlClient();
  ControlClient(const ControlClient&) = delete;
  ControlClient& operator=(const ControlClient&) = delete;

  int rank() const { return rank_; }

  void Set(const std::string& key, const std::string& value);
  // The value, or nullopt when the key has not been set.
  std::optional<std::string> Get(const std::string& key);
  // Returns once every key is set; throws after timeout_s or when some rank aborted.
  void Wait(const std::vector<std::string>& keys, double timeout_s);
  // Adds delta to the integer at key (0 when unset) and returns the new value.
  int64_t Add(const std::string& key, int64_t delta);
  // Returns once world_size ranks reached the barrier called name; throws after timeout_s
  // (naming the ranks that had arrived) or when some rank aborted.
  void Barrier(const std::string& name, int world_size, double timeout_s);
  // The same, but a timeout returns the ranks still missing (empty: the barrier opened).
  std::vector<int> TryBarrier(const std::string& name, int world_size, double timeout_s);
  // Tells the master this rank is alive (or, leaving=true, that it exits cleanly and is no
  // longer watched); throws when some rank aborted the job.
  void Heartbeat(bool leaving = false);
  // Marks the job aborted: every pending and later Wait/Barrier throws with this reason.
  void Abort(const std::string& reason);
  // This rank's steady clock minus the master's, in ns, and the round trip it was measured
  // over (the shortest of `samples` readings; the error is at most half of it).
  std::pair<int64_t, int64_t> MasterClockOffset(int samples = 8);

  struct Impl;

 private:
  bool BarrierCall(const std::string& name, int world_size, double timeout_s,
                   std::vector<int>* arrived);

  int rank_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace runtime
}  // namespace oneflow
