#include "child_processes.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "distml/core/error.h"
#include "distml/core/preemption.h"
#include "job_output.h"
#include "launcher_orders.h"

namespace distml::cli {
namespace {

[[noreturn]] void exec(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  ::execvp(args[0], args.data());
  std::fprintf(stderr, "distml launch: cannot run %s: %s\n", args[0], std::strerror(errno));
  std::_Exit(127);
}

// The signals passed on to the ranks: the interrupts, and Slurm's warnings before a time limit
// (USR1, USR2). A rank of distml train takes SIGTERM and SIGUSR1 as a preemption
// (core/preemption.h).
constexpr int kForwardedSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2};

// Forwards kForwardedSignals to the ranks through a self-pipe read by the main loop.
int signal_pipe[2] = {-1, -1};
void on_signal(int sig) {
  unsigned char s = static_cast<unsigned char>(sig);
  [[maybe_unused]] auto n = ::write(signal_pipe[1], &s, 1);
}

struct Child {
  pid_t pid = -1;
  int out = -1, err = -1;  // its stdout and stderr, read by the launcher
  int orders = -1;         // the write end of its standard input, with ChildSpec::orders_on_stdin
  std::string out_buf, err_buf;
  std::optional<StderrFilter> filter;
  std::string err_tail;  // the end of its stderr, when kept
  bool running = true;
  bool stopped = false;  // the launcher sent it SIGTERM to stop
  std::chrono::steady_clock::time_point teardown_by =
      std::chrono::steady_clock::time_point::max();  // ChildSpec::teardown_grace
  bool killed = false;                               // ... and then SIGKILL
};

// Writes the complete lines of `buf` to `fd`, each prefixed with "[rank] ".
void flush_lines(std::string& buf, int fd, int rank, bool all) {
  size_t start = 0;
  for (;;) {
    size_t nl = buf.find('\n', start);
    if (nl == std::string::npos) break;
    std::string line = cat("[", rank, "] ", buf.substr(start, nl - start + 1));
    [[maybe_unused]] auto n = ::write(fd, line.data(), line.size());
    start = nl + 1;
  }
  buf.erase(0, start);
  if (all && !buf.empty()) {
    std::string line = cat("[", rank, "] ", buf, "\n");
    [[maybe_unused]] auto n = ::write(fd, line.data(), line.size());
    buf.clear();
  }
}

// Closes a child's orders: a rank that takes them ends when they close, where a signal to the
// remote shell that started it would not reach it (cli/launcher_orders.h).
void stop_orders(Child& c) {
  if (c.orders >= 0) ::close(c.orders);
  c.orders = -1;
}

int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

// Why a process ended, in words: "exited with code 3", "was killed by signal 9 (Killed)".
std::string ending_of(int status) {
  if (WIFSIGNALED(status))
    return cat("was killed by signal ", WTERMSIG(status), " (", strsignal(WTERMSIG(status)), ")");
  return cat("exited with code ", exit_code_of(status));
}

}  // namespace

