#include "runtime/work_queue.h"

namespace oneflow {
namespace runtime {

// ---- Work ----

void Work::Finish(std::exception_ptr error) {
  std::lock_guard<std::mutex> lock(mu_);
  done_ = true;
  error_ = error;
  cv_.notify_all();
}

void Work::Wait() {
  std::vector<std::function<void()>> waits;
  std::exception_ptr error;
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return done_; });
    waits.swap(on_wait_);
    error = error_;
  }
  for (const auto& w : waits) w();
  if (error) std::rethrow_exception(error);
}

Work::~Work() {
  for (const auto& w : on_wait_) {
    try {
      w();
    } catch (...) {  // a broken device: nothing left to order
    }
  }
}

bool Work::IsCompleted() {
  std::lock_guard<std::mutex> lock(mu_);
  return done_;
}

// ---- WorkQueue ----

namespace {
thread_local bool t_on_worker = false;
thread_local Work* t_work = nullptr;  // the asynchronous call the worker runs
}  // namespace

WorkQueue::~WorkQueue() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    cv_.notify_all();
  }
  if (worker_.joinable()) worker_.join();
}

std::shared_ptr<Work> WorkQueue::Async(std::function<void()> fn) {
  auto work = std::make_shared<Work>();
  std::lock_guard<std::mutex> lock(mu_);
  if (!worker_.joinable()) worker_ = std::thread([this] { Loop(); });
  queue_.emplace_back(std::move(fn), work);
  ++pending_;
  cv_.notify_all();
  return work;
}

void WorkQueue::Loop() {
  t_on_worker = true;
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping with nothing left
    auto [fn, work] = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    std::exception_ptr error;
    t_work = work.get();
    try {
      fn();
    } catch (...) {
      error = std::current_exception();
    }
    t_work = nullptr;
    work->Finish(error);
    lock.lock();
    --pending_;
    cv_.notify_all();
  }
}

void WorkQueue::Drain() {
  if (t_on_worker) return;
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return pending_ == 0; });
}

std::vector<std::function<void()>>* WorkQueue::CurrentWaits() {
  return t_work ? &t_work->on_wait_ : nullptr;
}

}  // namespace runtime
}  // namespace oneflow
