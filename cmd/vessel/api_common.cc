#include "cmd/vessel/api_common.h"

#include <unistd.h>

#include <boost/json.hpp>
#include <cstdio>

namespace vessel::cli {

namespace json = boost::json;

client::Client apiClient() { return client::Client(client::optionsFromEnv()); }

int fail(const Error& e) { return fail(e.message()); }

int fail(const std::string& message) {
  std::fflush(stdout);
  std::fprintf(stderr, "vessel: %s\n", message.c_str());
  return kExitFailed;
}

Progress progressFor(Progress otherwise) {
  return ::isatty(1) && ::isatty(2) ? Progress::kBar : otherwise;
}

std::vector<std::string> buildLogLines(unsigned step, unsigned line, const std::string& kind,
                                       const std::string& text,
                                       const std::vector<std::string>& lines, double seconds) {
  std::string n = "#" + std::to_string(step) + " ";
  std::vector<std::string> out;
  if (kind == "step") {
    out.push_back(n + "[line " + std::to_string(line) + "] " + text);
  } else if (kind == "cached") {
    out.push_back(n + "CACHED");
  } else if (kind == "done") {
    char t[32];
    std::snprintf(t, sizeof t, "DONE %.1fs", seconds);
    out.push_back(n + t);
  } else {
    for (const auto& l : lines) out.push_back(n + l);
  }
  return out;
}

std::string operationError(const json::value& op) {
  const json::value* e = client::field(op, "error");
  if (!e) return "operation " + client::str(op, "id") + " failed";
  return client::str(*e, "code") + ": " + client::str(*e, "message");
}

namespace {

// Draws and redraws one status line on stderr.
class Renderer {
 public:
  explicit Renderer(Progress p) : p_(p) {}
  ~Renderer() {
    if (drawn_) std::fprintf(stderr, "\n");
  }
  void event(const client::SseEvent& e) {
    auto data = client::parseJson(e.data);
    json::value d = data.ok() ? *data : json::value();
    std::string what;
    if (e.type == "template.log") {
      buildLog(d);
      return;
    }
    if (e.type == "template.progress") {
      percent_ = static_cast<int>(client::num(d, "percent"));
      what = client::str(d, "step");
      if (p_ == Progress::kLines) what = std::to_string(percent_) + "% " + what;
    } else if (e.type == "sandbox.state") {
      what = client::str(d, "id") + " " + client::str(d, "state");
      if (auto err = client::str(d, "error"); !err.empty()) what += ": " + err;
    } else if (e.type.rfind("operation.", 0) == 0) {
      what = client::str(d, "kind") + " " + client::str(d, "state");
      if (client::str(d, "state") == "done") percent_ = 100;
      if (client::field(d, "error")) what += ": " + operationError(d);
    } else {
      what = e.data;
    }
    // One event, one line: messages may carry a command's stderr.
    for (char& ch : what)
      if (ch == '\n' || ch == '\r') ch = ' ';
    while (!what.empty() && what.back() == ' ') what.pop_back();
    if (p_ == Progress::kLines) {
      std::printf("%s %s\n", e.type.c_str(), what.c_str());
      std::fflush(stdout);
    } else if (p_ == Progress::kBar) {
      constexpr int kWidth = 24;
      int filled = percent_ < 0 ? 0 : percent_ * kWidth / 100;
      std::string bar(static_cast<size_t>(filled), '#');
      bar.resize(kWidth, '.');
      if (what.size() > 60) what = what.substr(0, 57) + "...";
      std::string pct = percent_ < 0 ? "    " : (std::to_string(percent_) + "%");
      std::fprintf(stderr, "\r\033[K[%s] %4s %s", bar.c_str(), pct.c_str(), what.c_str());
      std::fflush(stderr);
      drawn_ = true;
    }
  }

 private:
  // A build's steps and output, whole lines, above the bar (stdout with
  // kLines, as every other event; stderr otherwise, as docker build does).
  void buildLog(const json::value& d) {
    std::vector<std::string> lines;
    if (const auto* ls = client::field(d, "lines"); ls && ls->is_array())
      for (const auto& l : ls->as_array())
        if (l.is_string()) lines.emplace_back(l.as_string());
    const auto* secs = client::field(d, "seconds");
    double seconds = secs && secs->is_number() ? secs->to_number<double>() : 0;
    auto out = buildLogLines(static_cast<unsigned>(client::num(d, "step")),
                             static_cast<unsigned>(client::num(d, "line")), client::str(d, "kind"),
                             client::str(d, "text"), lines, seconds);
    FILE* f = p_ == Progress::kLines ? stdout : stderr;
    if (drawn_) std::fprintf(stderr, "\r\033[K");
    for (const auto& l : out) std::fprintf(f, "%s\n", l.c_str());
    std::fflush(f);
  }

  Progress p_;
  int percent_ = -1;
  bool drawn_ = false;
};

bool terminal(const std::string& type) {
  return type == "operation.done" || type == "operation.failed";
}

}  // namespace

Result<json::value> waitOperation(client::Client& c, const std::string& op_id, Progress progress) {
  Renderer r(progress);
  std::string last_id;
  int broken = 0;
  bool ended = false;
  while (!ended) {
    client::Headers h;
    if (!last_id.empty()) h.emplace_back("Last-Event-ID", last_id);
    auto s = c.stream("GET", "/v1/operations/" + op_id + "/events", "", h);
    if (!s.ok()) return std::move(s).error();
    for (;;) {
      auto e = s->next();
      if (!e.ok()) {
        // A broken stream is resumed where it stopped; the events are stored.
        if (++broken > 5) return std::move(e).error();
        break;
      }
      if (!e->has_value()) {
        ended = true;  // the server ends the stream after the last event
        break;
      }
      last_id = (*e)->id;
      r.event(**e);
      if (terminal((*e)->type)) ended = true;
    }
  }
  return c.get("/v1/operations/" + op_id);
}

namespace {

void pretty(const json::value& v, std::string& out, int indent) {
  std::string pad(static_cast<size_t>(indent + 2), ' ');
  if (v.is_object() && !v.as_object().empty()) {
    out += "{\n";
    bool first = true;
    for (const auto& [k, x] : v.as_object()) {
      if (!first) out += ",\n";
      first = false;
      out += pad + json::serialize(json::string(k)) + ": ";
      pretty(x, out, indent + 2);
    }
    out += "\n" + std::string(static_cast<size_t>(indent), ' ') + "}";
  } else if (v.is_array() && !v.as_array().empty()) {
    out += "[\n";
    bool first = true;
    for (const auto& x : v.as_array()) {
      if (!first) out += ",\n";
      first = false;
      out += pad;
      pretty(x, out, indent + 2);
    }
    out += "\n" + std::string(static_cast<size_t>(indent), ' ') + "]";
  } else {
    out += json::serialize(v);
  }
}

}  // namespace

std::string prettyJson(const json::value& v) {
  std::string out;
  pretty(v, out, 0);
  return out;
}

}  // namespace vessel::cli
