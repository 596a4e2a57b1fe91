// Runs a communicator's collectives one at a time, in issue order. Synchronous calls run on
// the caller's thread when nothing is queued (no hand-off latency); asynchronous ones go to
// a worker thread started on first use.
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "distml/comm/request.h"

namespace distml::comm {

/// The Request of a queued task: completes when the task returns, carrying its exception.
class TaskRequest : public Request {
 public:
  explicit TaskRequest(std::string what) : what_(std::move(what)) {}
  bool test() override;
  bool wait_until(Deadline deadline) override;
  std::string describe() const override { return what_; }
  std::optional<Clock::time_point> completed_at() override;
  void finish(std::exception_ptr error);

 private:
  std::string what_;
  std::mutex mutex_;
  std::condition_variable done_cv_;
  bool done_ = false;
  Clock::time_point done_at_;
  std::exception_ptr error_;
};

class CollectiveQueue {
 public:
  CollectiveQueue() = default;
  /// Waits for queued tasks to finish (each has its own deadline), then stops the worker.
  ~CollectiveQueue();

  /// Runs `task` after everything queued before it; returns when it is done, rethrowing.
  void run_sync(const std::function<void()>& task);
  /// Queues `task`; the request completes when it has run.
  std::shared_ptr<TaskRequest> run_async(std::function<void()> task, std::string what);

 private:
  struct Item {
    std::function<void()> task;
    std::shared_ptr<TaskRequest> request;
  };
  void work_loop();

  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Item> items_;
  bool busy_ = false;  // a task is running, inline or on the worker
  bool stop_ = false;
  std::thread worker_;
};

}  // namespace distml::comm
