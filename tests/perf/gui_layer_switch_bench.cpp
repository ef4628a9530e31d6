// SPDX-License-Identifier: GPL-3.0-or-later
// GUI layer-switch benchmark (issue 17 item 4): opens a dump in the real MainWindow (offscreen
// unless a platform is chosen), then switches to the next layer N times and measures, for each
// switch, the time from the selection (what a click in the dataset tree or Page Down does) to the
// last repaint of a widget on the visible tab once the new layer's views are ready. A switch to a
// layer not in the window's layer cache reads its tensors (through the crash-isolated reader
// when kvscope-cli is at hand), so give the dump more layers than the switches to measure cold
// switches only. Not part of ctest.
//
//   kvscope-cli synth DUMP --layers 11 --kv-heads 8 --heads 32 --tokens 32768 --queries 64 --head-dim 128
//   kvscope_gui_layer_switch_bench --dump DUMP [--switches 10] [--tab 0] [--during-summary]
//   kvscope_gui_layer_switch_bench --dump DUMP --tensor-reads 7
//
// --tensor-reads N times N reads of layer 0's key in this process and N through the isolated
// reader (alternating; the reader started once, as an open dump has it) and prints the medians;
// then the same for kv head 0 of that key alone (Dump::readHeads, what a cold switch reads first);
// then kv head 0 of the value N times while another thread reads the whole key in a loop (what a
// switch meets while the layer summary reads).
//
// --during-summary switches while the layer summary (started by the open) is still running: each
// switch waits for every other lane to be idle but the summary and the fill lane (which, at the
// lowest priority, gets little CPU while the summary computes; the next switch cancels it).
//
// Per switch it also prints the layer worker's steps (computeViewData: quantize, heat map,
// histogram, attention row), the rest of "views ready" being the read; and when the drift view's
// series along query positions (its drift lane, after the row) arrived.
//
// kvscope-cli is found as the app finds it: $KVSCOPE_CLI (set here to the build's one when unset).
#include <QApplication>
#include <QElapsedTimer>
#include <QEventLoop>
#include <QStandardPaths>
#include <QTabWidget>
#include <QTimer>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/io/isolated_reader.h"
#include "core/quant/spec.h"
#include "ui/main_window.h"
#include "ui/workers/job_runner.h"

using namespace kvscope;
using namespace kvscope::ui;

namespace {

// Notes when a widget on the visible tab page last painted.
class PaintClock : public QApplication {
 public:
  using QApplication::QApplication;
  QWidget* page = nullptr;
  QElapsedTimer clock;
  qint64 lastPaintNs = -1;

