#include "distml/comm/shm_segment.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "distml/comm/protocol_tags.h"
#include "distml/core/error.h"

namespace distml::comm {
namespace {

constexpr int kNameTag = protocol_tag::kShmName;
// Per rank: the arrival counter (alone on its cache line, which the others poll), then twice
// what it publishes for a collective.
struct Published {
  ShmSegment::Signature signature;
  std::uint64_t page_offset;  // of the rank's data
};
constexpr std::size_t kLine = 64, kPage = 4096;
constexpr std::size_t kRankBytes = kLine + (2 * sizeof(Published) + kLine - 1) / kLine * kLine;

// Rank r's arrival counter: the number of barriers it has entered.
std::atomic<std::uint64_t>& arrival(std::byte* base, int r) {
  return *reinterpret_cast<std::atomic<std::uint64_t>*>(base + r * kRankBytes);
}

// After the ranks' lines, on a line of its own: the doorbell, rung (incremented) by every
// arrival, on which a rank that has waited long sleeps (a futex), and how many sleep on it.
struct Doorbell {
  std::atomic<std::uint32_t> rings, sleepers;
};
static_assert(std::atomic<std::uint32_t>::is_always_lock_free);

Doorbell& doorbell(std::byte* base, int size) {
  return *reinterpret_cast<Doorbell*>(base + size * kRankBytes);
}

// The futex calls on the shared mapping (not FUTEX_PRIVATE: the sleepers are other processes).
void sleep_unless_rung(std::atomic<std::uint32_t>& rings, std::uint32_t seen,
                       std::chrono::nanoseconds at_most) {
  const timespec timeout{static_cast<time_t>(at_most.count() / 1000000000),
                         static_cast<long>(at_most.count() % 1000000000)};
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&rings), FUTEX_WAIT, seen, &timeout, nullptr,
          0);
}

void wake_all(std::atomic<std::uint32_t>& rings) {
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&rings), FUTEX_WAKE, INT_MAX, nullptr,
          nullptr, 0);
}

Published* published(std::byte* base, int r) {
  return reinterpret_cast<Published*>(base + r * kRankBytes + kLine);
}

// The offset within a page farthest (on the circle of 4096) from every one of `offsets`.
std::size_t farthest_offset(const std::vector<std::size_t>& offsets) {
  std::size_t best = 0, best_distance = 0;
  for (std::size_t s = 0; s < kPage; s += kLine) {
    std::size_t nearest = kPage;
    for (std::size_t o : offsets) {
      const std::size_t d = (s + kPage - o) % kPage;
      nearest = std::min({nearest, d, kPage - d});
    }
    if (nearest > best_distance) best = s, best_distance = nearest;
  }
  return best;
}

// Tells the core this is a spin loop, so that a sibling hyperthread gets the execution units.
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

std::string fresh_name() {
  std::random_device entropy;
  return cat("/distml-", getpid(), "-", std::hex, entropy(), entropy());
}

std::string system_error(const char* what, const std::string& name) {
  return cat(what, " ", name, ": ", std::strerror(errno));
}

// Maps `name` (created with `bytes` if `create`); the error, if any, in `error`.
std::byte* map(const std::string& name, std::size_t bytes, bool create, std::string& error) {
  const int fd = shm_open(name.c_str(), create ? O_CREAT | O_EXCL | O_RDWR : O_RDWR, 0600);
  if (fd < 0) {
    error = system_error("shm_open", name);
    return nullptr;
  }
  void* base = MAP_FAILED;
  // Allocated now, not at first touch: a full /dev/shm is an error here, not a SIGBUS later.
  if (create && (errno = posix_fallocate(fd, 0, static_cast<off_t>(bytes))) != 0)
    error = system_error("posix_fallocate", name);
  else if ((base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED)
    error = system_error("mmap", name);
  close(fd);
  return base == MAP_FAILED ? nullptr : static_cast<std::byte*>(base);
}

}  // namespace

ShmSegment::ShmSegment(std::byte* base, std::size_t bytes, int rank, int size,
                       std::size_t part_bytes)
    : base_(base), bytes_(bytes), rank_(rank), size_(size), part_bytes_(part_bytes) {}

ShmSegment::~ShmSegment() { munmap(base_, bytes_); }

std::size_t ShmSegment::header_bytes(int size) {
  return (static_cast<std::size_t>(size) * kRankBytes + kLine + kPage - 1) / kPage * kPage;
}

std::byte* ShmSegment::part(int buffer, int r, int j, std::size_t shift) const {
  const std::size_t stride = part_bytes_ + kPage;
  const std::size_t slot = static_cast<std::size_t>(buffer) * size_ + r;
  return base_ + header_bytes(size_) + (slot * size_ + j) * stride + shift;
}

