#include "runtime/call_watch.h"

#include <algorithm>
#include <cstdlib>
#include <optional>

#include "core/error.h"

namespace oneflow {
namespace runtime {
namespace {

std::mutex g_mu;                    // guards g_watches (lock order: g_mu, then a watch's mu_)
std::vector<CallWatch*> g_watches;  // this process's live watches
bool g_at_exit = false;

double DesyncSeconds() {
  const char* v = std::getenv("ONEFLOW_DESYNC_SECONDS");
  const double s = v ? std::atof(v) : 0;
  return s > 0 ? s : 2.0;
}

std::string Key(int rank) { return StrCat("oneflow/doing/", rank); }

bool StartsWith(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}
bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Whether a member that posted `posted` (its waiting calls, "; "-joined, or where it is at exit)
// cannot be on its way to this rank's call `token` (of `group`, described by `mine`): it is at
// exit; or in another call of the same group (the group's calls run one at a time, and it waits
// for this rank there) unless both are point-to-point calls (a pipeline's ranks wait in sends and
// recvs to others), or both wait to receive from each other. A call of another group may still
// end (its members come later) and is left to the timeout.
bool Conflicts(const std::string& posted, const std::string& token, const std::string& group,
               const CallPrint& mine, int my_rank) {
  const bool p2p = mine.op == CallOp::kSend || mine.op == CallOp::kRecv;
  size_t at = 0;
  while (at <= posted.size()) {
    size_t end = posted.find("; ", at);
    if (end == std::string::npos) end = posted.size();
    const std::string item = posted.substr(at, end - at);
    at = end + 2;
    if (item == token) return false;
    if (StartsWith(item, "at exit")) continue;
    if (!EndsWith(item, " of group " + group)) return false;  // another group's call
    const bool item_p2p = StartsWith(item, "send(") || StartsWith(item, "recv(");
    const bool both_recv = mine.op == CallOp::kRecv && StartsWith(item, "recv(") &&
                           item.find(StrCat("from rank ", my_rank, ")")) != std::string::npos;
    if (p2p && item_p2p && !both_recv) return false;
  }
  return true;
}

}  // namespace

CallWatch::CallWatch(ControlClient* client, std::string group, std::vector<int> ranks, int my_rank)
    : client_(client), group_(std::move(group)), ranks_(std::move(ranks)), my_rank_(my_rank) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_watches.push_back(this);
}

CallWatch::~CallWatch() {
  std::lock_guard<std::mutex> lock(g_mu);
  g_watches.erase(std::remove(g_watches.begin(), g_watches.end(), this), g_watches.end());
}

void CallWatch::Enter(const CallPrint& print) {
  std::lock_guard<std::mutex> lock(mu_);
  active_ = true;
  print_ = print;
  if (print.op != CallOp::kSetUp) ++calls_;
  since_ = std::chrono::steady_clock::now();
}

void CallWatch::Leave() {
  bool was_posted;
  {
    std::lock_guard<std::mutex> lock(mu_);
    active_ = false;
    suspicious_ = 0;
    was_posted = posted_;
    posted_ = false;
  }
  // Only after a long wait: the post is taken back (what else this process is in stays).
  if (was_posted && client_) {
    try {
      client_->Set(Key(my_rank_), WatchPosted(my_rank_));
    } catch (const std::exception&) {
    }
  }
}

std::string CallWatch::Token() const {
  if (print_.op == CallOp::kSetUp) return StrCat("the set-up of group ", group_);
  return StrCat(print_.Describe(), ", call ", calls_, " of group ", group_);
}

// What this process posts: every call that has waited long, joined by "; " (several threads).
// (Watches of other ranks live in this process only in tests with a thread per rank.)
std::string WatchPosted(int my_rank) {
  std::lock_guard<std::mutex> lock(g_mu);
  std::string out;
  for (CallWatch* w : g_watches) {
    if (w->my_rank_ != my_rank) continue;
    std::lock_guard<std::mutex> wl(w->mu_);
    if (w->active_ && w->posted_) out += (out.empty() ? "" : "; ") + w->Token();
  }
  if (g_at_exit) {
    out += out.empty() ? "" : "; ";
    out += "at exit (its script ended after";
    bool first = true;
    for (CallWatch* w : g_watches) {
      if (w->my_rank_ != my_rank) continue;
      std::lock_guard<std::mutex> wl(w->mu_);
      out += StrCat(first ? " " : ", ", w->calls_, w->calls_ == 1 ? " call" : " calls",
                    " in group ", w->group_);
      first = false;
    }
    if (first) out += " no collective";
    out += ")";
  }
  return out;
}

std::string WatchTick(ControlClient& client, int my_rank) {
  const double limit = DesyncSeconds();
  const auto now = std::chrono::steady_clock::now();
  // The calls that wait long: post them once, then compare with what their members posted.
  struct Waiting {
    CallWatch* watch;
    std::string token;
    CallPrint print;
    double waited;
  };
  std::vector<Waiting> waiting;
  bool post = false;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    for (CallWatch* w : g_watches) {
      if (w->my_rank_ != my_rank) continue;
      std::lock_guard<std::mutex> wl(w->mu_);
      const double waited = std::chrono::duration<double>(now - w->since_).count();
      if (!w->active_ || waited < limit) continue;
      if (!w->posted_) post = w->posted_ = true;
      waiting.push_back({w, w->Token(), w->print_, waited});
    }
  }
  if (waiting.empty()) return "";
  if (post) client.Set(Key(my_rank), WatchPosted(my_rank));
  for (const Waiting& wt : waiting) {
    const CallPrint mine = wt.print;
    const bool p2p = mine.op == CallOp::kSend || mine.op == CallOp::kRecv;
    std::string elsewhere;  // "; rank 1 is at exit (...)"
    for (int r : wt.watch->ranks_) {
      // A send or recv waits for its peer only.
      if (r == my_rank || (p2p && r != mine.root)) continue;
      std::optional<std::string> v = client.Get(Key(r));
      if (!v || v->empty() || !Conflicts(*v, wt.token, wt.watch->group_, mine, my_rank)) continue;
      elsewhere += StrCat("; rank ", r, " is ", v->rfind("at exit", 0) == 0 ? "" : "in ", *v);
    }
    int suspicious;
    {
      std::lock_guard<std::mutex> wl(wt.watch->mu_);
      suspicious = elsewhere.empty() ? (wt.watch->suspicious_ = 0) : ++wt.watch->suspicious_;
    }
    if (suspicious >= 2) {
      return StrCat("ranks disagree in group ", wt.watch->group_, ": rank ", my_rank, " is in ",
                    wt.token, ", for ", static_cast<int64_t>(wt.waited), " s", elsewhere,
                    " (every member must make the same calls in the same order)");
    }
  }
  return "";
}

void WatchPostExit(ControlClient& client, int my_rank) {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    g_at_exit = true;
  }
  try {
    client.Set(Key(my_rank), WatchPosted(my_rank));
  } catch (const std::exception&) {
  }
}

std::string WatchReport(ControlClient& client, const std::vector<int>& ranks, int my_rank) {
  std::string out;
  for (int r : ranks) {
    if (r == my_rank) continue;
    std::optional<std::string> v;
    try {
      v = client.Get(Key(r));
    } catch (const std::exception&) {
      continue;  // the master is gone: nothing to add
    }
    out += StrCat(out.empty() ? "" : "; ", "rank ", r);
    if (!v || v->empty()) {
      out += " posted nothing (in no collective: computing, or stuck outside collectives)";
    } else {
      out += StrCat(v->rfind("at exit", 0) == 0 ? " is " : " is in ", *v);
    }
  }
  return out;
}

}  // namespace runtime
}  // namespace oneflow