  bool notify(QObject* receiver, QEvent* event) override {
    const bool result = QApplication::notify(receiver, event);
    if (event->type() == QEvent::Paint && page != nullptr) {
      auto* widget = qobject_cast<QWidget*>(receiver);
      if (widget != nullptr && (widget == page || page->isAncestorOf(widget))) lastPaintNs = clock.nsecsElapsed();
    }
    return result;
  }
};

bool waitUntil(const std::function<bool()>& done, int timeoutMs) {
  QElapsedTimer clock;
  clock.start();
  while (!done()) {
    if (clock.elapsed() > timeoutMs) return false;
    QEventLoop loop;
    QTimer::singleShot(1, &loop, &QEventLoop::quit);
    loop.exec();
  }
  return true;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

int usage() {
  std::fprintf(stderr, "usage: kvscope_gui_layer_switch_bench --dump FILE [--switches N] [--tab 0..4] "
                       "[--during-summary] [--tensor-reads N]\n");
  return 2;
}

int timeTensorReads(const std::string& path, int n) {
  auto local = Dump::open(path);
  OpenOptions options;
  options.isolation.executable = qEnvironmentVariable("KVSCOPE_CLI").toStdString();
  auto remote = Dump::open(path, options);
  if (!local || !remote) {
    std::fprintf(stderr, "%s\n", (local ? remote.status() : local.status()).message().c_str());
    return 1;
  }
  for (const bool oneHead : {false, true}) {
    std::vector<double> inProcess, isolated;
    size_t bytes = 0;
    for (int i = 0; i < n; ++i) {
      for (const Dump* d : {local->get(), remote->get()}) {
        QElapsedTimer clock;
        clock.start();
        auto t = oneHead ? d->readHeads(0, TensorKind::Key, 0, 1) : d->read(0, TensorKind::Key);
        const double ms = static_cast<double>(clock.nsecsElapsed()) / 1e6;
        if (!t) {
          std::fprintf(stderr, "%s\n", t.status().message().c_str());
          return 1;
        }
        bytes = t->data.size() * sizeof(float);
        (d == local->get() ? inProcess : isolated).push_back(ms);
      }
    }
    std::printf("layer 0 key%s, %.0f MiB as float32, %d reads each: in-process median %.1f ms (min %.1f), "
                "through the reader median %.1f ms (min %.1f)\n",
                oneHead ? ", kv head 0 only" : "", static_cast<double>(bytes) / (1 << 20), n, median(inProcess),
                *std::min_element(inProcess.begin(), inProcess.end()), median(isolated),
                *std::min_element(isolated.begin(), isolated.end()));
  }
  // What a layer switch meets while the layer summary reads: kv head 0 of layer 0's value through
  // the reader while another thread reads the whole key again and again. A whole read larger than
  // kReadPieceBytes takes one turn per piece, so the head read waits for one piece at most; with
  // no pieces (one request per tensor) it waits for the whole read in progress.
  auto reader = IsolatedReader::start(path, options);
  if (!reader) {
    std::fprintf(stderr, "%s\n", reader.status().message().c_str());
    return 1;
  }
  for (const int64_t piece : {std::numeric_limits<int64_t>::max(), kReadPieceBytes}) {
    (*reader)->setReadPieceBytes(piece);
    std::vector<double> whole;  // the whole key alone, as this piece size serves it
    for (int i = 0; i < n; ++i) {
      QElapsedTimer clock;
      clock.start();
      if (!(*reader)->read(0, TensorKind::Key, 0)) break;
      whole.push_back(static_cast<double>(clock.nsecsElapsed()) / 1e6);
    }
    std::atomic<bool> stop{false};
    std::atomic<int> backgroundReads{0};
    std::thread background([&] {
      while (!stop.load()) {
        if (!(*reader)->read(0, TensorKind::Key, 0)) break;
        backgroundReads.fetch_add(1);
      }
    });
    std::mt19937 rng(1);
    std::vector<double> waits;
    for (int i = 0; i < n; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20 + rng() % 200));
      QElapsedTimer clock;
      clock.start();
      auto t = (*reader)->readHeads(0, TensorKind::Value, 0, 1, 0);
      waits.push_back(static_cast<double>(clock.nsecsElapsed()) / 1e6);
      if (!t) {
        std::fprintf(stderr, "%s\n", t.status().message().c_str());
        break;
      }
    }
    stop.store(true);
    background.join();
    const std::string pieces = piece == std::numeric_limits<int64_t>::max()
                                   ? std::string("one request per tensor")
                                   : "pieces of at most " + std::to_string(piece >> 20) + " MiB";
    std::printf("%s: the whole key alone median %.1f ms; kv head 0 of the value while another thread reads the "
                "whole key (%d whole reads): median %.1f ms, max %.1f ms over %zu reads\n",
                pieces.c_str(), median(whole), backgroundReads.load(), median(waits),
                waits.empty() ? 0.0 : *std::max_element(waits.begin(), waits.end()), waits.size());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
  if (qEnvironmentVariableIsEmpty("KVSCOPE_CLI")) qputenv("KVSCOPE_CLI", KVSCOPE_CLI_PATH);
  keepFreedMemoryForReuse();  // as the app's main does
  PaintClock app(argc, argv);
  QStandardPaths::setTestModeEnabled(true);  // leave the user's settings and recent files alone
  std::string dump;
  int switches = 10, tab = 0, tensorReads = 0;
  bool duringSummary = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool hasValue = i + 1 < argc;
    if (a == "--dump" && hasValue) dump = argv[++i];
    else if (a == "--switches" && hasValue) switches = std::atoi(argv[++i]);
    else if (a == "--tab" && hasValue) tab = std::atoi(argv[++i]);
    else if (a == "--tensor-reads" && hasValue) tensorReads = std::atoi(argv[++i]);
    else if (a == "--during-summary") duringSummary = true;
    else return usage();
  }
  if (dump.empty() || switches < 1 || tab < 0 || tab > 4) return usage();
  if (tensorReads > 0) return timeTensorReads(dump, tensorReads);

