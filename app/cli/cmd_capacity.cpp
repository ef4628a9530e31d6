// SPDX-License-Identifier: GPL-3.0-or-later
// `kvscope-cli capacity`: bytes per token, tokens that fit after the weights, and the decode
// cost of K/V specs against fp16 (docs/search-and-capacity.md).
#include <cstdio>
#include <iostream>
#include <limits>
#include <memory>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "app/cli/command.h"
#include "core/capacity/capacity.h"
#include "core/capacity/units.h"
#include "core/engine/presets.h"
#include "core/util/json_text.h"

namespace kvscope::cli {
namespace {

struct Options {
  std::string dump, mapping;
  int layers = 0, kvHeads = 0, headDim = 0;
  SpecChoice spec;
  std::string memory = "80GiB", weights = "0";
  int64_t context = 0, batch = 1;
  bool decode = false;
  std::string bandwidth, ops, device;
  std::string json;
};

Expected<CapacityRequest> buildRequest(const Options& o, ResolvedPlans& resolved) {
  CapacityRequest r;
  const bool shapeGiven = o.layers > 0 || o.kvHeads > 0 || o.headDim > 0;
  if (!o.dump.empty() && shapeGiven) {
    return Status::invalidArgument("give either --dump or --layers/--kv-heads/--head-dim, not both");
  }
  if (!o.dump.empty()) {
    auto dump = openDump(o.dump, o.mapping);
    if (!dump) return dump.status();
    const DumpInfo& info = (*dump)->info();
    r.shape = {info.layers, info.kvHeads, info.headDim};
    r.context = info.tokens;
  } else {
    if (o.layers <= 0 || o.kvHeads <= 0 || o.headDim <= 0) {
      return Status::invalidArgument(
          "give --dump DUMP, or all of --layers N --kv-heads N --head-dim N (positive)");
    }
    r.shape = {o.layers, o.kvHeads, o.headDim};
  }
  if (o.context > 0) r.context = o.context;
  if (r.context <= 0) r.context = 4096;
  r.batch = o.batch;
  auto plans = resolvePlans(o.spec, KvShape{r.shape.headDim, r.shape.layers, r.shape.kvHeads});
  if (!plans) return plans.status();
  r.key = plans->plans.key;
  r.value = plans->plans.value;
  resolved = std::move(*plans);
  auto memory = parseByteSize(o.memory, "--memory");
  if (!memory) return memory.status();
  auto weights = parseByteSize(o.weights, "--weights");
  if (!weights) return weights.status();
  r.memoryBytes = *memory;
  r.weightsBytes = *weights;

  const bool custom = !o.bandwidth.empty() || !o.ops.empty();
  if (!o.device.empty() && custom) {
    return Status::invalidArgument("give either --device or --bandwidth and --ops, not both");
  }
  if ((o.decode || custom) && o.device.empty()) {
    if (o.bandwidth.empty() || o.ops.empty()) {
      std::string names;
      for (const DeviceInfo& d : deviceTable()) names += (names.empty() ? "" : ", ") + std::string(d.name);
      return Status::invalidArgument("--decode needs --device (" + names +
                                     ") or both --bandwidth (e.g. 4.8TB/s) and --ops (e.g. 60Tops/s)");
    }
    auto bw = parseBandwidth(o.bandwidth, "--bandwidth");
    if (!bw) return bw.status();
    auto ops = parseOpRate(o.ops, "--ops");
    if (!ops) return ops.status();
    r.decode = DecodeHardware{"custom", *bw, *ops, "--ops as given"};
  } else if (!o.device.empty()) {
    const DeviceInfo* d = findDevice(o.device);
    if (!d) {
      std::string names;
      for (const DeviceInfo& x : deviceTable()) names += (names.empty() ? "" : ", ") + std::string(x.name);
      return Status::invalidArgument("--device '" + o.device + "': unknown (known: " + names + ")");
    }
    r.decode = DecodeHardware{std::string(d->name), d->bandwidth, d->fp16Dense,
                              "dense FP16 tensor throughput (" + std::string(d->source) + ")"};
  }
  return r;
}

nlohmann::ordered_json entryJson(const CapacityEntry& e) {
  nlohmann::ordered_json j;
  j["name"] = e.name;
  j["key_spec"] = e.keySpec;
  j["value_spec"] = e.valueSpec;
  j["key_bits_per_element"] = e.keyBitsPerElement;
  j["value_bits_per_element"] = e.valueBitsPerElement;
  j["bytes_per_token"] = e.bytesPerToken;
  j["tokens_fit"] = e.tokensFit;
  j["sequences_fit"] = e.sequencesFit;
  j["batch_fits"] = e.batchFits;
  if (e.decode) {
    j["decode"] = {{"kv_bytes_read", e.decode->bytesRead},
                   {"dequant_ops", e.decode->dequantOps},
                   {"memory_seconds", e.decode->memorySeconds},
                   {"compute_seconds", e.decode->computeSeconds},
                   {"seconds", e.decode->seconds},
                   {"bound", e.decode->memoryBound ? "memory" : "compute"}};
  }
  return j;
}

std::string toJsonText(const CapacityReport& rep) {
  const CapacityRequest& r = rep.request;
  nlohmann::ordered_json j;
  j["kvscope_capacity"] = 1;
  j["shape"] = {{"layers", r.shape.layers}, {"kv_heads", r.shape.kvHeads}, {"head_dim", r.shape.headDim}};
  j["context"] = r.context;
  j["batch"] = r.batch;
  j["memory_bytes"] = r.memoryBytes;
  j["weights_bytes"] = r.weightsBytes;
  j["available_bytes"] = rep.availableBytes;
  if (r.decode) {
    j["hardware"] = {{"name", r.decode->name},
                     {"bandwidth_bytes_per_second", r.decode->bandwidth},
                     {"ops_per_second", r.decode->opsPerSecond},
                     {"ops_figure", r.decode->opsSource}};
  }
  j["entries"] = {entryJson(rep.fp16), entryJson(rep.quantized)};
  j["formulas"] = capacityFormulas();
  j["notes"] = rep.notes;
  return jsonText(j);
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string toText(const CapacityReport& rep) {
  const CapacityRequest& r = rep.request;
  std::ostringstream out;
  out << "shape: " << r.shape.layers << " layers, " << r.shape.kvHeads << " kv heads, head dim "
      << r.shape.headDim << "; context " << r.context << " tokens, batch " << r.batch << "\n";
  out << "memory " << formatBytes(r.memoryBytes) << " − weights " << formatBytes(r.weightsBytes)
      << " = " << formatBytes(rep.availableBytes) << " for the KV cache\n";
  for (const CapacityEntry* e : {&rep.fp16, &rep.quantized}) {
    out << "\n" << e->name << ": K " << e->keySpec << " (" << fmt("%.3f", e->keyBitsPerElement)
        << " bpe), V " << e->valueSpec << " (" << fmt("%.3f", e->valueBitsPerElement) << " bpe)\n";
    out << "  bytes per token " << fmt("%.1f", e->bytesPerToken) << "; fits "
        << fmt("%.0f", e->tokensFit) << " tokens = " << e->sequencesFit << " sequences of "
        << r.context << (e->batchFits ? "; the batch fits\n" : "; the batch does NOT fit\n");
    if (e->decode) {
      const DecodeCost& d = *e->decode;
      out << "  decode step: reads " << formatBytes(d.bytesRead) << " of KV, "
          << fmt("%.3g", d.dequantOps) << " dequant ops → " << fmt("%.3f", d.memorySeconds * 1e3)
          << " ms memory, " << fmt("%.3f", d.computeSeconds * 1e3) << " ms compute: "
          << fmt("%.3f", d.seconds * 1e3) << " ms (" << (d.memoryBound ? "memory" : "compute")
          << "-bound)\n";
    }
  }
  if (rep.fp16.bytesPerToken > 0 && rep.quantized.bytesPerToken > 0) {
    out << "\ncompression " << fmt("%.2f", rep.fp16.bytesPerToken / rep.quantized.bytesPerToken)
        << "× against fp16\n";
  }
  if (r.decode) {
    out << "hardware: " << r.decode->name << ", " << formatRate(r.decode->bandwidth, "B/s") << ", "
        << formatRate(r.decode->opsPerSecond, "ops/s") << " (" << r.decode->opsSource << ")\n";
  }
  out << "\nformulas:\n";
  for (const std::string& f : capacityFormulas()) out << "  " << f << "\n";
  for (const std::string& n : rep.notes) out << "note: " << n << "\n";
  return out.str();
}

CommandSetup setup = [](CLI::App& sub) {
  auto o = std::make_shared<Options>();
  addInputOption(sub, "--dump", o->dump, "take layers, kv heads, head dim and context from this dump");
  addInputOption(sub, "--mapping", o->mapping, "mapping file for a non-canonical dump");
  sub.add_option("--layers", o->layers, "number of layers (without --dump)");
  sub.add_option("--kv-heads", o->kvHeads, "number of kv heads (without --dump)");
  sub.add_option("--head-dim", o->headDim, "head dimension (without --dump)");
  sub.add_option("--key", o->spec.key, "spec or plan for keys, e.g. q4_0 or q4_0;first2+last2:q8_0");
  sub.add_option("--value", o->spec.value, "spec or plan for values");
  sub.add_option("--preset", o->spec.preset, "a named K/V setting instead of --key/--value");
  addEngineOptions(sub, o->spec);
  sub.add_option("--memory", o->memory, "accelerator memory (default 80GiB)");
  sub.add_option("--weights", o->weights, "memory taken by weights (default 0), e.g. 16GiB");
  sub.add_option("--context", o->context,
                 "tokens per sequence (default: the dump's, else 4096); sets group metadata")
      ->check(wholeNumberCheck(1, std::numeric_limits<int64_t>::max()));
  sub.add_option("--batch", o->batch, "sequences decoded together (default 1)")
      ->check(wholeNumberCheck(1, std::numeric_limits<int64_t>::max()));
  sub.add_flag("--decode", o->decode, "estimate the cost of one decode step");
  sub.add_option("--bandwidth", o->bandwidth, "memory bandwidth for --decode, e.g. 4.8TB/s");
  sub.add_option("--ops", o->ops, "dequantization op rate for --decode, e.g. 60Tops/s");
  sub.add_option("--device", o->device, "datasheet figures of h100, h200, a100, l4 or rtx4090");
  addOutputOption(sub, "--json", o->json, "write JSON to FILE ('-' = standard output)");
  return [o]() -> int {
    ResolvedPlans resolved;
    auto request = buildRequest(*o, resolved);
    if (!request) return fail(request.status());
    const KvShape shape{request->shape.headDim, request->shape.layers, request->shape.kvHeads};
    if (o->spec.explain) {
      std::cout << explainText(o->spec, resolved, shape);
      return kExitOk;
    }
    if (!o->spec.engine.empty()) printNotes(resolved);
    auto report = planCapacity(*request);
    if (!report) return fail(report.status());
    if (!o->json.empty()) {
      if (Status s = writeOutput(o->json, toJsonText(*report)); !s.isOk()) return fail(s);
      return kExitOk;  // like eval: text only when no JSON was asked for
    }
    std::cout << toText(*report);
    return kExitOk;
  };
};

const Registrar registrar{"capacity", "tokens that fit and decode cost of K/V specs against fp16",
                          setup};

}  // namespace
}  // namespace kvscope::cli
