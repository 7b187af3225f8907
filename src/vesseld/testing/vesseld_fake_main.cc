// vesseld-fake: vesseld with the fake hypervisor beside QEMU, for tests
// and benchmarks only (`--hypervisor=fake --fake-agent=PATH`: the "VMs"
// are vessel-agent run as host processes). Never installed.
#include <CLI/CLI.hpp>
#include <string>

#include "vesseld/cli.h"
#include "vesseld/testing/fake_machine.h"

int main(int argc, char** argv) {
  namespace vd = vessel::vesseld;
  std::string agent;
  vd::Binary binary;
  binary.machines["qemu"] = vd::qemuMachine;
  binary.machines["fake"] = vd::testing::fakeMachine(agent);
  binary.add_flags = [&](CLI::App& app) {
    app.add_option("--fake-agent", agent, "--hypervisor=fake: the agent binary its VMs run");
  };
  binary.check = [&](const vessel::vesseld::Config& cfg) {
    if (cfg.hypervisor != "fake") return vessel::okStatus();
    return vd::testing::checkFakeConfig(cfg, agent);
  };
  return vd::vesseldMain(argc, argv, std::move(binary));
}
