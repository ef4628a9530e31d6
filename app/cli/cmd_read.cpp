// SPDX-License-Identifier: GPL-3.0-or-later
// `kvscope-cli read DUMP --layer L --tensor KIND --out FILE`: one layer tensor as raw float32, for
// programs that must not parse an untrusted dump in their own process (the read is served by the
// crash-isolated reader, so a crafted chunk index that crashes libhdf5 is exit 2). With --spec SPEC
// it writes the tensor's reconstruction under that spec instead (quantization.md §1; what eval
// compares with the original).
#include <iostream>
#include <optional>
#include <string>
#include <string_view>

#include "app/cli/command.h"
#include "core/command/tensor_spec.h"
#include "core/quant/quantize.h"
#include "core/util/atomic_file.h"

namespace kvscope::cli {
namespace {

Expected<TensorKind> parseKind(const std::string& text) {
  for (TensorKind k : {TensorKind::Key, TensorKind::Value, TensorKind::Query, TensorKind::KeyPreRope}) {
    if (text == tensorKindName(k)) return k;
  }
  return Status::invalidArgument("--tensor must be key, value, query or key_pre_rope, got '" + text + "'");
}

/// `tensor` (layer `layer` of `kind`) quantized and reconstructed under --spec.
Expected<Tensor3> reconstruction(const Dump& dump, TensorKind kind, int layer, int sequence, const std::string& text,
                                 const Tensor3& tensor) {
  if (kind != TensorKind::Key && kind != TensorKind::Value) {
    return Status::invalidArgument("--spec: only key and value are quantized, not " +
                                   std::string(tensorKindName(kind)));
  }
  const DumpInfo& info = dump.info();
  auto plan = parsePlan(text);
  if (!plan) return plan.status().withContext("--spec");
  const SpecContext context{kind == TensorKind::Key, info.kvHeads, info.headDim, info.hasKeyPreRope};
  auto spec = tensorSpec(*plan, layer, info.layers, context);
  if (!spec) return spec.status().withContext("--spec");
  std::optional<Tensor3> pre;
  if (spec->prerope) {
    auto p = dump.read(layer, TensorKind::KeyPreRope, sequence);
    if (!p) return p.status();
    pre = std::move(*p);
  }
  QuantInput input{&tensor, pre ? &*pre : nullptr, info.rope()};
  auto out = quantizeTensor(input, *spec, cancellationProgress());
  if (!out) return out.status();
  return std::move(out->reconstruction);
}

std::function<int()> setupRead(CLI::App& sub) {
  struct Args {
    std::string dump, mapping, tensor = "key", out, spec;
    int layer = 0, sequence = 0;
    bool allowExternal = false;
  };
  auto a = std::make_shared<Args>();
  addInputOption(sub, "dump", a->dump, "Dump file (.h5)")->required();
  sub.add_option("--layer", a->layer, "Layer index")->required();
  sub.add_option("--tensor", a->tensor, "key, value, query or key_pre_rope (default key)");
  sub.add_option("--sequence", a->sequence, "Sequence (batch index, default 0)");
  addOutputOption(sub, "--out", a->out,
                 "Where to write the tensor: float32, native byte order, [heads, tokens, dim] "
                 "row-major, written atomically; its shape goes to standard output as 'H T D'",
                  false)
      ->required();
  sub.add_option("--spec", a->spec,
                 "Write the reconstruction under this spec or plan (key or value; a plan's spec for --layer)");
  addInputOption(sub, "--mapping", a->mapping, "Mapping file (JSON) for a non-canonical file");
  sub.add_flag("--allow-external", a->allowExternal,
               "Follow external links, external raw storage, virtual datasets");
  return [a]() -> int {
    auto kind = parseKind(a->tensor);
    if (!kind) return fail(kind.status());
    auto opened = openDump(a->dump, a->mapping, a->allowExternal);
    if (!opened) return fail(opened.status());
    auto t = (*opened)->read(a->layer, *kind, a->sequence);
    if (!t) return fail(t.status());
    if (!a->spec.empty()) {
      auto r = reconstruction(**opened, *kind, a->layer, a->sequence, a->spec, *t);
      if (!r) return fail(r.status());
      *t = std::move(*r);
    }
    const std::string_view bytes(reinterpret_cast<const char*>(t->data.data()), t->data.size() * sizeof(float));
    if (Status st = writeFileAtomic(a->out, bytes); !st.isOk()) return fail(st);
    std::cout << t->heads << " " << t->tokens << " " << t->dim << "\n";
    return kExitOk;
  };
}

const Registrar kRegistrar{
    "read", "Write one layer tensor as raw float32 (read through the crash-isolated reader)", setupRead};

}  // namespace
}  // namespace kvscope::cli
