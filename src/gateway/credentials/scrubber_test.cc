#include "gateway/credentials/scrubber.h"

#include <gtest/gtest.h>
#include <openssl/evp.h>

namespace vessel::gateway::credentials {
namespace {

std::string run(Scrubber& s, const std::vector<std::string>& chunks) {
  std::string out;
  for (const auto& c : chunks) out += s.process(c);
  return out + s.flush();
}

std::string byteByByte(Scrubber& s, const std::string& in) {
  std::vector<std::string> chunks;
  for (char c : in) chunks.emplace_back(1, c);
  return run(s, chunks);
}

std::string b64(const std::string& in, bool url) {
  std::string out(4 * ((in.size() + 2) / 3) + 1, '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(in.data()),
                          static_cast<int>(in.size()));
  out.resize(static_cast<size_t>(n));
  if (url) {
    for (char& c : out) c = c == '+' ? '-' : c == '/' ? '_' : c;
  }
  return out;
}

std::string unb64(std::string in, bool url) {
  for (char& c : in) {
    if (c == '*') c = 'A';  // masked characters decode to something else
    if (url) c = c == '-' ? '+' : c == '_' ? '/' : c;
  }
  std::string out(in.size(), '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(in.data()),
                          static_cast<int>(in.size()));
  out.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return out;
}

const std::string kToken = "ab/cd+ef==12?345&x<y";
const std::string kValue = "Bearer " + kToken;

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

TEST(ScrubberTest, Base64AtEveryAlignmentAndUrlAlphabet) {
  for (bool url : {false, true}) {
    for (const std::string& secret : {kValue, kToken}) {
      for (size_t pre = 0; pre < 6; ++pre) {
        std::string plain = std::string(pre, 'p') + secret + "tail";
        Scrubber s(secretForms(kValue));
        std::string out = byteByByte(s, "x=" + b64(plain, url) + "\n");
        EXPECT_EQ(unb64(out.substr(2, out.size() - 3), url).find(kToken), std::string::npos)
            << "url=" << url << " prefix=" << pre << " " << out;
      }
    }
  }
}

TEST(ScrubberTest, PercentJsonAndRawForms) {
  const std::vector<std::string> leaks = {
      kToken,
      "ab%2Fcd%2Bef%3D%3D12%3F345%26x%3Cy",
      "ab%2fcd%2bef%3d%3d12%3f345%26x%3cy",
      "Bearer+ab%2Fcd%2Bef%3D%3D12%3F345%26x%3Cy",
      "ab\\/cd+ef==12?345&x<y",
      "ab/cd+ef==12?345\\u0026x\\u003cy",
      "ab\\/cd+ef==12?345\\u0026x\\u003Cy",
  };
  for (const std::string& leak : leaks) {
    Scrubber s(secretForms(kValue));
    std::string out = byteByByte(s, "{\"echo\":\"" + leak + "\"}");
    EXPECT_EQ(out.find(leak), std::string::npos) << leak << " -> " << out;
    EXPECT_NE(out.find("****"), std::string::npos) << out;
    EXPECT_EQ(out.size(), leak.size() + 11);  // same length: framing unchanged
  }
}

}  // namespace
}  // namespace vessel::gateway::credentials
