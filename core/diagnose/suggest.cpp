// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/diagnose/suggest.h"

#include <algorithm>
#include <cmath>

namespace kvscope {

const char* findingSeverity(FindingKind kind) {
  switch (kind) {
    case FindingKind::KeyBias:
    case FindingKind::MassiveTokens: return "high";
    case FindingKind::OutlierChannels:
    case FindingKind::LowEntropyHeads:
    case FindingKind::SideSensitivity: return "medium";
    case FindingKind::HeadDim: return "low";
  }
  return "medium";
}

namespace {

bool powerOfTwo(int d) { return d > 0 && (d & (d - 1)) == 0; }

SettingSuggestion keySuggestion(std::string option, std::string label) {
  SettingSuggestion s;
  s.option = std::move(option);
  s.key = true;
  s.label = std::move(label);
  return s;
}

/// The rotation kvscope can apply at head dim D.
SettingSuggestion rotationFor(const DumpInfo& info) {
  return powerOfTwo(info.headDim)
             ? keySuggestion("rot=hadamard", "rotate keys (rot=hadamard)")
             : keySuggestion("rot=random", "rotate keys (rot=random: the head dim is not a power of two)");
}

}  // namespace

std::vector<SettingSuggestion> suggestedSettings(const Finding& finding, const DumpInfo& info) {
  std::vector<SettingSuggestion> out;
  switch (finding.kind) {
    case FindingKind::KeyBias:
      out.push_back(keySuggestion("axis=channel", "quantize keys per channel (axis=channel)"));
      if (info.hasKeyPreRope) out.push_back(keySuggestion("prerope", "quantize keys before RoPE (prerope)"));
      out.push_back(rotationFor(info));
      break;
    case FindingKind::MassiveTokens:
      if (finding.sinks > 0) {
        SettingSuggestion s;
        s.option = "sinks=" + std::to_string(finding.sinks);
        s.key = s.value = true;
        s.label = "keep tokens 0–" + std::to_string(finding.sinks - 1) + " in fp16 on K and V (" + s.option + ")";
        out.push_back(std::move(s));
      }
      break;
    case FindingKind::OutlierChannels:
      out.push_back(keySuggestion("axis=channel", "quantize keys per channel (axis=channel)"));
      out.push_back(rotationFor(info));
      break;
    case FindingKind::HeadDim:
      if (!powerOfTwo(info.headDim)) {
        SettingSuggestion s;
        s.option = "rot=random";
        s.key = s.value = true;
        s.label = "rotate K and V with rot=random (rot=hadamard needs a power of two)";
        out.push_back(std::move(s));
      }
      break;
    case FindingKind::LowEntropyHeads:
    case FindingKind::SideSensitivity: break;
  }
  return out;
}

Expected<QuantSpec> applySuggestion(const QuantSpec& spec, const SettingSuggestion& suggestion,
                                    const SpecContext& context) {
  QuantSpec out = spec;
  const std::string& o = suggestion.option;
  if (o.rfind("sinks=", 0) == 0) {
    const int sinks = std::atoi(o.c_str() + 6);
    if (sinks <= 0) return Status::invalidArgument("suggestion '" + o + "': sinks must be positive");
    out.sinks = std::max(out.sinks, sinks);
  } else if (o == "axis=channel") {
    const FormatInfo& f = formatInfo(spec.format);
    if (f.grouped) {
      out.axis = Axis::Channel;
    } else {
      // A format without axes (ggml blocks, mxfp4/nvfp4, tq, fp16): KIVI's per-channel integer
      // keys at the format's bits, keeping everything that is not the format's own.
      const int bits = std::clamp(static_cast<int>(std::lround(f.hasBits ? spec.bits : f.payloadBits)), 2, 8);
      auto base = parseSpec("int" + std::to_string(bits) + ",axis=channel,group=32");
      if (!base) return base.status();
      out = *base;
      out.sinks = spec.sinks;
      out.residual = spec.residual;
      out.chunk = spec.chunk;
      out.outliers = spec.outliers;
      out.rotation = spec.rotation;
      out.rotationBlock = spec.rotationBlock;
      out.seed = spec.seed;
      out.prerope = spec.prerope;
    }
  } else if (o == "prerope") {
    out.prerope = true;
  } else if (o == "rot=hadamard" || o == "rot=random") {
    out.rotation = o == "rot=hadamard" ? Rotation::Hadamard : Rotation::Random;
    out.rotationBlock = 0;
  } else {
    return Status::invalidArgument("suggestion '" + o +
                                   "': unknown option (allowed: sinks=S, axis=channel, prerope, rot=hadamard, rot=random)");
  }
  Status s = validateSpec(out, context);
  if (!s.isOk()) {
    std::string where = toString(out);  // appended piece by piece: GCC 12 warns (-Wrestrict) on "'" + string&&
    where.insert(where.begin(), '\'');
    where.append("' (").append(o).append(" on '").append(toString(spec)).append("')");
    return s.withContext(where);
  }
  return out;
}

Expected<Plan> applySuggestion(const Plan& plan, const SettingSuggestion& suggestion, const SpecContext& context) {
  Plan out = plan;
  auto base = applySuggestion(plan.base, suggestion, context);
  if (!base) return base.status();
  out.base = *base;
  for (PlanOverride& part : out.overrides) {
    auto spec = applySuggestion(part.spec, suggestion, context);
    if (!spec) return spec.status();
    part.spec = *spec;
  }
  return out;
}

}  // namespace kvscope
