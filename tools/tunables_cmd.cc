// `boostcomm tunables`: the registry of src/core/tunables.def (kind, accepted
// values, default, doc), as text or as the markdown table of docs/TUNABLES.md.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "cli_internal.h"
#include "commands.h"

namespace boostcomm::tools {
namespace {

const char* typeName(core::TunableType type) {
  switch (type) {
    case core::TunableType::kInt: return "int";
    case core::TunableType::kBool: return "bool";
    case core::TunableType::kEnum: return "enum";
    case core::TunableType::kString: return "string";
  }
  return "?";
}

// Markdown table cells cannot hold '|' or newlines.
std::string cell(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '|') out += "\\|";
    else if (c == '\n') out += ' ';
    else out += c;
  }
  return out;
}

std::string quoted(const std::string& value) { return value.empty() ? "(empty)" : "'" + value + "'"; }

}  // namespace

int runTunables(bool markdown) {
  const auto tunables = core::allTunables();
  if (markdown) {
    // Current values are left out: the docs must not depend on whoever generated them.
    std::printf("| Variable | Type | Accepted | Default | Description |\n|---|---|---|---|---|\n");
    for (const core::TunableInfo& t : tunables) {
      std::string def = "(empty)";
      if (t.defaultValue[0] != '\0') def = std::string("`").append(cell(t.defaultValue)).append("`");
      std::printf("| `%s` | %s | %s | %s | %s |\n", t.env, typeName(t.type), cell(core::tunableRule(t)).c_str(), def.c_str(),
                  cell(t.doc).c_str());
    }
    return 0;
  }
  for (const core::TunableInfo& t : tunables) {
    const std::string current = core::tunableValue(t.env);
    const bool fromEnv = std::getenv(t.env) != nullptr;
    std::printf("%s (%s, %s)\n", t.env, typeName(t.type), core::tunableRule(t).c_str());
    std::printf("    default %s, current %s%s\n", quoted(t.defaultValue).c_str(), quoted(current).c_str(),
                fromEnv ? " (from the environment)" : "");
    try {
      core::validateTunable(t, current);
    } catch (const Error& e) {
      std::printf("    INVALID: %s\n", e.what());
    }
    // Wrap the doc at ~96 columns on word boundaries.
    std::string line = "   ";
    std::string doc = t.doc;
    std::size_t pos = 0;
    while (pos < doc.size()) {
      std::size_t end = doc.find(' ', pos);
      if (end == std::string::npos) end = doc.size();
      const std::string word = doc.substr(pos, end - pos);
      if (line.size() + word.size() + 1 > 96 && line.size() > 3) {
        std::printf("%s\n", line.c_str());
        line = "   ";
      }
      line += " " + word;
      pos = end + 1;
    }
    if (line.size() > 3) std::printf("%s\n", line.c_str());
    std::printf("\n");
  }
  return 0;
}

}  // namespace boostcomm::tools
