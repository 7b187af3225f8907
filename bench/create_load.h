#pragma once
// bench/create --load (issue 16): creates as users make them, each followed
// by a first command: 20 back to back, then bursts of 8 and 32 after 10 s
// idle, from a pool sized as `make up` sizes it; beside a cold boot and a
// bubblewrap container in the same run.
#include <boost/asio/io_context.hpp>
#include <boost/json/object.hpp>
#include <string>

#include "hypervisor/hypervisor.h"
#include "templates/store.h"

namespace vessel::bench {

struct LoadEnv {
  boost::asio::io_context& io;
  hypervisor::Hypervisor& hv;
  templates::TemplateStore& store;
  std::string root, kernel, tmpl;  // tmpl: a template built in `store`
  std::string debian_image;        // for the container ("" = none)
};

// Prints the tables; the numbers go into `out`. b2b_only (`--b2b`): only
// the idle create, the back-to-back loop, idle cost and the phase breakdown
// (minutes shorter; for comparing builds side by side).
int runLoad(LoadEnv& e, boost::json::object& out, bool b2b_only = false);

}  // namespace vessel::bench