JobEnd run_children(const std::vector<ChildSpec>& specs, bool prefix_output, bool keep_stderr,
                    const Watch& watch) {
  if (signal_pipe[0] < 0 && ::pipe(signal_pipe) != 0) throw Error("distml launch: pipe failed");
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  for (int sig : kForwardedSignals) ::sigaction(sig, &sa, nullptr);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);  // a signal held while the cluster was built
  ::signal(SIGPIPE, SIG_IGN);  // an order to a rank that has ended is an error, not the end

  const int count = static_cast<int>(specs.size());
  std::vector<Child> children(count);
  const pid_t launcher = ::getpid();
  for (int r = 0; r < count; ++r) {
    int out[2], err[2], orders[2];
    if (::pipe(out) != 0 || ::pipe(err) != 0) throw Error("distml launch: pipe failed");
    // Close-on-exec: no other child may hold a rank's orders open after the launcher is gone.
    if (specs[r].orders_on_stdin && ::pipe2(orders, O_CLOEXEC) != 0)
      throw Error("distml launch: pipe failed");
    pid_t pid = ::fork();
    if (pid < 0) throw Error("distml launch: fork failed");
    if (pid == 0) {
      // Dies with the launcher, even a SIGKILLed one (a distml rank under mpirun does the same
      // with mpirun: die_with_launcher); and a process group of its own, so that a stop reaches
      // everything it started.
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != launcher) std::_Exit(128 + SIGKILL);
      ::setpgid(0, 0);
      ::dup2(out[1], 1);
      ::dup2(err[1], 2);
      ::close(out[0]), ::close(err[0]), ::close(out[1]), ::close(err[1]);
      if (specs[r].orders_on_stdin) ::dup2(orders[0], 0);
      ::signal(SIGPIPE, SIG_DFL);
      for (const auto& [name, value] : specs[r].env) ::setenv(name.c_str(), value.c_str(), 1);
      exec(specs[r].argv);
    }
    children[r].pid = pid;
    if (specs[r].orders_on_stdin) {
      ::close(orders[0]);
      children[r].orders = orders[1];
    }
    ::close(out[1]), ::close(err[1]);
    children[r].out = out[0];
    children[r].err = err[0];
  }

  JobEnd end;
  for (auto& c : children) c.filter.emplace(end.errors);
  auto deadline_kill = std::chrono::steady_clock::time_point::max();
  auto stop_others_at = std::chrono::steady_clock::time_point::max();  // after a failure
  int running = count;
  // Until every child has ended and every pipe is drained (the last words name the cause).
  auto open_pipes = [&] {
    for (const auto& c : children)
      if (c.out >= 0 || c.err >= 0) return true;
    return false;
  };
  // After the last child, its pipes are drained for a moment more (a grandchild may hold one).
  auto drain_until = std::chrono::steady_clock::time_point::max();
  while (running > 0 || (open_pipes() && std::chrono::steady_clock::now() < drain_until)) {
    std::vector<pollfd> fds{{signal_pipe[0], POLLIN, 0}};
    for (auto& c : children)
      for (int fd : {c.out, c.err})
        if (fd >= 0) fds.push_back({fd, POLLIN, 0});
    ::poll(fds.data(), fds.size(), 100);
    if (watch && !end.asked_to_stop && end.code == 0 && running == count && watch()) {
      end.asked_to_stop = true;
      for (const auto& c : children)
        if (c.orders >= 0) [[maybe_unused]]
          auto n = ::write(c.orders, kCheckpointOrder.data(), kCheckpointOrder.size());
    }
    if (fds[0].revents & POLLIN) {
      unsigned char sig;
      if (::read(signal_pipe[0], &sig, 1) == 1) {
        // Interrupts and preemptions ask the job to end; the warnings before a time limit
        // (USR1, USR2) only tell it.
        // A SIGTERM after the first goes to mpirun as itself: ranks take a second one 3 s
        // or more after the first as the order to end (core/preemption.h).
        const bool first_stop = !end.preempted;
        end.interrupted = end.interrupted || (sig != SIGUSR1 && sig != SIGUSR2);
        end.preempted = end.preempted || sig == SIGTERM || sig == SIGUSR1;
        for (int r = 0; r < count; ++r)
          if (children[r].running)
            ::kill(children[r].pid,
                   sig == SIGTERM && first_stop && specs[r].preempt_with_usr1 ? SIGUSR1 : sig);
      }
    }
    for (int r = 0; r < count; ++r) {
      auto& c = children[r];
      for (int* fd : {&c.out, &c.err}) {
        if (*fd < 0) continue;
        char buf[4096];
        pollfd p{*fd, POLLIN, 0};
        if (::poll(&p, 1, 0) <= 0) continue;
        ssize_t n = ::read(*fd, buf, sizeof buf);
        const int to = fd == &c.out ? 1 : 2;
        if (n > 0 && to == 2 && keep_stderr) {
          c.err_tail.append(buf, n);
          if (c.err_tail.size() > 8192) c.err_tail.erase(0, c.err_tail.size() - 8192);
          if (specs[r].teardown_grace)
            if (const auto grace = specs[r].teardown_grace(c.err_tail))
              c.teardown_by = std::min(c.teardown_by, std::chrono::steady_clock::now() + *grace);
        }
        std::string text(buf, static_cast<std::size_t>(std::max<ssize_t>(n, 0)));
        if (to == 2) text = n > 0 ? c.filter->take(text) : c.filter->finish();
        std::string& pending = to == 1 ? c.out_buf : c.err_buf;
        if (!prefix_output) {
          [[maybe_unused]] auto w = ::write(to, text.data(), text.size());
        } else {
          pending += text;
          flush_lines(pending, to, r, n <= 0);
        }
        if (n <= 0) {
          ::close(*fd);
          *fd = -1;
        }
      }
    }
    int status;
    pid_t pid;
    while ((pid = ::waitpid(-1, &status, WNOHANG)) > 0) {
      for (auto& c : children) {
        if (c.pid != pid) continue;
        c.running = false;
        // A child the launcher stopped (mpirun waiting for a lost host) leaves its pipes to
        // processes it can no longer reach, with nothing left to say: a quarter second.
        if (--running == 0)
          drain_until = std::chrono::steady_clock::now() +
                        (c.stopped ? std::chrono::milliseconds(250) : std::chrono::seconds(1));
        const int code = exit_code_of(status);
        // A process killed by a signal we did not send is the likelier cause than one that
        // exited with an error in the same moment (a peer that lost its connection to it). One
        // that is the cause already (stopped after reporting the failure) stays it, however it
        // then ends: mpirun may crash on our signal.
        const int index = static_cast<int>(&c - children.data());
        // A remote shell reports its command's death by a signal as an exit code above 128
        // (a shell's 128 + n, ssh's 255).
        const bool killed = (WIFSIGNALED(status) &&
                             !(c.stopped && WTERMSIG(status) == (c.killed ? SIGKILL : SIGTERM))) ||
                            (WIFEXITED(status) && code > 128 && !c.stopped);
        if (code != 0 && (end.code == 0 || (killed && !end.cause_killed && end.failed != index))) {
          const bool first = end.code == 0;
          end.code = code;
          end.failed = index;
          end.cause = cat(specs[end.failed].name, " ", ending_of(status));
          end.cause_killed = killed;
          // Preempted ranks end one by one once their checkpoint is written: let the others end.
          if (code == kPreemptedExitCode) {
            deadline_kill = std::chrono::steady_clock::now() + std::chrono::seconds(30);
            continue;
          }
          // In the log: the launcher says the job's end once, when it is over (launch.cc).
          LaunchLog::get().write(
              cat("distml launch: ", end.cause,
                  first ? "; stopping the others\n" : ", the cause of the failure above\n"));
          if (!first) continue;
          // A rank that exited with an error may have lost a peer whose end has not reached
          // the launcher yet (a remote shell reports it a moment later): for a second, a
          // process that ends killed takes the cause over.
          stop_others_at = std::chrono::steady_clock::now() +
                           (killed ? std::chrono::seconds(0) : std::chrono::seconds(1));
        }
      }
    }
    if (std::chrono::steady_clock::now() >= stop_others_at) {
      // One rank failed: stop the rest, politely first. SIGCONT lets a stopped process
      // (SIGSTOP, a debugger's) take the SIGTERM now rather than at the SIGKILL.
      for (auto& other : children)
        if (other.running && !other.stopped) {
          ::kill(other.pid, SIGTERM);
          ::kill(other.pid, SIGCONT);
          stop_orders(other);
          other.stopped = true;
        }
      stop_others_at = std::chrono::steady_clock::time_point::max();
      deadline_kill =
          std::min(deadline_kill, std::chrono::steady_clock::now() + std::chrono::seconds(5));
    }
    for (auto& c : children)
      if (c.running && !c.stopped && std::chrono::steady_clock::now() > c.teardown_by) {
        const std::string& name = specs[&c - children.data()].name;
        std::fprintf(stderr,
                     "distml launch: %s reported the job's failure but has not ended (a host it "
                     "cannot reach?); stopping it\n",
                     name.c_str());
        if (end.code == 0) {
          end.code = 1;
          end.failed = static_cast<int>(&c - children.data());
          end.cause = cat(name, " reported the job's failure and did not end");
        }
        // mpirun, already aborting, takes the first signal as a warning ("hit ctrl-c again to
        // forcibly terminate") and the second as the order.
        ::kill(c.pid, SIGTERM);
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        ::kill(c.pid, SIGTERM);
        c.stopped = true;
        deadline_kill =
            std::min(deadline_kill, std::chrono::steady_clock::now() + std::chrono::seconds(5));
      }
    if (std::chrono::steady_clock::now() > deadline_kill)
      for (auto& c : children)
        if (c.running && !c.killed) {
          ::kill(-c.pid, SIGKILL);  // its group: what it started too
          ::kill(c.pid, SIGKILL);
          stop_orders(c);
          c.stopped = c.killed = true;  // the launcher's kill: not the cause of a failure
        }
  }
  for (auto& c : children) {
    for (int fd : {c.out, c.err, c.orders})
      if (fd >= 0) ::close(fd);
    end.stderr_tail += c.err_tail;
  }
  return end;
}

}  // namespace distml::cli
