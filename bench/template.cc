// bench/template (issue 26): templates from an OCI image and from a
// Dockerfile, through a real vesseld and the `vessel` CLI, beside
// `buildah bud` of the same Dockerfile on this machine, in one run. A real
// registry on 127.0.0.1 (docker-registry) holds an image of about 100 MiB
// (busybox and 100 MiB of random bytes, one layer) made here.
//   1. pull and convert the image into a template (`--from-image`), cold;
//   2. a six-step Dockerfile on that image: cold, rebuilt unchanged, and
//      rebuilt with its last line changed;
//   3. the first create from the result, to its first command's answer;
//   4. buildah bud of the same Dockerfile: cold (its pull included),
//      unchanged (its layer cache), last line changed.
// One run each (every number is a whole build under TCG); JSON in
// bench/results/template.json.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "bench_util.h"
#include "images/testing/registry.h"
#include "vesseld_harness.h"

namespace vessel::bench {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::string dockerfile(const std::string& image, const std::string& last) {
  return "FROM " + image +
         "\n"
         "ENV APP=/srv/app\n"
         "WORKDIR /srv/app\n"
         "COPY app.sh ./\n"
         "RUN chmod +x app.sh && ./app.sh > out.txt\n"
         "RUN echo step5 > five.txt && ls -l /opt > opt.txt\n"
         "RUN echo " +
         last + " > last.txt\n";
}

struct Timed {
  double ms = -1;
  bool ok = false;
  std::string why;
};

Timed cli(const testing::Vesseld& d, const std::vector<std::string>& args) {
  auto t = Clock::now();
  auto r = testing::runCli(VESSEL_CLI_PATH, d, args, {.timeout = std::chrono::seconds(1200)});
  Timed out;
  out.ms = msSince(t);
  out.ok = r.code == 0;
  if (!out.ok) out.why = r.err.substr(r.err.size() > 400 ? r.err.size() - 400 : 0);
  return out;
}

// buildah bud with its own storage (vfs: no overlay mounts needed), the
// registry reached over plain HTTP.
Timed buildah(const std::string& storage, const std::string& context, const std::string& tag) {
  Timed out;
  if (::access("/usr/bin/buildah", X_OK) != 0) {
    out.why = "buildah is not installed (apt-get install buildah)";
    return out;
  }
  auto t = Clock::now();
  // The paths are this benchmark's own scratch directories (no quoting needed).
  std::string log = storage + ".log";
  std::string cmd = "/usr/bin/buildah --root " + storage + "/root --runroot " + storage +
                    "/run --storage-driver vfs bud --layers --tls-verify=false --isolation chroot "
                    "-q -t " +
                    tag + " -f " + context + "/Dockerfile " + context + " > " + log + " 2>&1";
  int rc = std::system(cmd.c_str());
  out.ms = msSince(t);
  out.ok = rc == 0;
  if (!out.ok) {
    std::ifstream f(log);
    std::string text((std::istreambuf_iterator<char>(f)), {});
    out.why = "buildah: " + text.substr(text.size() > 400 ? text.size() - 400 : 0);
  }
  return out;
}

void row(const char* what, const Timed& vessel, const Timed& other) {
  auto cell = [](const Timed& t) {
    if (t.ms < 0 && t.why.empty()) return std::string("-");
    if (!t.ok) return std::string("failed");
    char b[32];
    std::snprintf(b, sizeof b, "%.0f", t.ms);
    return std::string(b);
  };
  std::printf("| %-46s | %10s | %10s |\n", what, cell(vessel).c_str(), cell(other).c_str());
}

boost::json::object js(const Timed& t) { return {{"ms", t.ms}, {"ok", t.ok}, {"why", t.why}}; }

// Long because the benchmark is one sequence over one registry and one
// daemon (image, builds, create, then buildah), whose order is the point.
int run() {
  if (::geteuid() != 0) {
    std::fprintf(stderr, "bench_template needs root (vesseld, umoci)\n");
    return 2;
  }
  auto reg = images::testing::TestRegistry::start();
  if (!reg.ok()) {
    std::fprintf(stderr, "registry: %s\n", reg.error().message().c_str());
    return 1;
  }
  std::string root = (*reg)->dir() + "/big-root";
  if (auto s = images::testing::makeBusyboxRoot(root); !s.ok()) {
    std::fprintf(stderr, "root: %s\n", s.error().message().c_str());
    return 1;
  }
  fs::create_directories(root + "/opt");
  {
    std::ifstream rnd("/dev/urandom", std::ios::binary);
    std::ofstream big(root + "/opt/blob", std::ios::binary);
    std::vector<char> buf(1 << 20);
    for (int i = 0; i < 100; ++i) {
      rnd.read(buf.data(), static_cast<std::streamsize>(buf.size()));
      big.write(buf.data(), static_cast<std::streamsize>(buf.size()));
    }
  }
  images::testing::ImageSpec spec;
  spec.env = {"PATH=/usr/local/bin:/usr/bin:/bin"};
  if (auto p = (*reg)->push(root, "bench/big", "1", spec); !p.ok()) {
    std::fprintf(stderr, "push: %s\n", p.error().message().c_str());
    return 1;
  }
  std::string image = (*reg)->host() + "/bench/big:1";

  testing::Vesseld d(VESSELD_PATH);
  if (!d.start()) {
    std::fprintf(stderr, "vesseld did not start:\n%s\n", d.log().c_str());
    return 1;
  }
  std::string ctx = (*reg)->dir() + "/context";
  fs::create_directories(ctx);
  std::ofstream(ctx + "/app.sh") << "#!/bin/sh\necho app ran in $(pwd)\n";
  auto write = [&](const std::string& last) {
    std::ofstream(ctx + "/Dockerfile") << dockerfile(image, last);
  };

  Timed pull = cli(d, {"template", "build", "--from-image", image, "--name", "big"});
  write("one");
  Timed cold = cli(d, {"template", "build", "-f", ctx + "/Dockerfile", "--name", "df"});
  Timed same = cli(d, {"template", "build", "-f", ctx + "/Dockerfile", "--name", "df"});
  write("two");
  Timed last = cli(d, {"template", "build", "-f", ctx + "/Dockerfile", "--name", "df"});

  Timed create;
  {
    auto t = Clock::now();
    std::string why;
    std::string id = d.createSandbox(R"({"template": "df"})", &why);
    std::string out = id.empty() ? "" : d.sh(id, "cat /srv/app/last.txt");
    create.ms = msSince(t);
    create.ok = out == "two\n";
    if (!create.ok) create.why = why + out;
    if (!id.empty()) d.deleteSandbox(id);
  }

  std::string storage = (*reg)->dir() + "/buildah";
  write("one");
  Timed b_cold = buildah(storage, ctx, "bench-df");
  Timed b_same = buildah(storage, ctx, "bench-df");
  write("two");
  Timed b_last = buildah(storage, ctx, "bench-df");
  fs::remove_all(storage);

  std::printf("\nbench_template: one run each, ms (TCG, this machine)\n\n");
  std::printf("| %-46s | %10s | %10s |\n", "", "vessel", "buildah");
  std::printf("|%s|%s|%s|\n", std::string(48, '-').c_str(), std::string(12, '-').c_str(),
              std::string(12, '-').c_str());
  row("pull + convert ~100 MiB image (cold)", pull, {});
  row("six-step Dockerfile, cold", cold, b_cold);
  row("rebuild, unchanged", same, b_same);
  row("rebuild, last line changed", last, b_last);
  row("first create + first command", create, {});
  for (const auto* t : {&pull, &cold, &same, &last, &create, &b_cold, &b_same, &b_last})
    if (!t->ok && !t->why.empty()) std::printf("  failed or skipped: %s\n", t->why.c_str());
  writeResults("template", {{"pull_convert", js(pull)},
                            {"dockerfile_cold", js(cold)},
                            {"dockerfile_unchanged", js(same)},
                            {"dockerfile_last_changed", js(last)},
                            {"first_create", js(create)},
                            {"buildah_cold", js(b_cold)},
                            {"buildah_unchanged", js(b_same)},
                            {"buildah_last_changed", js(b_last)}});
  return 0;
}

}  // namespace
}  // namespace vessel::bench

int main() { return vessel::bench::run(); }
