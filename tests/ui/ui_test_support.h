// SPDX-License-Identifier: GPL-3.0-or-later
// What several GUI tests share: core's reconstruction computed independently of the window's
// workers, a view by its type, and opening a dump in the window and waiting until its views are drawn.
#pragma once

#include <QLineSeries>
#include <QSignalSpy>
#include <QString>
#include <QtTest>

#include <optional>
#include <string>
#include <vector>

#include "core/io/dump.h"
#include "core/quant/quantize.h"
#include "core/synth/synth.h"
#include "ui/main_window.h"
#include "ui/views/view.h"

namespace kvscope::test {

// A synthetic dump's shape (core/synth/synth.h), the other options at their defaults: layers,
// kv heads, query heads, tokens, queries, head dim, seed.
inline SynthOptions synthShape(int layers, int kvHeads, int heads, int tokens, int queries, int headDim, uint64_t seed) {
  SynthOptions o;
  o.layers = layers;
  o.kvHeads = kvHeads;
  o.heads = heads;
  o.tokens = tokens;
  o.queries = queries;
  o.headDim = headDim;
  o.seed = seed;
  return o;
}

// Bin counts of the step series the histogram draws (two points per bin).
inline std::vector<double> seriesCounts(QLineSeries* s) {
  std::vector<double> out;
  const QList<QPointF> points = s->points();
  for (qsizetype i = 0; i + 1 < points.size(); i += 2) out.push_back(points[i].y());
  return out;
}

// Core's reconstruction of one layer tensor, computed here independently of the GUI's workers.
inline Tensor3 coreReconstruction(const std::string& path, int layer, TensorKind kind, const QuantSpec& spec) {
  auto dump = Dump::open(path);
  if (!dump) qFatal("%s", dump.status().message().c_str());
  const DumpInfo& info = (*dump)->info();
  auto x = (*dump)->read(layer, kind);
  std::optional<Tensor3> pre;
  if (info.hasKeyPreRope && kind == TensorKind::Key) pre = *(*dump)->read(layer, TensorKind::KeyPreRope);
  QuantInput input{&*x, pre ? &*pre : nullptr, info.rope()};
  auto out = quantizeTensor(input, spec);
  if (!out) qFatal("%s", out.status().message().c_str());
  return out->reconstruction;
}

// Opens `path` in the window and waits (up to `waitMs` each) for the layer views and the drift.
inline void openAndWaitForViews(ui::MainWindow& w, const QString& path, int waitMs) {
  QSignalSpy layer(&w, &ui::MainWindow::layerReady);
  QSignalSpy drift(&w, &ui::MainWindow::driftReady);
  w.openDump(path);
  QVERIFY(layer.wait(waitMs));
  if (drift.isEmpty()) QVERIFY(drift.wait(waitMs));
}

}  // namespace kvscope::test

// The window's view of type V (the window itself knows its views by their interface only).
template <class V>
V* viewOf(const kvscope::ui::MainWindow& w) {
  auto* v = dynamic_cast<V*>(w.view(QString::fromLatin1(V::kName)));
  if (!v) qFatal("no view named %s", V::kName);
  return v;
}
