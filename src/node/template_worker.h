#pragma once
// Template builds off the io thread. A build copies and hashes images
// (seconds of blocking disk work) and boots a guest for minutes at most;
// the node's io thread must keep serving meanwhile. `concurrency` worker
// threads (--max-concurrent-builds) each run builds one after another with
// their own io_context, hypervisor, scratch directory and view of the
// template store (installs are atomic renames, so the io thread's store
// sees a template once it is complete). Two builds of one template never
// run at once: the second waits, then finds the first's result. Callbacks
// run on a worker thread: callers post them to their own executor.
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "hypervisor/hypervisor.h"
#include "images/converter.h"
#include "node/template_builder.h"
#include "templates/build_spec.h"
#include "templates/manifest.h"
#include "templates/store.h"

namespace vessel::node {

struct BuildInputs;  // node/template_builder.h

struct TemplateBuildEnv {
  // The worker thread's own hypervisor, made on that thread (vesseld: QEMU,
  // jailed like every other VM, since build VMs run tenant code).
  std::function<std::unique_ptr<hypervisor::Hypervisor>()> hypervisor;
  std::string qemu_version;
  std::string kernel, kernel_sha256;
  hypervisor::Accel accel = hypervisor::Accel::kTcg;
  std::string template_root;  // the node's template store
  std::string work_dir;       // scratch for build VMs
  size_t max_queued = 8;      // builds waiting or running, per node
  size_t concurrency = 1;     // builds running at once (--max-concurrent-builds)
  // Builds are refused while the store's filesystem has less free (MiB;
  // --min-free-disk-mib); 0: no check.
  uint64_t min_free_mib = 0;
  // from_image builds: how images are pulled and converted (its cache_dir
  // empty: such builds are refused).
  images::ConverterOptions images;
  // Dockerfile builds: the step cache (BuildInputs::step_cache_dir).
  std::string step_cache_dir;
  uint64_t step_cache_max_mib = 8192;
};

class TemplateWorker {
 public:
  struct Job {
    templates::BuildSpec spec;  // spec.name: the name the template is stored under
    std::string base;           // the stored name of the template whose disk it boots
                                // ("" for a from_image build: the image's filesystem)
    std::function<void(const std::string& step, int percent)> progress;
    BuildLog log;  // a Dockerfile build's steps and output; optional
    // A from_image build's registry credential (the tenant's, resolved by
    // the API side from spec.from_image_credential); empty: anonymous.
    templates::RegistryAuth registry_auth;
    std::function<void(Result<templates::Manifest>)> done;
    // Before done, for a build that succeeded: the checksums of the new
    // template's files (by path) the worker computed, so that the io
    // thread's store need not hash GiBs again at the first create
    // (TemplateStore::noteHashed). Optional.
    std::function<void(std::map<std::string, templates::TemplateStore::HashedFile>)> hashed;
  };

  explicit TemplateWorker(TemplateBuildEnv env);
  // Abandons the running build (its VM is stopped and its staging removed
  // as the build unwinds) and drops queued ones without calling them back.
  ~TemplateWorker();
  TemplateWorker(const TemplateWorker&) = delete;
  TemplateWorker& operator=(const TemplateWorker&) = delete;

  // kResourceExhausted when max_queued builds are already waiting or running.
  Status submit(Job job);
  const TemplateBuildEnv& env() const { return env_; }

 private:
  void loop(size_t slot);
  void build(Job& job, const std::string& work);
  Status convertFromImage(Job& job, BuildInputs& in);

  TemplateBuildEnv env_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;          // GUARDED_BY(mu_)
  size_t busy_ = 0;                // GUARDED_BY(mu_)
  std::set<std::string> running_;  // GUARDED_BY(mu_): the names being built
  bool stop_ = false;              // GUARDED_BY(mu_)
  std::vector<std::thread> threads_;
};

}  // namespace vessel::node
