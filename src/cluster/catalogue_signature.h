#pragma once
// Template catalogue entries signed by the API side (issue 24, item 5). A
// node copies a template it lacks from another node and checks every byte
// against the catalogue's manifest; but the catalogue is a store table every
// node can write, so a taken-over node could rewrite an entry (its
// checksums) and serve files of its own to every node that copies it. So
// the API replicas sign the entries they know to be what a node made for
// them (the answer of a build or fork into a template they asked for), with
// an Ed25519 key only they hold (--catalogue-key-file), and a node given
// the public key (--catalogue-public-key-file) copies only an entry whose
// signature verifies: what a node writes into the catalogue itself is
// never trusted by another node.
//
// The signature covers every field of the row a copy relies on (name,
// version, owner, manifest, sizes, created_at), each length-prefixed, and is
// kept beside the row in the store's meta (templateSignatureKey). Built-in
// templates are never signed: each node builds its own and never copies one.
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"
#include "store/store.h"
#include "templates/catalogue.h"

typedef struct evp_pkey_st EVP_PKEY;

namespace vessel::cluster {

// The bytes a signature covers.
std::string signedBytes(const store::TemplateRecord& r);
// The store meta key of name@version's signature.
std::string templateSignatureKey(std::string_view name, std::string_view version);

class CatalogueSigner {
 public:
  // A file of 64 hex digits, the Ed25519 private key's seed (`vessel
  // catalogue key FILE` makes one); refused unless mode 0600 or stricter.
  static Result<CatalogueSigner> openFile(const std::string& path);
  static Result<CatalogueSigner> fromSeed(std::string_view seed32);
  // 64 hex digits: what nodes are given.
  std::string publicKeyHex() const;
  // 128 hex digits.
  Result<std::string> sign(const store::TemplateRecord& r) const;

 private:
  std::shared_ptr<EVP_PKEY> key_;
};

class CatalogueVerifier {
 public:
  // 64 hex digits (the signer's publicKeyHex), surrounding space ignored.
  static Result<CatalogueVerifier> fromHex(std::string_view hex);
  static Result<CatalogueVerifier> openFile(const std::string& path);
  bool verify(const store::TemplateRecord& r, std::string_view signature_hex) const;

 private:
  std::shared_ptr<EVP_PKEY> key_;
};

// A replica, after node answered a build or fork into a template: signs the
// stored entry of `answered` if it is that manifest, owned by `tenant`
// (kFailedPrecondition, unsigned, when the row says anything else).
Status signAnswered(store::Store& store, const CatalogueSigner& signer, const std::string& tenant,
                    const std::string& name, const std::string& version,
                    const std::string& answered_manifest_json);

// A node: the catalogue's entry name@version as a catalogue entry, only if
// its signature verifies (kFailedPrecondition otherwise; kNotFound when
// there is no such live entry).
Result<templates::CatalogueEntry> verifiedEntry(store::Store& store,
                                                const CatalogueVerifier& verifier,
                                                const std::string& name,
                                                const std::string& version);

}  // namespace vessel::cluster
