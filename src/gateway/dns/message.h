#pragma once
// DNS wire format, the subset the gateway speaks: it parses one-question
// queries from guests, answers them with A/AAAA records it resolved itself,
// and sends/parses queries to the trusted upstream resolver. Every read goes
// through ByteReader; names are bounded in length and compression pointers
// in number, so a hostile packet costs a bounded amount of work.
#include <boost/asio/ip/address.hpp>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace vessel::gateway::dns {

inline constexpr uint16_t kTypeA = 1;
inline constexpr uint16_t kTypeCname = 5;
inline constexpr uint16_t kTypeAaaa = 28;
inline constexpr uint16_t kClassIn = 1;

enum class Rcode : uint8_t {
  kNoError = 0,
  kFormErr = 1,
  kServFail = 2,
  kNxDomain = 3,
  kNotImp = 4,
  kRefused = 5,
};

struct Question {
  uint16_t id = 0;
  bool recursion_desired = false;
  std::string name;  // dotted, as sent (not normalized), no trailing dot
  uint16_t qtype = 0;
  uint16_t qclass = 0;
};

struct Record {
  boost::asio::ip::address address;
  uint32_t ttl = 0;
};

// A query from a guest: QR=0, opcode QUERY, exactly one question.
Result<Question> parseQuery(std::string_view packet);

// A response to `q`: its question echoed, `answers` with q.name as owner.
std::string buildResponse(const Question& q, Rcode rcode, const std::vector<Record>& answers);

// A query for `name` (normalized) and `qtype`, recursion desired.
std::string buildQuery(uint16_t id, std::string_view name, uint16_t qtype);

struct Answer {
  Rcode rcode = Rcode::kNoError;
  std::vector<Record> records;  // of qtype, for the name or its CNAME chain
};

// An upstream response to buildQuery(id, name, qtype). Only records on the
// CNAME chain starting at `name` count; anything else in the packet is
// ignored, so an upstream cannot smuggle in data for other names.
Result<Answer> parseResponse(std::string_view packet, uint16_t id, std::string_view name,
                             uint16_t qtype);

}  // namespace vessel::gateway::dns
