// vesseld: the Vessel control plane and node (--role), on QEMU.
// Flags -> Config -> validate -> run: all of it in vesseld/cli.h, shared
// with the test binaries; this binary adds no machine but QEMU.
#include "vesseld/cli.h"

int main(int argc, char** argv) {
  vessel::vesseld::Binary binary;
  binary.machines["qemu"] = vessel::vesseld::qemuMachine;
  return vessel::vesseld::vesseldMain(argc, argv, std::move(binary));
}
