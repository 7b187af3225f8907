#include "node/template_worker.h"

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <filesystem>

#include "node/template_builder.h"
#include "templates/image_ref.h"
#include "templates/naming.h"
#include "templates/store.h"

namespace vessel::node {

namespace asio = boost::asio;

TemplateWorker::TemplateWorker(TemplateBuildEnv env) : env_(std::move(env)) {
  for (size_t slot = 0; slot < std::max<size_t>(1, env_.concurrency); ++slot)
    threads_.emplace_back([this, slot] { loop(slot); });
}

TemplateWorker::~TemplateWorker() {
  {
    std::lock_guard l(mu_);
    stop_ = true;
    queue_.clear();
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

Status TemplateWorker::submit(Job job) {
  {
    std::lock_guard l(mu_);
    if (stop_) return Error(Code::kUnavailable, "template builds are stopping");
    if (queue_.size() + busy_ >= env_.max_queued)
      return Error(Code::kResourceExhausted,
                   std::to_string(env_.max_queued) +
                       " template builds are already queued on this node; try again later");
    queue_.push_back(std::move(job));
  }
  cv_.notify_all();
  return okStatus();
}

void TemplateWorker::loop(size_t slot) {
  // Short: the build VM's sockets live under it (unix socket paths are
  // limited to 108 bytes). One per slot: a slot runs one build at a time.
  const std::string work = env_.work_dir + "/" + std::to_string(slot);
  for (;;) {
    Job job;
    {
      std::unique_lock l(mu_);
      // The oldest job whose template no other slot is building.
      auto next = [&] {
        return std::find_if(queue_.begin(), queue_.end(),
                            [&](const Job& j) { return !running_.count(j.spec.name); });
      };
      cv_.wait(l, [&] { return stop_ || next() != queue_.end(); });
      if (stop_) return;
      auto it = next();
      job = std::move(*it);
      queue_.erase(it);
      ++busy_;
      running_.insert(job.spec.name);
    }
    build(job, work);
    {
      std::lock_guard l(mu_);
      --busy_;
      running_.erase(job.spec.name);
    }
    cv_.notify_all();  // a job of the same name may run now
  }
}

Status TemplateWorker::convertFromImage(Job& job, BuildInputs& in) {
  if (env_.images.cache_dir.empty())
    return Error(Code::kUnavailable, "builds from images are not enabled on this node");
  auto ref = templates::parseImageRef(job.spec.from_image);
  if (!ref.ok()) return std::move(ref).error();
  // The conversion's steps are the build's first 0-5 %.
  auto progress = [&job](const std::string& step, int percent) {
    if (job.progress) job.progress(step, percent / 20);
  };
  images::ConverterOptions o = env_.images;
  // A tenant's registry credential: what it pulls is cached for that tenant only.
  o.auth = job.registry_auth;
  o.cache_scope = templates::templateOwner(job.spec.name);
  VESSEL_ASSIGN_OR_RETURN(images::ConvertedImage image, images::convertImage(o, *ref, progress));
  useConvertedImage(in, image);
  return okStatus();
}

void TemplateWorker::build(Job& job, const std::string& work) {
  std::unique_ptr<hypervisor::Hypervisor> hv = env_.hypervisor();
  templates::TemplateStore store(env_.template_root, env_.qemu_version, env_.kernel_sha256);
  // This store is the worker's own: the daemon's threshold must be set on
  // it too, or buildTemplate()'s check passes on a full disk.
  store.setMinFreeMib(env_.min_free_mib);
  BuildInputs in;
  // The base is the base template's disk as it was snapshotted; the build
  // boots it afresh. Held for the build: collection leaves it alone.
  std::shared_ptr<const templates::Template> base;
  if (job.spec.from_image.empty()) {
    auto b = store.open(job.base);
    if (!b.ok()) {
      job.done(std::move(b).error().withContext("base template " + job.base));
      return;
    }
    base = std::move(*b);
    in.base_image = base->path(templates::kRootfsFile);
  } else {
    // A converted image lives in the image cache (never written: the build
    // copies it), found there by digest or made now.
    auto image = convertFromImage(job, in);
    if (!image.ok()) {
      job.done(std::move(image).error().withContext("build template " + job.spec.name));
      return;
    }
  }
  std::error_code ec;
  std::filesystem::remove_all(work, ec);
  std::filesystem::create_directories(work, ec);
  in.kernel = env_.kernel;
  in.kernel_sha256 = env_.kernel_sha256;
  in.qemu_version = env_.qemu_version;
  in.accel = env_.accel;
  in.work_dir = work;
  in.step_cache_dir = env_.step_cache_dir;
  in.step_cache_max_mib = env_.step_cache_max_mib;
  std::optional<Result<templates::Manifest>> out;
  // Declared last, destroyed first: an abandoned build's frames unwind
  // while everything they refer to still exists.
  asio::io_context io;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        auto t = co_await buildTemplate(*hv, store, job.spec, in, job.progress, job.log);
        if (t.ok() && job.hashed) job.hashed(store.hashedFiles(**t));
        if (t.ok())
          out.emplace((*t)->manifest);
        else
          out.emplace(std::move(t).error());
      },
      asio::detached);
  // Not runBlocking: a stop request must be able to end the wait. Leaving
  // the io_context with the build unfinished destroys its frames, whose
  // RAII stops the build VM and removes its staging directory.
  for (;;) {
    if (out) break;
    {
      std::lock_guard l(mu_);
      if (stop_) break;
    }
    io.restart();
    if (io.run_one_for(std::chrono::milliseconds(100)) == 0 && io.stopped() && !out)
      out.emplace(Error(Code::kInternal, "template build " + job.spec.name + " stalled"));
  }
  std::filesystem::remove_all(work, ec);
  if (out) job.done(std::move(*out));
}

}  // namespace vessel::node
