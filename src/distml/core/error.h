// Typed errors for what a user can fix, and check macros for invariants that only a bug breaks.
// The CLI maps UsageError, ConfigError, DataError, CheckpointError and EnvError to exit code 2
// and everything else to 1.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace distml {

/// Base of every error distml throws on purpose.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Bad command-line usage: unknown flag value, out-of-range number.
class UsageError : public Error {
 public:
  using Error::Error;
};

/// Bad configuration: the message names the file, key and what was expected.
class ConfigError : public Error {
 public:
  using Error::Error;
};

/// Bad or unreadable input data: the message names the file and line or offset.
class DataError : public Error {
 public:
  using Error::Error;
};

/// A communication failure: a peer sent the wrong size, ranks disagree, an engine failed.
class CommError : public Error {
 public:
  using Error::Error;
};

/// A blocking operation did not finish in time; names the operation and the missing ranks.
class TimeoutError : public CommError {
 public:
  using CommError::CommError;
};

/// A checkpoint could not be written or read back intact.
class CheckpointError : public Error {
 public:
  using Error::Error;
};

/// A reinforcement-learning environment failed (the user's own, or an external process that
/// broke the protocol or exited): the message names the environment and the step.
class EnvError : public Error {
 public:
  using Error::Error;
};

/// A broken invariant: a bug in distml, not in the user's input.
class InternalError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

namespace detail {
[[noreturn]] void fail_check(const char* file, int line, const std::string& what);

template <class A, class B>
std::string describe_pair(const char* a_expr, const char* b_expr, const A& a, const B& b) {
  std::ostringstream s;
  s << a_expr << " (" << a << ") vs " << b_expr << " (" << b << ")";
  return s.str();
}
}  // namespace detail

/// Builds a message from stream pieces: `cat("rank ", r, " of ", n)`.
template <class... Parts>
std::string cat(const Parts&... parts) {
  std::ostringstream s;
  (s << ... << parts);
  return s.str();
}

}  // namespace distml

#define DML_CHECK(cond, ...)                                                                \
  do {                                                                                      \
    if (!(cond))                                                                            \
      ::distml::detail::fail_check(__FILE__, __LINE__,                                      \
                                   ::distml::cat("check failed: " #cond " ", __VA_ARGS__)); \
  } while (0)

#define DML_CHECK_OP(a, op, b, ...)                                                                \
  do {                                                                                             \
    const auto& dml_a_ = (a);                                                                      \
    const auto& dml_b_ = (b);                                                                      \
    if (!(dml_a_ op dml_b_))                                                                       \
      ::distml::detail::fail_check(                                                                \
          __FILE__, __LINE__,                                                                      \
          ::distml::cat("check failed: ", ::distml::detail::describe_pair(#a, #b, dml_a_, dml_b_), \
                        " ", __VA_ARGS__));                                                        \
  } while (0)

#define DML_CHECK_EQ(a, b, ...) DML_CHECK_OP(a, ==, b, __VA_ARGS__)
#define DML_CHECK_LE(a, b, ...) DML_CHECK_OP(a, <=, b, __VA_ARGS__)
#define DML_CHECK_LT(a, b, ...) DML_CHECK_OP(a, <, b, __VA_ARGS__)