  MainWindow w(false);
  w.resize(1400, 900);
  w.show();
  w.setSpecs(*parseSpec("int4,axis=channel,group=32,residual=128"), *parseSpec("int2,axis=token,group=32,residual=128"));
  w.showTab(tab);
  bool layerReady = false;
  QObject::connect(&w, &MainWindow::layerReady, [&] { layerReady = true; });
  qint64 driftNs = -1;
  QObject::connect(&w, &MainWindow::driftReady, [&] { driftNs = app.clock.nsecsElapsed(); });
  app.clock.start();
  w.openDump(QString::fromStdString(dump));
  if (!waitUntil([&] { return layerReady; }, 600000)) {
    std::fprintf(stderr, "the dump did not open: %s\n", w.lastError().toLocal8Bit().constData());
    return 1;
  }
  const DumpInfo& info = w.dump()->info();
  std::printf("dump: %s L=%d KVH=%d H=%d T=%d Tq=%d D=%d %s; opened, first views in %.2f s\n", dump.c_str(),
              info.layers, info.kvHeads, info.heads, info.tokens, info.queries, info.headDim, info.dtype.c_str(),
              static_cast<double>(app.clock.nsecsElapsed()) / 1e9);
  std::printf("reads: %s\n", qEnvironmentVariable("KVSCOPE_ISOLATE_READS") == QStringLiteral("0")
                                 ? "in-process (KVSCOPE_ISOLATE_READS=0)"
                                 : "through kvscope-cli");
  auto* tabs = w.findChild<QTabWidget*>();
  app.page = tabs != nullptr ? tabs->currentWidget() : nullptr;
  // --during-summary: each switch waits for every lane but the layer summary's, which is still
  // reading and evaluating whole layers (the switch's head reads share the reader with it).
  JobRunner* summary = nullptr;
  JobRunner* fill = nullptr;
  for (JobRunner* r : w.findChildren<JobRunner*>()) {
    if (r->name() == QStringLiteral("layer summary")) summary = r;
    if (r->name() == QStringLiteral("reading layer")) fill = r;
  }
  if (duringSummary && summary == nullptr) {
    std::fprintf(stderr, "no layer summary lane\n");
    return 1;
  }
  const auto settled = [&] {
    if (!duringSummary) return !w.busy();
    for (JobRunner* r : w.findChildren<JobRunner*>())
      if (r != summary && r != fill && r->busy()) return false;
    return true;
  };
  waitUntil(settled, 600000);

  std::vector<double> all, cold;
  std::vector<bool> seen(static_cast<size_t>(info.layers), false);
  seen[0] = true;
  int layer = 0;
  for (int i = 0; i < switches; ++i) {
    if (duringSummary && !summary->busy()) {
      std::printf("the layer summary finished after %d switches\n", i);
      break;
    }
    layer = (layer + 1) % info.layers;
    const bool isCold = !seen[static_cast<size_t>(layer)];
    seen[static_cast<size_t>(layer)] = true;
    layerReady = false;
    driftNs = -1;
    const qint64 clickNs = app.clock.nsecsElapsed();
    w.select(layer, w.selection().kvHead);
    if (!waitUntil([&] { return layerReady && w.layerQuant() && w.layerQuant()->tensors->layer == layer; }, 600000)) {
      std::fprintf(stderr, "layer %d did not show: %s\n", layer, w.lastError().toLocal8Bit().constData());
      return 1;
    }
    // The views repaint after the result arrives; wait until the page has been still for 200 ms.
    const qint64 readyNs = app.clock.nsecsElapsed();
    app.lastPaintNs = -1;
    waitUntil([&] {
      const qint64 now = app.clock.nsecsElapsed();
      const qint64 last = std::max(app.lastPaintNs, readyNs);
      return now - last > 200000000;
    }, 10000);
    const qint64 endNs = std::max(app.lastPaintNs, readyNs);
    const double ms = static_cast<double>(endNs - clickNs) / 1e6;
    all.push_back(ms);
    if (isCold) cold.push_back(ms);
    std::string steps;
    double computeMs = 0;
    for (const ViewStep& step : w.layerQuant()->steps) {
      computeMs += step.seconds * 1e3;
      char part[96];
      std::snprintf(part, sizeof part, "%s%s %.1f", steps.empty() ? "" : ", ", step.name.c_str(), step.seconds * 1e3);
      steps += part;
    }
    const bool partial = !w.layerQuant()->tensors->whole();
    std::printf("switch %2d -> layer %2d (%s%s): %7.1f ms to the last repaint (views ready at %.1f ms; %s read; "
                "view data %.1f ms: %s)\n",
                i + 1, layer, isCold ? "cold" : "cached", duringSummary && summary->busy() ? ", summary running" : "", ms, static_cast<double>(readyNs - clickNs) / 1e6,
                partial ? "one kv head" : "whole layer", computeMs, steps.c_str());
    std::fflush(stdout);
    waitUntil(settled, 600000);
    if (driftNs > 0)
      std::printf("           drift series at %.1f ms; every lane idle (the rest of the layer read) at %.1f ms\n",
                  static_cast<double>(driftNs - clickNs) / 1e6,
                  static_cast<double>(app.clock.nsecsElapsed() - clickNs) / 1e6);
  }
  std::printf("median of %zu switches: %.1f ms; of the %zu cold ones: %.1f ms\n", all.size(), median(all),
              cold.size(), median(cold));
  w.close();
  return 0;
}
