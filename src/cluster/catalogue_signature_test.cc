// Catalogue signatures (issue 24, item 5): what the replicas sign verifies
// with their public key only, and a change of any field a copy relies on,
// a row another node rewrote, or a missing signature is refused.
#include "cluster/catalogue_signature.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "base/hex.h"
#include "base/sha256.h"
#include "templates/catalogue.h"
#include "templates/manifest.h"

namespace vessel::cluster {
namespace {

namespace fs = std::filesystem;

store::TemplateRecord record(const std::string& rootfs_sha) {
  templates::Manifest m;
  m.name = "t-0123456789ab-py";
  m.version = "v1";
  m.spec_hash = std::string(64, 'a');
  m.qemu_version = "fake";
  m.kernel_sha256 = "k";
  m.cmdline = "quiet";
  m.memory_mib = 64;
  m.created_at = "2026-01-01T00:00:00Z";
  m.files[templates::kRootfsFile] = rootfs_sha;
  m.files[templates::kMemoryFile] = sha256Hex("RAM");
  m.files[templates::kStateFile] = sha256Hex("");
  store::TemplateRecord r;
  r.name = m.name;
  r.version = m.version;
  r.tenant_id = "t1";
  r.manifest_json = templates::toJson(m);
  r.sizes_json = templates::sizesJson(
      {{templates::kRootfsFile, 5}, {templates::kMemoryFile, 3}, {templates::kStateFile, 0}});
  r.created_at = m.created_at;
  return r;
}

class CatalogueSignatureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/catalogue_signature_test_" + std::to_string(::getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    auto s = store::openSqlite(dir_ + "/vessel.db");
    ASSERT_TRUE(s.ok()) << s.error().message();
    store_ = std::move(*s);
    ASSERT_TRUE(store_->createTenant("t1", "t1").ok());
    ASSERT_TRUE(store_->createTenant("t2", "t2").ok());
  }
  void TearDown() override {
    store_.reset();
    fs::remove_all(dir_);
  }
  std::string dir_;
  std::unique_ptr<store::Store> store_;
  CatalogueSigner signer_ = *CatalogueSigner::fromSeed(std::string(32, '\x11'));
  CatalogueVerifier verifier_ = *CatalogueVerifier::fromHex(signer_.publicKeyHex());
};

TEST_F(CatalogueSignatureTest, OnlyTheReplicasKeyAndTheSignedRowVerify) {
  auto r = record(sha256Hex("rootfs"));
  auto sig = signer_.sign(r);
  ASSERT_TRUE(sig.ok());
  EXPECT_EQ(sig->size(), 128u);
  EXPECT_TRUE(verifier_.verify(r, *sig));
  // Another key (a node's own): its signature does not verify.
  auto other = *CatalogueSigner::fromSeed(std::string(32, '\x22'));
  EXPECT_FALSE(verifier_.verify(r, *other.sign(r)));
  EXPECT_FALSE(CatalogueVerifier::fromHex(other.publicKeyHex())->verify(r, *sig));
  // Each field a copy relies on is covered.
  for (auto change : std::vector<std::function<void(store::TemplateRecord&)>>{
           [](auto& x) { x.name += "x"; }, [](auto& x) { x.version = "v2"; },
           [](auto& x) { x.tenant_id = "t2"; },
           [](auto& x) { x = record(sha256Hex("another rootfs")); },
           [](auto& x) { x.sizes_json.replace(x.sizes_json.find('5'), 1, "6"); },
           [](auto& x) { x.created_at = "2027-01-01T00:00:00Z"; }}) {
    auto changed = r;
    change(changed);
    EXPECT_FALSE(verifier_.verify(changed, *sig));
  }
  EXPECT_FALSE(verifier_.verify(r, ""));
  EXPECT_FALSE(verifier_.verify(r, std::string(128, 'z')));
  EXPECT_FALSE(verifier_.verify(r, sig->substr(2) + "00"));
  EXPECT_FALSE(CatalogueVerifier::fromHex("abcd").ok());
  EXPECT_FALSE(CatalogueSigner::fromSeed("short").ok());
}

// A replica signs the row a node registered only when it is what that node
// answered for the tenant; a node copies only a row whose signature verifies.
TEST_F(CatalogueSignatureTest, ReplicasSignWhatTheyWereAnsweredNodesCheckIt) {
  auto r = record(sha256Hex("rootfs"));
  ASSERT_TRUE(store_->putTemplate(r, true).ok());
  auto unsigned_entry = verifiedEntry(*store_, verifier_, r.name, r.version);
  ASSERT_FALSE(unsigned_entry.ok());
  EXPECT_EQ(unsigned_entry.error().code(), Code::kFailedPrecondition);
  // Another tenant's build, or another manifest than the one answered: not signed.
  EXPECT_FALSE(signAnswered(*store_, signer_, "t2", r.name, r.version, r.manifest_json).ok());
  EXPECT_FALSE(signAnswered(*store_, signer_, "t1", r.name, r.version,
                            record(sha256Hex("other")).manifest_json)
                   .ok());
  EXPECT_FALSE(verifiedEntry(*store_, verifier_, r.name, r.version).ok());
  ASSERT_TRUE(signAnswered(*store_, signer_, "t1", r.name, r.version, r.manifest_json).ok());
  auto e = verifiedEntry(*store_, verifier_, r.name, r.version);
  ASSERT_TRUE(e.ok()) << e.error().message();
  EXPECT_EQ(e->manifest.files.at(templates::kRootfsFile), sha256Hex("rootfs"));
  EXPECT_EQ(e->owner, "t1");
  // A node rewrites the signed row (its own checksum): refused.
  ASSERT_TRUE(store_->putTemplate(record(sha256Hex("the node's own")), true).ok());
  EXPECT_FALSE(verifiedEntry(*store_, verifier_, r.name, r.version).ok());
}

TEST_F(CatalogueSignatureTest, KeyFilesAreHexAndThePrivateOneIsNotReadableByOthers) {
  const std::string key = dir_ + "/key", pub = dir_ + "/pub";
  std::ofstream(key) << hexEncode(std::string(32, '\x11')) << "\n";
  std::ofstream(pub) << signer_.publicKeyHex() << "\n";
  ASSERT_EQ(::chmod(key.c_str(), 0644), 0);
  EXPECT_FALSE(CatalogueSigner::openFile(key).ok());
  ASSERT_EQ(::chmod(key.c_str(), 0600), 0);
  auto s = CatalogueSigner::openFile(key);
  ASSERT_TRUE(s.ok()) << s.error().message();
  EXPECT_EQ(s->publicKeyHex(), signer_.publicKeyHex());
  auto v = CatalogueVerifier::openFile(pub);
  ASSERT_TRUE(v.ok()) << v.error().message();
  auto r = record(sha256Hex("rootfs"));
  EXPECT_TRUE(v->verify(r, *s->sign(r)));
  std::ofstream(pub) << "not hex\n";
  EXPECT_FALSE(CatalogueVerifier::openFile(pub).ok());
}

}  // namespace
}  // namespace vessel::cluster
