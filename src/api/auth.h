#pragma once
// API keys: `Authorization: Bearer <key>`. A key is 32 random bytes shown to
// its owner once; the store keeps only its SHA-256, so a leaked database
// does not leak keys.
#include <optional>
#include <string>
#include <string_view>

#include "api/http_names.h"
#include "http/server.h"
#include "store/store.h"

namespace vessel::api {

// `prefix` + 64 hex digits of 32 random bytes: API keys and session tokens.
Result<std::string> randomToken(std::string_view prefix);
// A fresh key, "vsk_" + 64 hex digits.
Result<std::string> newApiKey();
// bearerToken(): http/server.h.
// The E2B form of a key: "e2b_" + the hex of the key's bytes. E2B's JS SDK
// (up to 2.45) refuses a key that is not `e2b_` + hex digits, so every key
// is also accepted in this form (`vsk_…` -> `e2b_76736b5f…`).
std::string e2bKeyForm(std::string_view key);
// The key an E2B-form key stands for, or nullopt when `key` is not one
// ("e2b_" + an even number of hex digits, at most 2 * 256 of them).
std::optional<std::string> decodeE2bKeyForm(std::string_view key);
// The tenant an API key belongs to, or kUnauthenticated: a malformed or
// unknown key is always the same error. A key in its E2B form is decoded
// once first. For any front end, with the key it extracted from its own
// header.
Result<std::string> tenantForKey(std::string_view key, store::Store& store);
// tenantForKey() of a request's bearer key (a missing one: kUnauthenticated).
Result<std::string> authenticate(const Request& req, store::Store& store);

// On the first start (no tenant at all) creates the tenant "dev" with one
// key, writes it to <state_dir>/dev-api-key and its E2B form to
// <state_dir>/dev-e2b-api-key (both 0600) and returns it; returns an empty
// string when tenants already exist. Only the key's hash is stored, so a
// later start can write a missing dev-e2b-api-key only from dev-api-key
// (when that file is still there and still the dev tenant's key).
Result<std::string> ensureDevTenant(store::Store& store, const std::string& state_dir);

}  // namespace vessel::api
