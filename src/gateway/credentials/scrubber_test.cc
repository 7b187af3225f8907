#include "gateway/credentials/scrubber.h"

#include <gtest/gtest.h>

namespace vessel::gateway::credentials {
namespace {

std::string run(Scrubber& s, const std::vector<std::string>& chunks) {
  std::string out;
  for (const auto& c : chunks) out += s.process(c);
  return out + s.flush();
}

TEST(ScrubberTest, MasksAcrossChunkBoundaries) {
  Scrubber s({"s3cr3t-token"});
  EXPECT_EQ(run(s, {"a s3cr", "3t-to", "ken b"}), "a ************ b");
}

TEST(ScrubberTest, PassesOrdinaryBytesAtOnce) {
  Scrubber s({"s3cr3t-token"});
  EXPECT_EQ(s.process("hello world"), "hello world");
  // A tail that could start the secret is held, then released.
  EXPECT_EQ(s.process("x s3c"), "x ");
  EXPECT_EQ(s.process("ond"), "s3cond");
}

TEST(ScrubberTest, FormsIncludeTokenBase64AndPercent) {
  auto forms = secretForms("Bearer ab/cd+ef==123");
  Scrubber s(forms);
  EXPECT_EQ(run(s, {"token=ab/cd+ef==123"}), "token=" + std::string(13, '*'));
  EXPECT_EQ(run(s, {"q=ab%2Fcd%2Bef%3D%3D123"}).find("ab%2F"), std::string::npos);
}

}  // namespace
}  // namespace vessel::gateway::credentials
