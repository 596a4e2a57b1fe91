#include "distml/comm/collective_queue.h"

namespace distml::comm {

bool TaskRequest::test() {
  std::lock_guard lock(mutex_);
  if (done_ && error_) std::rethrow_exception(error_);
  return done_;
}

bool TaskRequest::wait_until(Deadline deadline) {
  std::unique_lock lock(mutex_);
  if (!done_cv_.wait_until(lock, deadline.at, [&] { return done_; })) return false;
  if (error_) std::rethrow_exception(error_);
  return true;
}

std::optional<Clock::time_point> TaskRequest::completed_at() {
  std::lock_guard lock(mutex_);
  return done_ ? std::optional(done_at_) : std::nullopt;
}

void TaskRequest::finish(std::exception_ptr error) {
  const auto now = Clock::now();
  {
    std::lock_guard lock(mutex_);
    done_ = true;
    done_at_ = now;
    error_ = std::move(error);
  }
  done_cv_.notify_all();
}

CollectiveQueue::~CollectiveQueue() {
  {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [&] { return items_.empty() && !busy_; });
    stop_ = true;
  }
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();
}

void CollectiveQueue::run_sync(const std::function<void()>& task) {
  {
    std::unique_lock lock(mutex_);
    if (!busy_ && items_.empty()) {
      busy_ = true;
      lock.unlock();
      std::exception_ptr error;
      try {
        task();
      } catch (...) {
        error = std::current_exception();
      }
      lock.lock();
      busy_ = false;
      lock.unlock();
      cv_.notify_all();
      if (error) std::rethrow_exception(error);
      return;
    }
  }
  auto request = run_async(task, "collective");
  request->wait_until(Deadline{Clock::time_point::max()});
}

std::shared_ptr<TaskRequest> CollectiveQueue::run_async(std::function<void()> task,
                                                        std::string what) {
  auto request = std::make_shared<TaskRequest>(std::move(what));
  {
    std::lock_guard lock(mutex_);
    items_.push_back({std::move(task), request});
    if (!worker_.joinable()) worker_ = std::thread([this] { work_loop(); });
  }
  cv_.notify_all();
  return request;
}

void CollectiveQueue::work_loop() {
  std::unique_lock lock(mutex_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || (!busy_ && !items_.empty()); });
    if (stop_ && items_.empty()) return;
    Item item = std::move(items_.front());
    items_.pop_front();
    busy_ = true;
    lock.unlock();
    std::exception_ptr error;
    try {
      item.task();
    } catch (...) {
      error = std::current_exception();
    }
    item.request->finish(error);
    lock.lock();
    busy_ = false;
    cv_.notify_all();
  }
}

}  // namespace distml::comm
