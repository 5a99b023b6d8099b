// The asynchronous calls of a communicator: a queue run in order by one worker thread.
//
// Async(fn) queues fn and returns its Work handle; the worker thread starts on the first call
// and runs the calls one after another, so every rank sees them in the order it queued them. A
// synchronous collective first waits for the calls queued before it (Drain), except on a worker
// thread itself (the calls there already run in order; waiting would deadlock). A call that
// queues a collective of CUDA tensors through NCCL leaves the compute stream's wait to its
// Work's Wait (CurrentWaits), so that compute queued meanwhile overlaps the collective.
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace oneflow {
namespace runtime {

// The handle of an asynchronous collective: Wait() blocks until it ran and rethrows its error.
// A collective of CUDA tensors through NCCL has then been queued on the GPU, and Wait makes the
// device's compute stream wait for it (later kernels see its result; the host does not wait),
// as PyTorch's work.wait() does; until then compute queued meanwhile overlaps it. A Work
// destroyed without Wait queues that wait when it goes.
class Work {
 public:
  ~Work();
  void Wait();
  bool IsCompleted();

 private:
  friend class WorkQueue;
  void Finish(std::exception_ptr error);

  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::exception_ptr error_;
  // The compute streams' waits for the collectives the call queued, run once (by Wait).
  std::vector<std::function<void()>> on_wait_;
};

class WorkQueue {
 public:
  WorkQueue() = default;
  // Runs the calls still queued, then joins the worker thread.
  ~WorkQueue();
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  // Runs fn on the worker thread after every call queued before it; fn keeps what it captured
  // alive until it ran. Its exception goes to the Work (rethrown by Wait).
  std::shared_ptr<Work> Async(std::function<void()> fn);
  // Returns once every queued call ran; at once on the worker thread of any queue.
  void Drain();
  // Where the call this thread runs as a worker defers the compute stream's waits (its Work's,
  // run by Wait); null on any other thread.
  static std::vector<std::function<void()>>* CurrentWaits();

 private:
  void Loop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<std::function<void()>, std::shared_ptr<Work>>> queue_;
  int pending_ = 0;
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace runtime
}  // namespace oneflow
