// SPDX-License-Identifier: GPL-3.0-or-later
// Spec strings (quantization.md §1-4, docs/spec-strings.md): parsing with the format's
// defaults, shape checks, and the canonical printer that parsing inverts.
#include "core/quant/spec.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <string>
#include <system_error>
#include <vector>

namespace kvscope {

const char* axisName(Axis axis) {
  switch (axis) {
    case Axis::Tensor: return "tensor";
    case Axis::Head: return "head";
    case Axis::Token: return "token";
    case Axis::Channel: return "channel";
  }
  return "?";
}

const char* metaTypeName(MetaType type) {
  switch (type) {
    case MetaType::Fp16: return "fp16";
    case MetaType::Bf16: return "bf16";
    case MetaType::Fp32: return "fp32";
  }
  return "?";
}

const char* rotationName(Rotation rotation) {
  switch (rotation) {
    case Rotation::None: return "none";
    case Rotation::Hadamard: return "hadamard";
    case Rotation::Rht: return "rht";
    case Rotation::Random: return "random";
  }
  return "?";
}

const char* roundingName(Rounding rounding) {
  switch (rounding) {
    case Rounding::Away: return "away";
    case Rounding::Trunc: return "trunc";
    case Rounding::Even: return "even";
  }
  return "?";
}

QuantizedTokens quantizedTokens(const QuantSpec& spec, int64_t tokens) {
  QuantizedTokens q;
  q.first = std::min<int64_t>(std::max(spec.sinks, 0), tokens);
  const int64_t rest = tokens - q.first;
  if (spec.chunk > 0) {
    q.count = rest / spec.chunk * spec.chunk;  // whole chunks only: the remainder waits exact
  } else {
    q.count = std::max<int64_t>(0, rest - std::max(spec.residual, 0));
  }
  return q;
}

namespace {

constexpr int kDefaultIntBits = 4;  // defaultSpec(Int, 0): the most common choice

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

/// Shortest text that reads back as the same double ("0.01", not "0.010000").
std::string formatNumber(double v) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  if (ec != std::errc()) return std::to_string(v);
  return {buf, end};
}

bool parseDouble(std::string_view text, double& out) {
  if (text.empty()) return false;
  const char* first = text.data();
  const char* last = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(first, last, out);
  return ec == std::errc() && ptr == last && std::isfinite(out);
}

bool parseInt(std::string_view text, long long& out) {
  if (text.empty()) return false;
  const char* first = text.data();
  const char* last = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(first, last, out);
  return ec == std::errc() && ptr == last;
}

std::string formatNameList() {
  std::string names;
  for (const FormatInfo& f : formatTable()) {
    if (!names.empty()) names += ", ";
    names += f.hasBits ? std::string(f.name) + std::to_string(f.minBits) + " … " + std::string(f.name) +
                             std::to_string(f.maxBits)
                       : std::string(f.name);
  }
  return names;
}

bool isGrouped(const FormatInfo& info) { return info.grouped; }

// A grouped format's default group applies on axis=token|channel (tensor and head make one group
// per axis element); hqq's groups have G values on either axis.
int defaultGroup(FormatId id, Axis axis) {
  const FormatInfo& info = formatInfo(id);
  if (info.grouped && (axis == Axis::Tensor || axis == Axis::Head)) return 0;
  return info.defaultGroup;
}

bool accepts(const FormatInfo& info, FormatOption option) { return (info.options & option) != 0; }

constexpr const char* kOptionList =
    "sym, asym, zero=int|float|packed, prerope, sinks=S, residual=R, chunk=R, "
    "rot=hadamard|hadamard:N|rht|random|none, seed=N, outliers=f, "
    "axis=tensor|head|token|channel, group=G, clip=p|mse, scale=fp16|bf16|fp32, unitscale, "
    "round=away|trunc|even, div=N, minscale=S, gscale=S, codes=fp32|meta|stored, 4over6";

bool isPowerOfTwo(long long n) { return n > 0 && (n & (n - 1)) == 0; }

}  // namespace

QuantSpec defaultSpec(FormatId format, int bits) {
  const FormatInfo& info = formatInfo(format);
  QuantSpec s;
  s.format = format;
  if (info.hasBits) {
    // Without bits: 4, or the nearest width the format has (lmtq: 3).
    s.bits = bits > 0 ? bits : std::clamp(kDefaultIntBits, info.minBits, info.maxBits);
  } else {
    s.bits = static_cast<int>(info.payloadBits);
  }
  s.axis = info.defaultAxis;
  s.group = defaultGroup(format, s.axis);
  s.scale = info.defaultScale;
  return s;
}