// Three rounds over point-to-point: the first rank sends the name (or "!" and why it could not
// create it), every other rank answers with its error (empty: mapped), and the first rank,
// having unlinked the name, sends every rank the verdict, so that all fail or none does.
std::unique_ptr<ShmSegment> ShmSegment::create(AlgoContext& group, std::size_t part_bytes) {
  const int me = group.rank(), size = group.size();
  part_bytes = std::max<std::size_t>((part_bytes + kPage - 1) / kPage, 1) * kPage;
  const std::size_t bytes = header_bytes(size) + 2 * size * size * (part_bytes + kPage);
  using Message = std::array<char, 256>;
  auto send = [&](const Message& m, int to) {
    auto request = group.isend(m.data(), m.size(), to, kNameTag);
    group.wait(request);
  };
  auto receive = [&](int from) {
    Message m{};
    auto request = group.irecv(m.data(), m.size(), from, kNameTag);
    group.wait(request);
    m.back() = '\0';
    return m;
  };
  auto message = [](const std::string& text) {
    Message m{};
    std::snprintf(m.data(), m.size(), "%s", text.c_str());
    return m;
  };
  std::string error;
  std::byte* base = nullptr;
  if (me == 0) {
    const std::string name = fresh_name();
    base = map(name, bytes, /*create=*/true, error);
    for (int r = 1; r < size; ++r) send(message(base ? name : "!" + error), r);
    for (int r = 1; r < size; ++r) {
      const Message reply = receive(r);
      if (error.empty() && reply[0]) error = cat("rank ", r, ": ", reply.data());
    }
    if (base) shm_unlink(name.c_str());
    for (int r = 1; r < size; ++r) send(message(error), r);
  } else {
    const Message name = receive(0);
    if (name[0] == '!')
      error = name.data() + 1;
    else
      base = map(name.data(), bytes, /*create=*/false, error);
    send(message(error), 0);
    error = receive(0).data();
  }
  if (!error.empty()) {
    if (base) munmap(base, bytes);
    throw CommError(cat(group.what(), ": no shared-memory segment of ", bytes,
                        " bytes for the ranks of this host: ", error));
  }
  return std::unique_ptr<ShmSegment>(new ShmSegment(base, bytes, me, size, part_bytes));
}

// The barrier's release/acquire makes what each rank published visible to the others.
std::size_t ShmSegment::agree(const AlgoContext& ctx, const Signature& signature,
                              const void* data) {
  const std::uint64_t turn = agreements_++ % 2;
  published(base_, rank_)[turn] = {signature, reinterpret_cast<std::uintptr_t>(data) % kPage};
  barrier(ctx);
  bool same = true;
  std::vector<std::size_t> offsets;
  for (int r = 0; r < size_; ++r) {
    same = same && published(base_, r)[turn].signature == signature;
    offsets.push_back(published(base_, r)[turn].page_offset);
  }
  if (same) return farthest_offset(offsets);
  std::string each;
  for (int r = 0; r < size_; ++r) {
    const Signature& s = published(base_, r)[turn].signature;
    each += cat(r ? "; " : "", "rank ", r, ": ", s[0], " elements, dtype ", s[1], ", op ", s[2],
                ", step ", s[3]);
  }
  throw CommError(
      cat(ctx.what(), ": the ranks of this host disagree on the collective (", each, ")"));
}

// Spins while the others are likely a copy away, yields for a while, then sleeps on the
// doorbell: a rank that waits for another still computing must not take that rank's core
// (with ranks and their helper threads outnumbering cores, a yielding spinner kept the rank it
// waited for at a fraction of its speed for whole runs). Sequentially consistent operations
// on the arrivals, the rings and the sleepers: a sleeper counts itself, then reads the rings,
// then the arrivals; an arrival publishes itself, rings, then reads the sleepers; so either the
// sleeper sees the arrival or the arrival sees the sleeper and wakes it.
void ShmSegment::barrier(const AlgoContext& ctx) {
  using namespace std::chrono;
  constexpr auto kYieldFor = microseconds(50);
  Doorbell& bell = doorbell(base_, size_);
  const std::uint64_t epoch = ++barriers_;
  arrival(base_, rank_).store(epoch);
  bell.rings.fetch_add(1);
  if (bell.sleepers.load() > 0) wake_all(bell.rings);
  const auto arrived = [&] {
    for (int r = 0; r < size_; ++r)
      if (arrival(base_, r).load() < epoch) return false;
    return true;
  };
  steady_clock::time_point yielding_since{};
  for (std::uint64_t spins = 0;; ++spins) {
    if (arrived()) return;
    if (spins < 256) {  // the others are usually a copy away
      cpu_relax();
      continue;
    }
    const auto now = steady_clock::now();
    if (spins == 256) yielding_since = now;
    if (now - yielding_since < kYieldFor) {
      sched_yield();
      continue;
    }
    bell.sleepers.fetch_add(1);
    const std::uint32_t seen = bell.rings.load();
    if (!arrived()) sleep_unless_rung(bell.rings, seen, milliseconds(100));
    bell.sleepers.fetch_sub(1);
    if (ctx.deadline().passed() && !arrived()) {
      std::string ranks;
      for (int r = 0; r < size_; ++r)
        if (arrival(base_, r).load(std::memory_order_acquire) < epoch)
          ranks += cat(ranks.empty() ? "" : ", ", r);
      throw TimeoutError(cat(ctx.what(), ": timed out in a shared-memory barrier waiting for ",
                             "ranks ", ranks, " of this host"));
    }
  }
}

}  // namespace distml::comm
