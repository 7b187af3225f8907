#pragma once
// Network namespaces and links, each owned by an RAII object whose
// destructor removes it: a failed create or an early return never leaves a
// namespace, veth or nftables table behind.
#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "base/fd.h"
#include "base/result.h"

namespace vessel::os {

// A named network namespace (/run/netns/NAME, as `ip netns` makes them).
class Netns {
 public:
  Netns() = default;
  Netns(Netns&& o) noexcept : name_(std::exchange(o.name_, std::string())) {}
  Netns& operator=(Netns&& o) noexcept;
  Netns(const Netns&) = delete;
  Netns& operator=(const Netns&) = delete;
  ~Netns() { destroy(); }

  // Creates NAME (which must not exist) with loopback up.
  static Result<Netns> create(const std::string& name);
  // Takes ownership of NAME, which an earlier process made and left (a
  // vesseld restart takes its live sandboxes' namespaces over).
  static Result<Netns> adopt(const std::string& name);
  static bool exists(const std::string& name);

  const std::string& name() const { return name_; }
  std::string path() const { return "/run/netns/" + name_; }
  bool valid() const { return !name_.empty(); }

  // argv run inside the namespace ("ip netns exec NAME argv...").
  std::vector<std::string> wrap(std::vector<std::string> argv) const;
  // Runs argv inside the namespace; fails on a non-zero exit.
  Status run(std::vector<std::string> argv, std::string_view input = {}) const;
  // Sets a sysctl inside the namespace (net.* keys are per namespace).
  Status sysctl(const std::string& key, const std::string& value) const;

  // Deletes the namespace (and with it every link still inside).
  void destroy();
  // Lets go without deleting it (it outlives this process, for the next).
  void release() { name_.clear(); }

 private:
  explicit Netns(std::string name) : name_(std::move(name)) {}
  std::string name_;
};

// Argv for running something in `netns` ("" = this process's namespace).
std::vector<std::string> inNetns(const std::string& netns, std::vector<std::string> argv);

// Loads an nftables ruleset atomically (nft -f -) in `netns`: all of it or,
// on any error, none of it.
Status nftApply(const std::string& netns, std::string_view ruleset);

// An nftables table that is deleted in the destructor.
class NftTable {
 public:
  NftTable() = default;
  NftTable(std::string netns, std::string family, std::string name)
      : netns_(std::move(netns)), family_(std::move(family)), name_(std::move(name)) {}
  NftTable(NftTable&& o) noexcept { *this = std::move(o); }
  NftTable& operator=(NftTable&& o) noexcept;
  ~NftTable() { destroy(); }
  void destroy();
  // Releases ownership (the table lives on, e.g. inside a namespace that is
  // deleted as a whole).
  void release() { name_.clear(); }

 private:
  std::string netns_, family_, name_;
};

// A link in `netns` that is deleted in the destructor (for a veth: both ends).
class Link {
 public:
  Link() = default;
  Link(std::string netns, std::string name) : netns_(std::move(netns)), name_(std::move(name)) {}
  Link(Link&& o) noexcept { *this = std::move(o); }
  Link& operator=(Link&& o) noexcept;
  ~Link() { destroy(); }
  const std::string& name() const { return name_; }
  void destroy();
  void release() { name_.clear(); }  // e.g. it goes with its namespace

 private:
  std::string netns_, name_;
};

// Creates a veth pair: `a` in netns_a, `b` in netns_b ("" = this namespace).
// The returned Link owns end `a`.
Result<Link> createVeth(const std::string& netns_a, const std::string& a,
                        const std::string& netns_b, const std::string& b);

// Opens a tap device NAME inside the namespace at `netns_path` and returns
// its fd (IFF_TAP | IFF_NO_PI | IFF_VNET_HDR). The device lives as long as
// the fd: closing it removes the tap.
Result<Fd> openTap(const std::string& netns_path, const std::string& name);

}  // namespace vessel::os
