#include "vesseld/testing/fake_machine.h"

#include <sys/stat.h>

#include "base/log.h"
#include "hypervisor/testing/fake_hypervisor.h"

namespace vessel::vesseld::testing {

Status checkFakeConfig(const Config& cfg, const std::string& agent) {
  // The test-only fake hypervisor: no VMM, no jail, no gateway.
  if (cfg.jail || cfg.egress || cfg.role == Role::kAll)
    return Error(Code::kInvalidArgument,
                 "--hypervisor=fake (tests) needs --role=api or node, --no-jail and --no-egress");
  if (cfg.role != Role::kNode) return okStatus();
  if (agent.empty()) return Error(Code::kInvalidArgument, "fake agent is not set");
  struct stat st {};
  if (::stat(agent.c_str(), &st) != 0) return Error::fromErrno("fake agent " + agent);
  if (!S_ISREG(st.st_mode))
    return Error(Code::kInvalidArgument, "fake agent " + agent + " is not a file");
  return okStatus();
}

MachineFactory fakeMachine(const std::string& agent_flag) {
  return [&agent_flag](boost::asio::io_context&, const NodeSettings& s) -> Result<Machine> {
    const std::string agent = agent_flag;
    Logger("vesseld").warn("--hypervisor=fake: sandboxes are host processes (tests only)");
    Machine m;
    m.name = "fake";
    m.hv = std::make_unique<hypervisor::testing::FakeHypervisor>(
        hypervisor::testing::FakeOptions{agent});
    m.build_hv = [agent] {
      return std::make_unique<hypervisor::testing::FakeHypervisor>(
          hypervisor::testing::FakeOptions{agent});
    };
    // What installFakeTemplate writes.
    m.version = "fake";
    m.kernel_sha = "k";
    m.accel = hypervisor::Accel::kTcg;
    m.accel_reason = "fake hypervisor";
    m.grow_disks = false;  // the host-run agent has no disk to grow
    m.warm_pools = false;
    m.install_minimal = [run_root = s.run_root](boost::asio::io_context&,
                                                templates::TemplateStore& templates) -> Status {
      if (templates.open("minimal").ok()) return okStatus();
      VESSEL_TRY_CTX(
          hypervisor::testing::installFakeTemplate(templates, run_root + "/tb-fake", "minimal"),
          "install the fake minimal template");
      return okStatus();
    };
    m.sweep = [] {};
    return m;
  };
}

}  // namespace vessel::vesseld::testing