Expected<QuantSpec> parseSpec(std::string_view text) {
  const std::string whole(text);
  auto bad = [&](const std::string& why) {
    return Status::invalidArgument("spec '" + whole + "': " + why);
  };

  // Split on commas; empty items are errors (a stray comma is a typo worth reporting).
  std::vector<std::string_view> items;
  size_t pos = 0;
  while (true) {
    size_t comma = text.find(',', pos);
    items.push_back(trim(text.substr(pos, comma == std::string_view::npos ? std::string_view::npos
                                                                            : comma - pos)));
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
  if (items.front().empty()) {
    return bad("no format given (allowed formats: " + formatNameList() + ")");
  }

  // The format: a table name, or "int<b>".
  std::string_view head = items.front();
  const FormatInfo* info = findFormat(head);
  int bits = 0;
  if (info == nullptr) {
    size_t digits = head.size();
    while (digits > 0 && head[digits - 1] >= '0' && head[digits - 1] <= '9') --digits;
    if (digits < head.size()) {
      const FormatInfo* family = findFormat(head.substr(0, digits));
      if (family != nullptr && family->hasBits) {
        long long b = 0;
        if (!parseInt(head.substr(digits), b) || b < family->minBits || b > family->maxBits) {
          return bad("bit width '" + std::string(head.substr(digits)) + "' is out of range (allowed: " +
                     std::string(family->name) + std::to_string(family->minBits) + " … " +
                     std::string(family->name) + std::to_string(family->maxBits) +
                     (family->bitsNote.empty() ? std::string() : "; " + std::string(family->bitsNote)) + ")");
        }
        info = family;
        bits = static_cast<int>(b);
      }
    }
  } else if (info->hasBits) {
    std::string why = "'";
    why.append(head);
    return bad(why + "' needs a bit width (allowed: " + std::string(info->name) +
               std::to_string(info->minBits) + " … " + std::string(info->name) +
               std::to_string(info->maxBits) + ")");
  }
  if (info == nullptr) {
    return bad("unknown format '" + std::string(head) + "' (allowed formats: " + formatNameList() + ")");
  }

  QuantSpec spec = defaultSpec(info->id, bits);
  const bool grouped = isGrouped(*info);
  const std::string formatName = info->hasBits ? std::string(info->name) + std::to_string(bits)
                                               : std::string(info->name);

  std::vector<std::string> seen;
  bool axisGiven = false, groupGiven = false, clipGiven = false, scaleGiven = false, seedGiven = false;
  bool roundGiven = false;
  for (size_t i = 1; i < items.size(); ++i) {
    std::string_view item = items[i];
    if (item.empty()) return bad("empty option (a stray comma?); allowed options: " + std::string(kOptionList));
    size_t eq = item.find('=');
    std::string key(trim(item.substr(0, eq)));
    std::string_view value = eq == std::string_view::npos ? std::string_view{} : trim(item.substr(eq + 1));
    const bool hasValue = eq != std::string_view::npos;
    // sym and asym are one choice: giving both is a duplicate.
    std::string slot = (key == "asym") ? "sym" : key;
    for (const auto& s : seen) {
      if (s == slot) return bad("option '" + key + "' is given more than once (allowed: each option at most once)");
    }
    seen.push_back(slot);

    auto needsValue = [&](const std::string& allowed) -> Status {
      if (!hasValue || value.empty()) return bad("option '" + key + "' needs a value (allowed: " + key + "=" + allowed + ")");
      return Status::ok();
    };
    auto noValue = [&]() -> Status {
      if (hasValue) return bad("option '" + key + "' takes no value (allowed: just '" + key + "')");
      return Status::ok();
    };
    auto groupedOnly = [&]() -> Status {
      if (info->flatGroups) {
        if (key == "axis" || key == "group" || key == "scale") return Status::ok();
        return bad(key + "= does not apply to " + formatName + " (allowed with hqq<b>: axis=tensor|token, group=G, "
                   "scale=fp16|bf16|fp32 and the pipeline options)");
      }
      if (info->alwaysRotates && key != "scale") {
        return bad("tq formats quantize whole vectors: " + key + "= does not apply (allowed with " + formatName +
                   ": rot=hadamard|rht|random, seed=N, scale=fp16|bf16|fp32 and the pipeline options)");
      }
      if (!grouped && !info->alwaysRotates) {
        return bad("option '" + key + "' does not apply to " + formatName +
                   " (axis=, group=, clip= and scale= are allowed with int<b>, fp8_e4m3, fp8_e5m2 and "
                   "nf4 only; block and elementwise formats fix their own layout)");
      }
      return Status::ok();
    };

    if (key == "sym" || key == "asym") {
      KVS_RETURN_IF_ERROR(noValue());
      if (!info->symNote.empty()) {
        return bad("'" + key + "' does not apply to " + formatName + " (" + std::string(info->symNote) +
                   "; allowed with int1 … int8 only)");
      }
      if (!accepts(*info, kOptionSym)) return bad("'" + key + "' does not apply to " + formatName + " (allowed with int1 … int8 only)");
      if (key == "sym" && bits < 2) {
        return bad("int1 cannot be symmetric (allowed: sym with int2 … int8; int1 is asym only)");
      }
      spec.symmetric = key == "sym";
    } else if (key == "prerope") {
      KVS_RETURN_IF_ERROR(noValue());
      spec.prerope = true;
    } else if (key == "sinks" || key == "residual" || key == "chunk") {
      KVS_RETURN_IF_ERROR(needsValue("a whole number ≥ 0"));
      long long n = 0;
      if (!parseInt(value, n) || n < 0 || n > 1'000'000'000) {
        return bad("'" + key + "=" + std::string(value) + "' is not a token count (allowed: " + key +
                   "=N with N a whole number ≥ 0)");
      }
      (key == "sinks" ? spec.sinks : key == "residual" ? spec.residual : spec.chunk) = static_cast<int>(n);
    } else if (key == "rot") {
      KVS_RETURN_IF_ERROR(needsValue("hadamard|hadamard:N|rht|random|none"));
      const std::string_view name = value.substr(0, value.find(':'));
      const bool hasBlock = name.size() < value.size();
      if (name == "hadamard") spec.rotation = Rotation::Hadamard;
      else if (name == "rht") spec.rotation = Rotation::Rht;
      else if (name == "random") spec.rotation = Rotation::Random;
      else if (name == "none") spec.rotation = Rotation::None;
      else {
        return bad("unknown rotation '" + std::string(value) +
                   "' (allowed: rot=hadamard, rot=hadamard:N, rot=rht, rot=random or rot=none)");
      }
      if (hasBlock) {
        long long n = 0;
        const std::string_view block = value.substr(name.size() + 1);
        if (spec.rotation != Rotation::Hadamard) {
          return bad("'rot=" + std::string(value) + "': only rot=hadamard takes a block size (allowed: rot=hadamard:N)");
        }
        // Whether N is a power of two dividing D is checked with the head dim (checkRotation).
        if (!parseInt(block, n) || n < 2 || n > (1 << 20)) {
          return bad("'rot=" + std::string(value) + "': " + std::string(block) +
                     " is not a block size (allowed: rot=hadamard:N with N a power of two ≥ 2 dividing the head dim)");
        }
        spec.rotationBlock = static_cast<int>(n);
      }
    } else if (key == "seed") {
      KVS_RETURN_IF_ERROR(needsValue("N, a whole number ≥ 0"));
      unsigned long long n = 0;
      const char* first = value.data();
      const char* last = value.data() + value.size();
      auto [ptr, ec] = std::from_chars(first, last, n);
      if (ec != std::errc() || ptr != last) {
        return bad("'seed=" + std::string(value) + "' is not a seed (allowed: seed=N with N a whole number from 0 to 2^64 − 1)");
      }
      spec.seed = n;
      seedGiven = true;
    } else if (key == "zero") {
      KVS_RETURN_IF_ERROR(needsValue("int|float|packed"));
      if (!accepts(*info, kOptionIntegerGrid)) {
        return bad("'zero=' does not apply to " + formatName + " (allowed with int1 … int8, asymmetric, only)");
      }
      if (value == "int") spec.zeroInt = true;
      else if (value == "packed") spec.zeroPacked = true;
      else if (value == "float") spec.zeroInt = false;
      else return bad("unknown zero point '" + std::string(value) + "' (allowed: zero=int, zero=packed or zero=float)");
    } else if (key == "outliers") {
      KVS_RETURN_IF_ERROR(needsValue("f with 0 ≤ f < 1"));
      double f = 0;
      if (!parseDouble(value, f) || f < 0 || f >= 1) {
        return bad("'outliers=" + std::string(value) + "' is not a fraction (allowed: outliers=f with 0 ≤ f < 1, e.g. 0.01)");
      }
      spec.outliers = f;
    } else if (key == "axis") {
      KVS_RETURN_IF_ERROR(groupedOnly());
      KVS_RETURN_IF_ERROR(needsValue("tensor|head|token|channel"));
      if (value == "tensor") spec.axis = Axis::Tensor;
      else if (value == "head") spec.axis = Axis::Head;
      else if (value == "token") spec.axis = Axis::Token;
      else if (value == "channel") spec.axis = Axis::Channel;
      else return bad("unknown axis '" + std::string(value) + "' (allowed: axis=tensor, head, token or channel)");
      axisGiven = true;
    } else if (key == "group") {
      KVS_RETURN_IF_ERROR(groupedOnly());
      KVS_RETURN_IF_ERROR(needsValue("G, a whole number ≥ 1 (0 = the whole axis)"));
      long long g = 0;
      if (!parseInt(value, g) || g < 0 || g > 1'000'000'000) {
        return bad("'group=" + std::string(value) + "' is not a group size (allowed: group=G with G a whole number ≥ 1, or 0 for the whole axis)");
      }
      spec.group = static_cast<int>(g);
      groupGiven = true;
    } else if (key == "clip") {
      KVS_RETURN_IF_ERROR(groupedOnly());
      KVS_RETURN_IF_ERROR(needsValue("p with 0 < p ≤ 1, or mse"));
      if (value == "mse") {
        spec.clip = {Clip::Kind::Mse, 1.0};
      } else {
        double p = 0;
        if (!parseDouble(value, p) || p <= 0 || p > 1) {
          return bad("'clip=" + std::string(value) + "' is out of range (allowed: clip=p with 0 < p ≤ 1, e.g. 0.99, or clip=mse)");
        }
        // clip=1 keeps every value: the same as no clipping, so it prints as nothing.
        spec.clip = p == 1.0 ? Clip{} : Clip{Clip::Kind::Percentile, p};
      }
      clipGiven = true;
    } else if (key == "scale") {
      KVS_RETURN_IF_ERROR(groupedOnly());
      KVS_RETURN_IF_ERROR(needsValue("fp16|bf16|fp32"));
      if (value == "fp16") spec.scale = MetaType::Fp16;
      else if (value == "bf16") spec.scale = MetaType::Bf16;
      else if (value == "fp32") spec.scale = MetaType::Fp32;
      else return bad("unknown scale type '" + std::string(value) + "' (allowed: scale=fp16, bf16 or fp32)");
      scaleGiven = true;
    } else if (key == "unitscale") {
      KVS_RETURN_IF_ERROR(noValue());
      if (!accepts(*info, kOptionUnitscale)) {
        return bad("'unitscale' does not apply to " + formatName + " (allowed with fp8_e4m3 and fp8_e5m2 only)");
      }
      spec.unitscale = true;
    } else if (key == "round") {
      KVS_RETURN_IF_ERROR(needsValue("away|trunc|even"));
      if (!accepts(*info, kOptionIntegerGrid)) {
        return bad("'round=' does not apply to " + formatName + " (allowed with int1 … int8 only)");
      }
      if (value == "away") spec.rounding = Rounding::Away;
      else if (value == "trunc") spec.rounding = Rounding::Trunc;
      else if (value == "even") spec.rounding = Rounding::Even;
      else return bad("unknown rounding '" + std::string(value) + "' (allowed: round=away, round=trunc or round=even)");
      roundGiven = true;
    } else if (key == "div" || key == "minscale" || key == "gscale") {
      KVS_RETURN_IF_ERROR(needsValue(key == "div" ? "N, a number > 0 (e.g. 200)" : "S, a number > 0 (e.g. 1e-6)"));
      const bool allowed = key == "div"        ? accepts(*info, kOptionUnitscale)
                           : key == "minscale" ? accepts(*info, kOptionMinScale)
                                               : accepts(*info, kOptionGlobalScale);
      if (!allowed) {
        const char* where = key == "div"        ? "fp8_e4m3 and fp8_e5m2 only"
                            : key == "minscale" ? "int1 … int8, fp8_e4m3 and fp8_e5m2 only"
                                                : "nvfp4 only";
        return bad("'" + key + "=' does not apply to " + formatName + " (allowed with " + where + ")");
      }
      double v = 0;
      if (!parseDouble(value, v) || !(v > 0) || v > 1e30) {
        return bad("'" + key + "=" + std::string(value) + "' is not a positive number (allowed: " + key +
                   (key == "div" ? "=N with N > 0, e.g. div=200)" : "=S with S > 0, e.g. " + key + "=1e-6)"));
      }
      (key == "div" ? spec.divisor : key == "minscale" ? spec.minScale : spec.globalScale) = v;
    } else if (key == "codes") {
      KVS_RETURN_IF_ERROR(needsValue("fp32|meta|stored"));
      if (!accepts(*info, kOptionIntegerGrid)) {
        return bad("'codes=' does not apply to " + formatName + " (allowed with int1 … int8, asymmetric, only)");
      }
      spec.codesFp32 = value == "fp32";
      spec.codesMeta = value == "meta";
      if (!spec.codesFp32 && !spec.codesMeta && value != "stored") {
        return bad("unknown codes rule '" + std::string(value) + "' (allowed: codes=fp32, codes=meta or codes=stored)");
      }
    } else if (key == "4over6") {
      KVS_RETURN_IF_ERROR(noValue());
      if (!accepts(*info, kOptionFourOverSix)) {
        return bad("'4over6' does not apply to " + formatName + " (allowed with nvfp4 only)");
      }
      spec.fourOverSix = true;
    } else {
      return bad("unknown option '" + key + "' (allowed options: " + std::string(kOptionList) + ")");
    }
  }

  if (spec.residual > 0 && spec.chunk > 0) {
    return bad("residual=" + std::to_string(spec.residual) + " and chunk=" + std::to_string(spec.chunk) +
               " exclude each other: choose one (residual=R keeps the newest R tokens exact, a sliding "
               "window; chunk=R quantizes tokens R at a time and keeps the unfilled remainder exact)");
  }
  if (spec.symmetric && spec.zeroInt) {
    return bad("zero=int is the zero point of an asymmetric grid: it does not apply with sym (allowed: "
               + formatName + ",zero=int or " + formatName + ",sym)");
  }
  if (info->alwaysRotates) {
    const bool rotGiven = std::find(seen.begin(), seen.end(), "rot") != seen.end();
    if (rotGiven && spec.rotation == Rotation::None) {
      return bad("tq formats always rotate (allowed: rot=hadamard, rot=rht or rot=random; without rot= "
                 "the default is rot=hadamard when the head dim is a power of two, rot=random otherwise)");
    }
    if (spec.rotationBlock != 0) {
      return bad("tq formats rotate whole vectors: rot=hadamard:" + std::to_string(spec.rotationBlock) +
                 " does not apply (allowed: rot=hadamard, rot=rht or rot=random)");
    }
    const bool lmdeploy = info->hadamardOnly;
    if (lmdeploy && rotGiven && spec.rotation != Rotation::Hadamard) {
      return bad(formatName + " rotates by the normalized Hadamard matrix, as LMDeploy's hadamard_rotate does "
                 "(allowed: rot=hadamard, or no rot=)");
    }
    if (lmdeploy && seedGiven) {
      return bad(formatName + " draws nothing at random: seed= does not apply (LMDeploy's rotation has no signs and "
                 "its residual bit is a sign, not a projection; allowed: " + formatName + " without seed=)");
    }
  }
  if (info->flatGroups) {
    if (spec.axis != Axis::Tensor && spec.axis != Axis::Token) {
      return bad(std::string("axis=") + axisName(spec.axis) + " does not apply to " + formatName +
                 " (allowed: axis=tensor, HQQ's axis 0: the layer tensor viewed as [G, n/G], each column a group; "
                 "axis=token, HQQ's axis 1: G consecutive values)");
    }
    if (spec.group < 1) return bad("hqq needs a group of at least one value (allowed: group=G with G ≥ 1, HQQ's group_size)");
  }
  if (grouped && !accepts(*info, kOptionClipMse) && spec.clip.kind == Clip::Kind::Mse) {
    return bad("clip=mse does not apply to " + formatName + ": a group's best clip depends on the codebook, "
               "which depends on every group's clip (allowed: clip=p with 0 < p ≤ 1)");
  }
  // tq and tqp take seed= with any rotation: it seeds rot=random (their default on head dims that
  // are not a power of two) and tqp's QJL matrix.
  if (seedGiven && !info->alwaysRotates && spec.rotation != Rotation::Rht && spec.rotation != Rotation::Random) {
    return bad("seed= draws the signs or matrix of rot=rht and rot=random, and this spec has neither "
               "(allowed: seed=N together with rot=rht or rot=random)");
  }
  if (spec.zeroPacked) {
    if (spec.symmetric) {
      return bad("zero=packed is the zero point of an asymmetric grid: it does not apply with sym (allowed: " +
                 formatName + ",zero=packed,scale=fp32 or " + formatName + ",sym)");
    }
    if (bits > 4) {
      return bad("zero=packed keeps the zero point in the 4 low mantissa bits of the scale, so it holds codes up to "
                 "15 (allowed: int1 … int4 with zero=packed)");
    }
    if (spec.scale != MetaType::Fp32) {
      return bad("zero=packed packs the zero point into an fp32 scale word (allowed: " + formatName +
                 ",zero=packed,scale=fp32)");
    }
    if (roundGiven) {
      return bad("round= does not apply with zero=packed, which rounds half away from zero as vLLM's int4 kernel does");
    }
  }
  if (spec.codesMeta && (spec.symmetric || spec.zeroInt || spec.zeroPacked)) {
    return bad("codes=meta is LMDeploy TurboMind's asymmetric grid with a float zero point: it does not apply with "
               "sym, zero=int or zero=packed (allowed: " + formatName + ",round=even,codes=meta)");
  }
  if (spec.codesFp32 && (spec.symmetric || spec.zeroInt || spec.zeroPacked || roundGiven)) {
    return bad("codes=fp32 is vLLM's TurboQuant value grid (asymmetric, float min, its own rounding): it does not "
               "apply with sym, zero=int, zero=packed or round= (allowed: " + formatName + ",codes=fp32)");
  }
  if (roundGiven && spec.zeroInt) {
    return bad("round= chooses how the float zero point or symmetric grid rounds; zero=int keeps the contract's "
               "rounding (allowed: " + formatName + ",zero=int or " + formatName + ",round=" +
               roundingName(spec.rounding) + ")");
  }
  if (spec.unitscale && (spec.divisor > 0 || spec.minScale > 0)) {
    return bad(std::string(spec.divisor > 0 ? "div=" : "minscale=") +
               " sets how the scale is computed, and unitscale fixes it at 1 (allowed: " + formatName +
               ",unitscale or " + formatName + (spec.divisor > 0 ? ",div=N" : ",minscale=S") + ")");
  }
  if (spec.unitscale && (axisGiven || groupGiven || clipGiven || scaleGiven)) {
    return bad("unitscale stores no scale, so axis=, group=, clip= and scale= do not apply (allowed: "
               + formatName + ",unitscale with pipeline options only)");
  }
  if (grouped) {
    if (groupGiven && spec.group > 0 && (spec.axis == Axis::Tensor || spec.axis == Axis::Head)) {
      return bad("group=" + std::to_string(spec.group) + " needs axis=token or axis=channel (axis=" +
                 axisName(spec.axis) + " makes one group per " + axisName(spec.axis) +
                 "; allowed: group=G with axis=token or axis=channel)");
    }
    if (!groupGiven) spec.group = defaultGroup(spec.format, spec.axis);
  }
  return spec;
}

Rotation effectiveRotation(const QuantSpec& spec, int64_t headDim) {
  if (spec.rotation != Rotation::None || !isVectorFormat(spec)) return spec.rotation;
  return isPowerOfTwo(headDim) ? Rotation::Hadamard : Rotation::Random;
}

Status checkRotation(const QuantSpec& spec, int64_t headDim) {
  const std::string d = std::to_string(headDim);
  if (isVectorFormat(spec)) {
    if (formatInfo(spec.format).hadamardOnly && !isPowerOfTwo(headDim)) {
      return Status::invalidArgument("D = " + d + " is not a power of two: LMDeploy's TurboQuant refuses it "
                                     "(\"TurboQuant K requires power-of-2 raw dim, got " + d + "\")");
    }
    if (headDim < 2) {
      return Status::invalidArgument("tq formats need a head dim of at least 2 (the density of a unit vector's "
                                     "coordinate does not exist for D = " + d + ")");
    }
    if (spec.rotationBlock != 0) {
      return Status::invalidArgument("tq formats rotate whole vectors: rot=hadamard:N does not apply");
    }
    if ((spec.rotation == Rotation::Hadamard || spec.rotation == Rotation::Rht) && !isPowerOfTwo(headDim)) {
      return Status::invalidArgument("D = " + d + " is not a power of two; use rot=random");
    }
    return Status::ok();
  }
  switch (spec.rotation) {
    case Rotation::None:
    case Rotation::Random:
      return Status::ok();
    case Rotation::Hadamard:
      if (spec.rotationBlock != 0) {
        if (!isPowerOfTwo(spec.rotationBlock) || headDim % spec.rotationBlock != 0) {
          return Status::invalidArgument("rot=hadamard:" + std::to_string(spec.rotationBlock) + ": " +
                                         std::to_string(spec.rotationBlock) + " is not a power of two dividing " + d +
                                         " (allowed: rot=hadamard:N with N a power of two dividing the head dim D = " +
                                         d + ")");
        }
        return Status::ok();
      }
      [[fallthrough]];
    case Rotation::Rht:
      if (!isPowerOfTwo(headDim)) {
        return Status::invalidArgument(std::string("rot=") + rotationName(spec.rotation) +
                                       " needs a head dim that is a power of two, but D = " + d +
                                       " (allowed: rot=hadamard:N with N a power of two dividing D, or rot=random)");
      }
      return Status::ok();
  }
  return Status::ok();
}

Status validateSpec(const QuantSpec& spec, const SpecContext& context) {
  const std::string text = toString(spec);
  auto bad = [&](const std::string& why) {
    return Status::invalidArgument("spec '" + text + "': " + why);
  };
  // Specs built in code (the GUI's widgets, the search) skip the parser: check its invariants.
  const FormatInfo& format = formatInfo(spec.format);
  if (format.hasBits && (spec.bits < format.minBits || spec.bits > format.maxBits)) {
    return bad("bit width " + std::to_string(spec.bits) + " is out of range (allowed: " + std::string(format.name) +
               std::to_string(format.minBits) + " … " + std::string(format.name) + std::to_string(format.maxBits) + ")");
  }
  if (spec.symmetric && (!accepts(format, kOptionSym) || spec.bits < 2)) {
    return bad("sym is allowed with int2 … int8 only");
  }
  if (spec.unitscale && !accepts(format, kOptionUnitscale)) {
    return bad("unitscale is allowed with fp8_e4m3 and fp8_e5m2 only");
  }
  if (spec.clip.kind == Clip::Kind::Percentile && !(spec.clip.p > 0 && spec.clip.p <= 1)) {
    return bad("clip p is out of range (allowed: 0 < p ≤ 1)");
  }
  if (!(spec.outliers >= 0 && spec.outliers < 1)) {
    return bad("the outlier fraction is out of range (allowed: 0 ≤ f < 1)");
  }
  if (spec.sinks < 0 || spec.residual < 0 || spec.chunk < 0 || spec.group < 0) {
    return bad("sinks, residual, chunk and group must be ≥ 0 (allowed: whole numbers ≥ 0)");
  }
  if (spec.residual > 0 && spec.chunk > 0) {
    return bad("residual and chunk exclude each other: choose one");
  }
  if (format.grouped && !accepts(format, kOptionClipMse) && spec.clip.kind == Clip::Kind::Mse) {
    return bad("clip=mse does not apply to nuq (allowed: clip=p with 0 < p ≤ 1)");
  }
  if (format.alwaysRotates && spec.clip.kind != Clip::Kind::None) {
    return bad("tq formats quantize whole vectors: clip= does not apply");
  }
  if (spec.zeroInt && (!accepts(format, kOptionIntegerGrid) || spec.symmetric)) {
    return bad("zero=int is allowed with asymmetric int1 … int8 only");
  }
  if (spec.zeroPacked && (!format.hasBits || spec.symmetric || spec.zeroInt || spec.bits > 4 ||
                          spec.scale != MetaType::Fp32 || spec.rounding != Rounding::Away)) {
    return bad("zero=packed is allowed with asymmetric int1 … int4, scale=fp32, without zero=int or round=, only");
  }
  if (spec.rounding != Rounding::Away && (!format.hasBits || spec.zeroInt)) {
    return bad("round= is allowed with int1 … int8 without zero=int only");
  }
  if (!(spec.divisor >= 0) || !(spec.minScale >= 0) || !(spec.globalScale >= 0)) {
    return bad("div=, minscale= and gscale= must be > 0 when given");
  }
  if (spec.divisor > 0 && (!accepts(format, kOptionUnitscale) || spec.unitscale)) {
    return bad("div= is allowed with fp8_e4m3 and fp8_e5m2 without unitscale only");
  }
  if (spec.minScale > 0 && (!accepts(format, kOptionMinScale) || spec.unitscale)) {
    return bad("minscale= is allowed with int1 … int8, fp8_e4m3 and fp8_e5m2 (without unitscale) only");
  }
  if (spec.globalScale > 0 && !accepts(format, kOptionGlobalScale)) {
    return bad("gscale= is allowed with nvfp4 only");
  }
  if (spec.fourOverSix && !accepts(format, kOptionFourOverSix)) {
    return bad("4over6 is allowed with nvfp4 only");
  }
  if (spec.codesFp32 && (!accepts(format, kOptionIntegerGrid) || spec.symmetric || spec.zeroInt || spec.zeroPacked ||
                         spec.rounding != Rounding::Away)) {
    return bad("codes=fp32 is allowed with asymmetric int1 … int8 without zero=int, zero=packed or round= only");
  }
  if (spec.codesMeta && (!accepts(format, kOptionIntegerGrid) || spec.symmetric || spec.zeroInt || spec.zeroPacked ||
                         spec.codesFp32)) {
    return bad("codes=meta is allowed with asymmetric int1 … int8 without zero=int or zero=packed only");
  }
  // With the head dim known, checkRotation below says more (e.g. "48 is not a power of two dividing 128").
  if (spec.rotationBlock != 0 && (spec.rotation != Rotation::Hadamard || spec.rotationBlock < 2 ||
                                  (context.headDim <= 0 && !isPowerOfTwo(spec.rotationBlock)))) {
    return bad("rot=hadamard:" + std::to_string(spec.rotationBlock) + ": " + std::to_string(spec.rotationBlock) +
               " is not a power of two (allowed: rot=hadamard:N with N a power of two ≥ 2 dividing the head dim)");
  }
  if (spec.prerope && !context.isKey) {
    return bad("prerope applies to keys only (values have no RoPE); remove it from the value spec");
  }
  if (spec.prerope && !context.hasKeyPreRope) {
    return bad("prerope needs the dump's key_pre_rope dataset, which this dump does not have "
               "(allowed: a spec without prerope, or a dump written with key_pre_rope)");
  }
  if (rotates(spec) && context.headDim > 0) {
    KVS_RETURN_IF_ERROR(checkRotation(spec, context.headDim).withContext("spec '" + text + "'"));
  }
  const FormatInfo& info = formatInfo(spec.format);
  if (info.blockSize > 0 && context.kvHeads > 0 && context.headDim > 0) {
    const int64_t row = int64_t{context.kvHeads} * context.headDim;
    if (row % info.blockSize != 0) {
      return bad(std::string(info.name) + " quantizes blocks of " + std::to_string(info.blockSize) +
                 " along the token row, but a row holds KVH·D = " + std::to_string(context.kvHeads) + "·" +
                 std::to_string(context.headDim) + " = " + std::to_string(row) +
                 " values, not a multiple of " + std::to_string(info.blockSize));
    }
  }
  return Status::ok();
}

std::string toString(const QuantSpec& spec) {
  const FormatInfo& info = formatInfo(spec.format);
  const QuantSpec def = defaultSpec(spec.format, spec.bits);
  std::string out = info.hasBits ? std::string(info.name) + std::to_string(spec.bits) : std::string(info.name);
  auto add = [&](const std::string& option) { out += ","; out += option; };

  if (info.hasBits && spec.symmetric) add("sym");
  if (spec.zeroInt) add("zero=int");
  if (spec.zeroPacked) add("zero=packed");
  if (spec.rounding != Rounding::Away) add(std::string("round=") + roundingName(spec.rounding));
  if (spec.codesFp32) add("codes=fp32");
  if (spec.codesMeta) add("codes=meta");
  // Pipeline options, in the order of §1.
  if (spec.prerope) add("prerope");
  if (spec.sinks != 0) add("sinks=" + std::to_string(spec.sinks));
  if (spec.residual != 0) add("residual=" + std::to_string(spec.residual));
  if (spec.chunk != 0) add("chunk=" + std::to_string(spec.chunk));
  // tq and tqp without rot= take their default rotation for the head dim (effectiveRotation).
  if (spec.rotation != Rotation::None) {
    std::string rot = std::string("rot=") + rotationName(spec.rotation);
    if (spec.rotationBlock != 0) rot += ":" + std::to_string(spec.rotationBlock);
    add(rot);
  }
  if (rotates(spec) && spec.seed != 0) add("seed=" + std::to_string(spec.seed));
  if (spec.outliers != 0) add("outliers=" + formatNumber(spec.outliers));
  // Format options (§3, §4, §5).
  if (info.grouped && !spec.unitscale) {
    if (spec.axis != def.axis) add(std::string("axis=") + axisName(spec.axis));
    const bool groupApplies = spec.axis == Axis::Token || spec.axis == Axis::Channel;
    if (groupApplies && spec.group != defaultGroup(spec.format, spec.axis)) {
      add("group=" + std::to_string(spec.group));
    }
    if (spec.clip.kind == Clip::Kind::Mse) add("clip=mse");
    else if (spec.clip.kind == Clip::Kind::Percentile && spec.clip.p != 1.0) add("clip=" + formatNumber(spec.clip.p));
    if (spec.scale != def.scale) add(std::string("scale=") + metaTypeName(spec.scale));
    if (spec.divisor > 0) add("div=" + formatNumber(spec.divisor));
    if (spec.minScale > 0) add("minscale=" + formatNumber(spec.minScale));
  }
  if (info.alwaysRotates && spec.scale != def.scale) add(std::string("scale=") + metaTypeName(spec.scale));
  if (info.flatGroups) {
    if (spec.axis != def.axis) add(std::string("axis=") + axisName(spec.axis));
    if (spec.group != def.group) add("group=" + std::to_string(spec.group));
    if (spec.scale != def.scale) add(std::string("scale=") + metaTypeName(spec.scale));
  }
  if (spec.unitscale) add("unitscale");
  if (spec.globalScale > 0) add("gscale=" + formatNumber(spec.globalScale));
  if (spec.fourOverSix) add("4over6");
  return out;
}

}  // namespace kvscope
