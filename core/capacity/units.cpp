// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/capacity/units.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <string>

namespace kvscope {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

struct Split {
  double number = 0;
  std::string unit;  // lower-cased, spaces removed
};

Expected<Split> splitNumber(std::string_view text, std::string_view what, std::string_view examples) {
  std::string compact;
  for (char c : text) {
    if (!std::isspace(static_cast<unsigned char>(c))) compact.push_back(c);
  }
  auto bad = [&](const std::string& why) {
    return Status::invalidArgument(std::string(what) + " '" + std::string(text) + "': " + why +
                                   " (examples: " + std::string(examples) + ")");
  };
  if (compact.empty()) return bad("empty");
  double value = 0;
  const char* begin = compact.data();
  const char* end = begin + compact.size();
  auto [ptr, ec] = std::from_chars(begin, end, value);
  if (ec != std::errc() || ptr == begin) return bad("does not start with a number");
  if (!std::isfinite(value) || value < 0) return bad("must be a finite number ≥ 0");
  return Split{value, lower(std::string_view(ptr, static_cast<size_t>(end - ptr)))};
}

// Strips a prefix from `unit`; returns its factor (1 when none). Binary prefixes need `i`.
double takePrefix(std::string& unit, bool allowBinary) {
  static const char* kPrefixes = "kmgtp";
  if (unit.empty()) return 1;
  const char* at = std::char_traits<char>::find(kPrefixes, 5, unit[0]);
  if (!at) return 1;
  const int power = static_cast<int>(at - kPrefixes) + 1;
  if (allowBinary && unit.size() >= 2 && unit[1] == 'i') {
    unit.erase(0, 2);
    return std::pow(1024.0, power);
  }
  unit.erase(0, 1);
  return std::pow(1000.0, power);
}

}  // namespace

Expected<double> parseByteSize(std::string_view text, std::string_view what) {
  constexpr std::string_view kExamples = "80GiB, 16GB, 512MiB, 4096";
  auto s = splitNumber(text, what, kExamples);
  if (!s) return s.status();
  std::string unit = s->unit;
  const double factor = takePrefix(unit, true);
  if (!unit.empty() && unit != "b") {
    return Status::invalidArgument(std::string(what) + " '" + std::string(text) +
                                   "': unknown unit (examples: " + std::string(kExamples) + ")");
  }
  return s->number * factor;
}

Expected<double> parseBandwidth(std::string_view text, std::string_view what) {
  constexpr std::string_view kExamples = "4.8TB/s, 900GB/s, 1.5TiB/s";
  auto s = splitNumber(text, what, kExamples);
  if (!s) return s.status();
  std::string unit = s->unit;
  const double factor = takePrefix(unit, true);
  if (unit != "b/s" && unit != "bps") {
    return Status::invalidArgument(std::string(what) + " '" + std::string(text) +
                                   "': expected bytes per second (examples: " +
                                   std::string(kExamples) + ")");
  }
  return s->number * factor;
}

Expected<double> parseOpRate(std::string_view text, std::string_view what) {
  constexpr std::string_view kExamples = "60Tops/s, 989TFLOPS, 2.5e14ops/s";
  auto s = splitNumber(text, what, kExamples);
  if (!s) return s.status();
  std::string unit = s->unit;
  const double factor = takePrefix(unit, false);
  if (unit != "ops/s" && unit != "op/s" && unit != "ops" && unit != "flops" && unit != "flop/s" &&
      unit != "flops/s") {
    return Status::invalidArgument(std::string(what) + " '" + std::string(text) +
                                   "': expected operations per second (examples: " +
                                   std::string(kExamples) + ")");
  }
  return s->number * factor;
}

std::string formatBytes(double bytes) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int u = 0;
  while (std::abs(bytes) >= 1024 && u < 5) {
    bytes /= 1024;
    ++u;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.2f %s", bytes, kUnits[u]);
  return buf;
}

std::string formatRate(double perSecond, std::string_view unit) {
  static const char* kPrefixes[] = {"", "k", "M", "G", "T", "P"};
  int p = 0;
  while (std::abs(perSecond) >= 1000 && p < 5) {
    perSecond /= 1000;
    ++p;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f %s%.*s", perSecond, kPrefixes[p],
                static_cast<int>(unit.size()), unit.data());
  return buf;
}

}  // namespace kvscope
