#include "distml/comm/mpi/mpi_watchdog.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace distml::comm::mpi {
namespace {

using namespace std::chrono;

// kIdle: nothing watched; kClaimed: the watchdog is reporting this slot's call.
constexpr std::int64_t kIdle = 0, kClaimed = -1;

struct Slot {
  std::atomic<std::int64_t> deadline_ns{kIdle};
  std::atomic<const std::function<std::string()>*> report{nullptr};
};

class Watchdog {
 public:
  static Watchdog& instance() {
    static Watchdog* w = new Watchdog;  // never destroyed: exit must not join its thread
    return *w;
  }

  Slot& slot_of_this_thread() {
    thread_local Slot* slot = nullptr;
    if (!slot) {
      std::lock_guard lock(mutex_);
      slots_.push_back(std::make_unique<Slot>());  // kept after the thread ends: never dangles
      slot = slots_.back().get();
      if (!thread_.joinable()) thread_ = std::thread([this] { watch(); });
    }
    return *slot;
  }

 private:
  [[noreturn]] void expire(Slot& slot) {
    const auto* report = slot.report.load();
    std::string message = report ? (*report)() : "a blocking MPI call passed its deadline";
    std::fprintf(stderr, "distml: error: %s\n", message.c_str());
    std::fflush(stdout);
    std::fflush(stderr);
    std::_Exit(1);
  }

  void watch() {
    for (;;) {
      std::this_thread::sleep_for(milliseconds(100));
      const std::int64_t now = duration_cast<nanoseconds>(Clock::now().time_since_epoch()).count();
      std::lock_guard lock(mutex_);
      for (auto& slot : slots_) {
        std::int64_t d = slot->deadline_ns.load(std::memory_order_acquire);
        // Claiming first means the watched call cannot return and unwind `report` meanwhile.
        if (d > 0 && now >= d && slot->deadline_ns.compare_exchange_strong(d, kClaimed))
          expire(*slot);
      }
    }
  }

  std::mutex mutex_;
  std::vector<std::unique_ptr<Slot>> slots_;
  std::thread thread_;
};

}  // namespace

BlockingGuard::BlockingGuard(Deadline deadline, const std::function<std::string()>* report) {
  Slot& slot = Watchdog::instance().slot_of_this_thread();
  slot.report.store(report, std::memory_order_relaxed);
  slot.deadline_ns.store(duration_cast<nanoseconds>(deadline.at.time_since_epoch()).count(),
                         std::memory_order_release);
}

BlockingGuard::~BlockingGuard() {
  Slot& slot = Watchdog::instance().slot_of_this_thread();
  if (slot.deadline_ns.exchange(kIdle) == kClaimed)  // being reported: the process is ending
    for (;;) std::this_thread::sleep_for(seconds(1));
}

}  // namespace distml::comm::mpi
