// vessel-volume-server: the confined file server of one volume mount
// (volumes/fuse_server.h). Started by vesseld, never by hand.
#include <cstdio>

#include "volumes/fuse_server.h"

int main(int argc, char** argv) {
  auto o = vessel::volumes::parseServerArgs(argc, argv);
  if (!o.ok()) {
    std::fprintf(stderr, "vessel-volume-server: %s\n", o.error().message().c_str());
    return 2;
  }
  return vessel::volumes::runFileServer(*o);
}
