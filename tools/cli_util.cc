#include "cli_util.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <sstream>

namespace boostcomm::tools {

std::optional<std::size_t> parseBytes(std::string_view text) {
  std::string s;
  for (char c : text) {
    if (!std::isspace(static_cast<unsigned char>(c))) s += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  if (s.empty()) return std::nullopt;
  // Strip an optional unit: "b", "ib" after a multiplier letter.
  double multiplier = 1.0;
  auto endsWith = [&](std::string_view suffix) {
    return s.size() > suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  if (endsWith("ib")) s.resize(s.size() - 2);
  else if (endsWith("b")) s.resize(s.size() - 1);
  switch (s.back()) {
    case 'k': multiplier = 1024.0; break;
    case 'm': multiplier = 1024.0 * 1024.0; break;
    case 'g': multiplier = 1024.0 * 1024.0 * 1024.0; break;
    default: break;
  }
  if (multiplier > 1.0) s.pop_back();
  if (s.empty()) return std::nullopt;
  // Integers parse exactly; a fraction ("1.5M") is allowed with a multiplier.
  std::size_t whole = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), whole);
  if (ec == std::errc() && ptr == s.data() + s.size()) {
    const auto factor = static_cast<std::size_t>(multiplier);
    if (whole > std::numeric_limits<std::size_t>::max() / factor) return std::nullopt;
    return whole * factor;
  }
  char* end = nullptr;
  const double value = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || !std::isfinite(value) || value < 0) return std::nullopt;
  const double bytes = std::floor(value * multiplier);
  if (bytes >= 1.8e19) return std::nullopt;
  return static_cast<std::size_t>(bytes);
}

std::string formatBytes(std::size_t bytes) {
  static constexpr const char* kUnits[] = {"", "K", "M", "G", "T"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024.0 && unit < 4) {
    value /= 1024.0;
    ++unit;
  }
  char text[32];
  if (value == std::floor(value)) std::snprintf(text, sizeof text, "%.0f%s", value, kUnits[unit]);
  else std::snprintf(text, sizeof text, "%.3g%s", value, kUnits[unit]);
  return text;
}

int launcherRank() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"}) {
    if (const char* v = std::getenv(name); v != nullptr) return std::atoi(v);
  }
  return 0;
}

std::size_t positiveBytes(const std::string& text, const char* option) {
  const auto bytes = parseBytes(text);
  if (!bytes || *bytes == 0) throw UsageError(std::string(option) + ": not a size: '" + text + "'");
  return *bytes;
}

std::vector<std::string> splitList(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

}  // namespace boostcomm::tools
