#include "gateway/credentials/ca.h"

#include <gtest/gtest.h>
#include <openssl/pem.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>

namespace vessel::gateway::credentials {
namespace {

class CaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/vessel-ca-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(CaTest, CreatedOnceWithPrivateKeyAndReloaded) {
  auto ca = CertificateAuthority::loadOrCreate(dir_ + "/ca");
  ASSERT_TRUE(ca.ok()) << ca.error().message();
  struct stat st;
  ASSERT_EQ(::stat((dir_ + "/ca/ca.key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto again = CertificateAuthority::loadOrCreate(dir_ + "/ca");
  ASSERT_TRUE(again.ok()) << again.error().message();
  EXPECT_EQ(ca->certificatePem(), again->certificatePem());
  ::chmod((dir_ + "/ca/ca.key").c_str(), 0644);
  EXPECT_FALSE(CertificateAuthority::loadOrCreate(dir_ + "/ca").ok());
}

TEST_F(CaTest, LeafVerifiesForItsNameOnly) {
  auto ca = CertificateAuthority::loadOrCreate(dir_);
  ASSERT_TRUE(ca.ok()) << ca.error().message();
  PkeyPtr key(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"));
  auto leaf = ca->mintLeaf("api.a.test", key.get());
  ASSERT_TRUE(leaf.ok()) << leaf.error().message();

  BIO* b = BIO_new_mem_buf(ca->certificatePem().data(), -1);
  X509Ptr root(PEM_read_bio_X509(b, nullptr, nullptr, nullptr));
  BIO_free(b);
  X509_STORE* store = X509_STORE_new();
  X509_STORE_add_cert(store, root.get());
  auto verify = [&](const char* host) {
    X509_STORE_CTX* ctx = X509_STORE_CTX_new();
    X509_STORE_CTX_init(ctx, store, leaf->get(), nullptr);
    X509_VERIFY_PARAM_set1_host(X509_STORE_CTX_get0_param(ctx), host, 0);
    int ok = X509_verify_cert(ctx);
    X509_STORE_CTX_free(ctx);
    return ok == 1;
  };
  EXPECT_TRUE(verify("api.a.test"));
  EXPECT_FALSE(verify("x.test"));
  X509_STORE_free(store);
  EXPECT_TRUE(ca->serverContext("api.a.test").ok());
}

// The ingress CA (issue 25 item 5): clients are told to trust it, so it
// must vouch for the sandbox domain only. OpenSSL, with this CA as the only
// trust anchor, refuses a leaf it issued for any other name.
TEST_F(CaTest, NameConstrainedCaIsTrustedForItsDomainOnly) {
  // An unconstrained CA from before: replaced, not kept.
  auto old = CertificateAuthority::loadOrCreate(dir_, "old");
  ASSERT_TRUE(old.ok()) << old.error().message();
  auto ca = CertificateAuthority::loadOrCreate(dir_, "ingress", {"vessel.localhost"});
  ASSERT_TRUE(ca.ok()) << ca.error().message();
  EXPECT_NE(ca->certificatePem(), old->certificatePem());
  auto again = CertificateAuthority::loadOrCreate(dir_, "ingress", {"vessel.localhost"});
  ASSERT_TRUE(again.ok()) << again.error().message();
  EXPECT_EQ(again->certificatePem(), ca->certificatePem()) << "kept once constrained";
  auto other = CertificateAuthority::loadOrCreate(dir_, "ingress", {"other.localhost"});
  ASSERT_TRUE(other.ok()) << other.error().message();
  EXPECT_NE(other->certificatePem(), ca->certificatePem()) << "another domain: a new CA";
  EXPECT_FALSE(CertificateAuthority::loadOrCreate(dir_, "ingress", {"a.test,DNS:x.test"}).ok());
  ca = CertificateAuthority::loadOrCreate(dir_, "ingress", {"vessel.localhost"});
  ASSERT_TRUE(ca.ok()) << ca.error().message();

  BIO* b = BIO_new_mem_buf(ca->certificatePem().data(), -1);
  X509Ptr root(PEM_read_bio_X509(b, nullptr, nullptr, nullptr));
  BIO_free(b);
  X509_STORE* store = X509_STORE_new();
  X509_STORE_add_cert(store, root.get());
  PkeyPtr key(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"));
  auto verify = [&](const char* name) {
    auto leaf = ca->mintLeaf(name, key.get());
    EXPECT_TRUE(leaf.ok()) << name;
    if (!leaf.ok()) return -1;
    X509_STORE_CTX* ctx = X509_STORE_CTX_new();
    X509_STORE_CTX_init(ctx, store, leaf->get(), nullptr);
    int ok = X509_verify_cert(ctx);
    int err = X509_STORE_CTX_get_error(ctx);
    X509_STORE_CTX_free(ctx);
    return ok == 1 ? 0 : err;
  };
  EXPECT_EQ(verify("vessel.localhost"), 0);
  EXPECT_EQ(verify("8000-sb-1.vessel.localhost"), 0);
  for (const char* name :
       {"api.github.com", "xvessel.localhost", "vessel.localhost.evil.test", "localhost"})
    EXPECT_EQ(verify(name), X509_V_ERR_PERMITTED_VIOLATION) << name;
  X509_STORE_free(store);
}

// The listener CA (vesseld --tls-self-signed): constrained to the names it
// is given, DNS names and IP literals together; the same names in another
// order keep the CA, other names replace it.
TEST_F(CaTest, ListenerCaIsTrustedForItsNamesAndAddressesOnly) {
  auto ca = CertificateAuthority::loadOrCreate(dir_, "listener", {"vessel.test", "127.0.0.1"});
  ASSERT_TRUE(ca.ok()) << ca.error().message();
  auto same = CertificateAuthority::loadOrCreate(dir_, "listener", {"127.0.0.1", "vessel.test"});
  ASSERT_TRUE(same.ok()) << same.error().message();
  EXPECT_EQ(same->certificatePem(), ca->certificatePem()) << "same names, same CA";
  auto more =
      CertificateAuthority::loadOrCreate(dir_, "listener", {"vessel.test", "127.0.0.1", "::1"});
  ASSERT_TRUE(more.ok()) << more.error().message();
  EXPECT_NE(more->certificatePem(), ca->certificatePem()) << "other names: a new CA";
  auto v = CertificateAuthority::nameConstraints({"*.Bad_Name"});
  EXPECT_FALSE(v.ok());

  BIO* b = BIO_new_mem_buf(more->certificatePem().data(), -1);
  X509Ptr root(PEM_read_bio_X509(b, nullptr, nullptr, nullptr));
  BIO_free(b);
  X509_STORE* store = X509_STORE_new();
  X509_STORE_add_cert(store, root.get());
  PkeyPtr key(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"));
  auto verify = [&](const std::vector<std::string>& names) {
    auto leaf = more->mintLeaf(names, key.get());
    EXPECT_TRUE(leaf.ok()) << names.front();
    if (!leaf.ok()) return -1;
    X509_STORE_CTX* ctx = X509_STORE_CTX_new();
    X509_STORE_CTX_init(ctx, store, leaf->get(), nullptr);
    int ok = X509_verify_cert(ctx);
    int err = X509_STORE_CTX_get_error(ctx);
    X509_STORE_CTX_free(ctx);
    return ok == 1 ? 0 : err;
  };
  EXPECT_EQ(verify({"vessel.test", "127.0.0.1", "::1"}), 0);
  EXPECT_EQ(verify({"api.vessel.test"}), 0);
  for (auto names : std::vector<std::vector<std::string>>{
           {"github.com"}, {"10.0.0.1"}, {"vessel.test", "127.0.0.2"}, {"::2"}, {"xvessel.test"}})
    EXPECT_EQ(verify(names), X509_V_ERR_PERMITTED_VIOLATION) << names.back();
  X509_STORE_free(store);

  // Only addresses: no DNS name but the reserved `invalid` is permitted.
  auto ips = CertificateAuthority::nameConstraints({"192.0.2.1"});
  ASSERT_TRUE(ips.ok());
  EXPECT_EQ(*ips, "critical,permitted;DNS:invalid,permitted;IP:192.0.2.1/255.255.255.255");
}

TEST_F(CaTest, CachedLeafIsRenewedBeforeItExpires) {
  auto ca = CertificateAuthority::loadOrCreate(dir_);
  ASSERT_TRUE(ca.ok()) << ca.error().message();
  auto now = std::chrono::system_clock::now();
  ca->setClockForTest([&] { return now; });
  auto first = ca->serverContext("api.a.test");
  ASSERT_TRUE(first.ok());
  now += std::chrono::hours(24);
  EXPECT_EQ(ca->serverContext("api.a.test")->get(), first->get()) << "cached within a day";
  now += CertificateAuthority::kLeafRenewAfter;
  auto renewed = ca->serverContext("api.a.test");
  ASSERT_TRUE(renewed.ok());
  EXPECT_NE(renewed->get(), first->get()) << "re-minted well before the 7-day expiry";
  static_assert(CertificateAuthority::kLeafRenewAfter < CertificateAuthority::kLeafLifetime);
}

}  // namespace
}  // namespace vessel::gateway::credentials
