// SPDX-License-Identifier: GPL-3.0-or-later
// Diagnosis of a hard cache: findings about a dump's K, V and attention that predict how a
// quantizer will fail, each with its evidence (layer, head, channel or token, the numbers) and
// what to do about it (docs/diagnose.md states every rule and threshold).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/io/dump.h"
#include "core/util/status.h"

namespace kvscope {

/// The thresholds of the findings (docs/diagnose.md explains each one).
namespace diagnose_thresholds {
/// key_bias: a channel's |mean| over tokens is at least this many times its standard deviation.
inline constexpr double kBiasMeanToStd = 20.0;
/// key_bias: and at least this many times the median channel's RMS (a large value, not a
/// merely quiet constant channel).
inline constexpr double kBiasMeanToMedianRms = 10.0;
/// massive_tokens: a token's ‖x‖₂ is at least this many times the head's median token norm.
inline constexpr double kMassiveNormRatio = 50.0;
/// massive_tokens: tokens before this position can be kept in fp16 with `sinks=S`.
inline constexpr int kSinkWindow = 16;
/// outlier_channels: a key channel's max |x| is more than this many times the median channel's.
inline constexpr double kOutlierRatio = 6.0;
/// outlier_channels: and it is among a token's top 1 % of |x| on at least this fraction of tokens.
inline constexpr double kOutlierPersistence = 0.5;
/// low_entropy_heads: a query head's mean attention entropy (nats) is at most this.
inline constexpr double kLowEntropyNats = 0.1;
/// side_sensitivity: K's and V's probe output_rel_error differ by at least this factor.
inline constexpr double kSideRatio = 4.0;
/// The probe quantizes both sides with this spec (one 4-bit per-token candidate).
inline constexpr const char* kProbeSpec = "int4,axis=token";
/// The probe and the entropies use the last this many queries of each layer.
inline constexpr int kProbeQueries = 8;
/// Evidence entries a finding lists first (strongest first); Finding::groups keeps them all.
inline constexpr int kMaxEvidence = 8;
}  // namespace diagnose_thresholds

/// What a finding is about.
enum class FindingKind { KeyBias, MassiveTokens, OutlierChannels, LowEntropyHeads, HeadDim, SideSensitivity };
/// "key_bias", "massive_tokens", "outlier_channels", "low_entropy_heads", "head_dim",
/// "side_sensitivity".
const char* findingKindName(FindingKind kind);

/// One place the finding was seen. Fields that do not apply stay -1 / empty.
struct Evidence {
  int layer = -1;      ///< the dump's layer index
  int kvHead = -1;     ///< kv head (for a query head: the kv head it reads)
  int queryHead = -1;  ///< query head (attention findings)
  int channel = -1;    ///< channel of the head dim
  int64_t token = -1;  ///< token position
  std::string tensor;  ///< "key", "key_pre_rope", "value", "attention"
  std::vector<std::pair<std::string, double>> numbers;  ///< named figures, e.g. {"mean", 302.1}
};

/// A finding's evidence about one thing: one channel (key_bias, outlier_channels), one token
/// (massive_tokens), one query head (low_entropy_heads) or one layer (side_sensitivity).
struct EvidenceGroup {
  std::string about;               ///< "channel", "token", "query_head", "layer"
  int64_t index = -1;              ///< which channel, token, query head or layer
  std::vector<Evidence> evidence;  ///< every place about it, strongest first
};

/// One finding.
struct Finding {
  FindingKind kind = FindingKind::KeyBias;  ///< what it is about
  std::string summary;  ///< one sentence: what was found
  std::string advice;   ///< what to do about it
  int matches = 0;      ///< places matching (evidence keeps the strongest kMaxEvidence)
  std::vector<Evidence> evidence;  ///< the strongest kMaxEvidence, strongest first
  /// All the evidence, grouped by what it is about; groups ordered by their strongest place.
  /// Empty for head_dim (one fact about the dump).
  std::vector<EvidenceGroup> groups;
  /// massive_tokens: S of the advice's `sinks=S` (the last massive token + 1) when every massive
  /// token lies before kSinkWindow; 0 otherwise and for other kinds.
  int sinks = 0;
};

/// What to diagnose.
struct DiagnoseOptions {
  std::vector<int> layers;  ///< ascending; empty = all
  int sequence = 0;
};

/// Everything a diagnosis produced.
struct Diagnosis {
  DumpInfo dump;                   ///< the dump's metadata
  std::vector<int> layers;         ///< the layers checked
  std::vector<Finding> findings;   ///< in FindingKind order, only kinds that were found
  std::vector<std::string> notes;  ///< what could not be checked and why
};

/// Diagnoses a dump layer by layer (peak memory about one layer). Attention findings need
/// queries; without them a note says so. Cancels via `progress`.
Expected<Diagnosis> diagnose(const Dump& dump, const DiagnoseOptions& options, const Progress& progress = {});

/// The diagnosis as JSON (`kvscope_diagnose: 1`): each finding's strongest evidence and all of it
/// in its groups.
std::string diagnosisToJson(const Diagnosis& diagnosis);
/// A readable report: each finding, its advice, its strongest evidence and one line per group.
std::string diagnosisToText(const Diagnosis& diagnosis);

}  // namespace kvscope
