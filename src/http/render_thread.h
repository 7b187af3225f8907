#pragma once
// A thread of its own for turning guest-sized replies (directory and
// process listings of up to agentclient::kMaxListEntries entries: tens of
// MiB of JSON) into response bodies, so that the io thread, which serves
// every tenant, does not. Each front end that renders them (the data
// plane, envd) owns one.
#include <boost/asio/awaitable.hpp>
#include <boost/asio/thread_pool.hpp>
#include <memory>
#include <type_traits>
#include <utility>

#include "base/offload.h"

namespace vessel::http {

class RenderThread {
 public:
  // `render` runs on the thread; the caller resumes on its own executor
  // with the result. Pass a named function object (std::move(f)): see
  // CONTRIBUTING.md "Coroutines under g++ 12" rule 1.
  template <class F>
  boost::asio::awaitable<std::invoke_result_t<F>> run(F render) {
    return offload(*pool_, std::move(render));
  }

 private:
  // Its owner declares it last: stopped and joined first.
  std::unique_ptr<boost::asio::thread_pool> pool_ = std::make_unique<boost::asio::thread_pool>(1);
};

}  // namespace vessel::http
