// SPDX-License-Identifier: GPL-3.0-or-later
// Recordings to canonical dumps.
#include "core/io/dump_writer.h"
#include "core/model/record.h"

namespace kvscope {

Status writeRecording(const std::string& path, const Recording& rec, const Progress& progress) {
  if (rec.layers.empty()) return Status::internal("writeRecording: no layers");
  const LayerRecording& first = rec.layers.front();
  const int T = rec.tokenCount();
  DumpWriterOptions o;
  o.layers = static_cast<int>(rec.layers.size());
  o.kvHeads = static_cast<int>(first.key.heads);
  o.tokens = T;
  o.headDim = static_cast<int>(first.key.dim);
  o.heads = static_cast<int>(first.query.heads);
  o.queries = first.query.heads > 0 ? T : 0;
  o.keyPreRope = first.keyPreRope.heads > 0;
  o.withTokens = true;
  o.withTokenText = !rec.tokenText.empty();
  o.logitsVocab = rec.logits.empty() ? 0 : rec.vocabSize;
  o.dtype = DiskType::Float32;  // the replay compares logits to 1e-3: keep what the model computed
  o.model = rec.model;
  o.ropeTheta = rec.ropeTheta;
  o.ropeStyle = rec.ropeStyle;
  if (!rec.modelPath.empty()) o.stringAttributes["model_path"] = rec.modelPath;

  auto writer = DumpWriter::create(path, o);
  if (!writer) return writer.status();
  DumpWriter& w = **writer;
  for (size_t l = 0; l < rec.layers.size(); ++l) {
    const LayerRecording& lr = rec.layers[l];
    const int layer = static_cast<int>(l);
    KVS_RETURN_IF_ERROR(w.write(layer, TensorKind::Key, lr.key));
    KVS_RETURN_IF_ERROR(w.write(layer, TensorKind::Value, lr.value));
    if (o.keyPreRope) KVS_RETURN_IF_ERROR(w.write(layer, TensorKind::KeyPreRope, lr.keyPreRope));
    if (o.queries > 0) KVS_RETURN_IF_ERROR(w.write(layer, TensorKind::Query, lr.query));
    if (!report(progress, static_cast<double>(l + 1) / static_cast<double>(rec.layers.size()), "writing"))
      return Status::cancelled();
  }
  KVS_RETURN_IF_ERROR(w.writeTokens(std::vector<int64_t>(rec.tokens.begin(), rec.tokens.end())));
  if (o.withTokenText) KVS_RETURN_IF_ERROR(w.writeTokenText(rec.tokenText));
  if (o.logitsVocab > 0) KVS_RETURN_IF_ERROR(w.writeLogits(rec.logits));
  return w.finish();
}

}  // namespace kvscope
