#pragma once
// Result<T>: the subset of std::expected<T, Error> Vessel uses (g++ 12 has no
// <expected> in C++20). Errors carry a closed Code, the errno that caused them
// (0 if none) and a context string that grows as the error propagates:
//   "boot vm sb-42: open kernel /x/vmlinux: No such file or directory".
#include <cerrno>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

namespace vessel {

enum class Code {
  kInvalidArgument,     // caller gave bad input
  kNotFound,            // a named thing does not exist
  kAlreadyExists,       // it exists and must not
  kFailedPrecondition,  // wrong state for the request
  kResourceExhausted,   // quota, memory, capacity
  kDeadlineExceeded,    // a bounded wait ran out
  kUnavailable,         // a peer (QEMU, guest, store) went away or refused
  kProtocol,            // a peer sent bytes we could not accept
  kPermissionDenied,    // not allowed
  kUnauthenticated,     // the caller did not prove who it is (no or bad credentials)
  kInternal,            // a bug or an unexpected system failure
};

std::string_view codeName(Code c);

class [[nodiscard]] Error {
 public:
  Error(Code code, std::string context, int sys_errno = 0)
      : code_(code), sys_errno_(sys_errno), context_(std::move(context)) {}

  // An Error from the current errno, e.g. Error::fromErrno("open " + path).
  static Error fromErrno(std::string context, int e = errno);

  Code code() const { return code_; }
  int sysErrno() const { return sys_errno_; }
  const std::string& context() const { return context_; }

  // Prepends "what: " to the context; used as the error travels upward.
  Error&& withContext(std::string_view what) &&;
  Error withContext(std::string_view what) const&;

  // "context: strerror" (the code is not repeated; see codeName()).
  std::string message() const;

 private:
  Code code_;
  int sys_errno_;
  std::string context_;
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit by design
  Result(Error error) : v_(std::in_place_index<1>, std::move(error)) {}  // NOLINT

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  bool has_value() const { return ok(); }

  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const Error& error() const& { return std::get<1>(v_); }
  Error&& error() && { return std::get<1>(std::move(v_)); }

  T value_or(T other) const& { return ok() ? value() : std::move(other); }

 private:
  std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : error_(std::move(error)), has_error_(true) {}  // NOLINT

  bool ok() const { return !has_error_; }
  explicit operator bool() const { return ok(); }
  bool has_value() const { return ok(); }
  void value() const {}
  const Error& error() const& { return error_; }
  Error&& error() && { return std::move(error_); }

 private:
  Error error_{Code::kInternal, ""};
  bool has_error_ = false;
};

using Status = Result<void>;
inline Status okStatus() { return {}; }

}  // namespace vessel

#define VESSEL_CONCAT_INNER(a, b) a##b
#define VESSEL_CONCAT(a, b) VESSEL_CONCAT_INNER(a, b)

// VESSEL_TRY(expr): return expr's Error from the enclosing function if it has one.
#define VESSEL_TRY(expr)                                              \
  do {                                                                \
    auto&& vessel_try_r_ = (expr);                                    \
    if (!vessel_try_r_.ok()) return std::move(vessel_try_r_).error(); \
  } while (0)

// VESSEL_TRY_CTX(expr, "what"): the same, adding context.
#define VESSEL_TRY_CTX(expr, what)                                                      \
  do {                                                                                  \
    auto&& vessel_try_r_ = (expr);                                                      \
    if (!vessel_try_r_.ok()) return std::move(vessel_try_r_).error().withContext(what); \
  } while (0)

// VESSEL_ASSIGN_OR_RETURN(auto x, expr): bind the value or return the Error.
#define VESSEL_ASSIGN_OR_RETURN(lhs, expr) \
  VESSEL_ASSIGN_OR_RETURN_IMPL(VESSEL_CONCAT(vessel_r_, __LINE__), lhs, expr, return )
#define VESSEL_CO_ASSIGN_OR_RETURN(lhs, expr) \
  VESSEL_ASSIGN_OR_RETURN_IMPL(VESSEL_CONCAT(vessel_r_, __LINE__), lhs, expr, co_return )
#define VESSEL_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr, ret) \
  auto tmp = (expr);                                      \
  if (!tmp.ok()) ret std::move(tmp).error();              \
  lhs = std::move(tmp).value()

#define VESSEL_CO_TRY(expr)                                              \
  do {                                                                   \
    auto&& vessel_try_r_ = (expr);                                       \
    if (!vessel_try_r_.ok()) co_return std::move(vessel_try_r_).error(); \
  } while (0)

// Broken invariants only: never for input from a guest, tenant or network.
#define VESSEL_CHECK(cond)                                         \
  do {                                                             \
    if (!(cond)) ::vessel::checkFailed(#cond, __FILE__, __LINE__); \
  } while (0)

namespace vessel {
[[noreturn]] void checkFailed(const char* cond, const char* file, int line);
}
