// SPDX-License-Identifier: GPL-3.0-or-later
// GUI stall benchmark (issue #6): opens a synthetic dump in the real MainWindow (offscreen unless
// a platform is chosen), drags the K bits slider — 60 value changes 30 ms apart — and measures
// how long the GUI thread's event loop goes without running: a 1 ms heartbeat timer records the
// gap between consecutive ticks. Reports the largest gap, the 99th percentile, the gaps over
// 16 ms, and the time from the last change until the visible views show the final spec (the
// layer lane's result) and until the drift series arrives. Not part of ctest.
// Every gap over 16 ms is itemized: the GUI thread's CPU time in it, how often it slept and was
// preempted, its page faults, its time off the CPU inside event handlers (waiting for a lock or
// for Qt's fill threads, or for a core), its time runnable outside them (waiting for a core,
// from the scheduler's statistics), the rest (asleep in its event loop, so its timer woke it
// late), and how much of the gap a real-time watcher thread (which only sleeps 1 ms at a time)
// slept through as well: that part is the machine not running the process at all (on a VM, the
// host not running its vCPUs), and the steal time /proc/stat credited to the GUI thread's vCPU
// (the host running something else on that vCPU alone; the watcher, on the other, runs on).
// "vCPU stolen" counts the gaps still over 16 ms without the watcher's part that the steal time
// explains, "own >16ms" the rest (the blame rule is in main).
//
//   kvscope_gui_stall_bench [--tokens 32768] [--layers 2] [--changes 60] [--interval-ms 30]
//                           [--tabs 0,1,2] [--temp-dir DIR]
#include <QApplication>
#include <QComboBox>
#include <QElapsedTimer>
#include <QEventLoop>
#include <QGraphicsScene>
#include <QGraphicsView>
#include <QSlider>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTimer>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <ctime>
#include <map>
#include <mutex>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include "core/quant/spec.h"
#include "core/synth/synth.h"
#include "ui/main_window.h"
#include "ui/widgets/spec_panel.h"

using namespace kvscope;
using namespace kvscope::ui;

namespace {

// The calling thread's context switches (voluntary: it waited for something; involuntary: it
// was preempted), minor page faults, and time spent runnable but waiting for a core (the
// scheduler's run-queue wait, /proc/thread-self/schedstat; 0 where the kernel lacks schedstats)
// so far.
struct ThreadWaits {
  long voluntary = 0, involuntary = 0, faults = 0;
  int64_t runnableNs = 0;
};
int64_t runQueueWaitNs() {
  // One descriptor per thread: reading from offset 0 regenerates the line.
  static thread_local const int fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
  char line[96] = {};
  if (fd < 0 || pread(fd, line, sizeof line - 1, 0) <= 0) return 0;
  unsigned long long onCpu = 0, waiting = 0;
  return std::sscanf(line, "%llu %llu", &onCpu, &waiting) == 2 ? static_cast<int64_t>(waiting) : 0;
}
ThreadWaits threadWaits() {
  rusage u{};
  getrusage(RUSAGE_THREAD, &u);
  return {u.ru_nvcsw, u.ru_nivcsw, u.ru_minflt, runQueueWaitNs()};
}
// What happened between two readings.
ThreadWaits operator-(const ThreadWaits& later, const ThreadWaits& earlier) {
  return {later.voluntary - earlier.voluntary, later.involuntary - earlier.involuntary, later.faults - earlier.faults,
          later.runnableNs - earlier.runnableNs};
}

double threadCpuMs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return 1e3 * static_cast<double>(ts.tv_sec) + 1e-6 * static_cast<double>(ts.tv_nsec);
}

// Times every event the GUI thread delivers, so that a stall can be blamed on its receiver: the
// wall time includes being descheduled on a loaded machine, the thread CPU time does not.
class TimedApplication : public QApplication {
 public:
  using QApplication::QApplication;
  struct Slow {
    double wallMs = 0, cpuMs = 0;
    ThreadWaits waits;  // during the event
    QString what;
  };
  bool recording = false;
  std::vector<Slow> slow;
  // Over every event while recording: the GUI thread's sleeps inside event handlers (a handler
  // waiting for a lock or for helper threads, such as Qt's raster engine splitting a large fill
  // over its GUI thread pool) and its time off the CPU in them (those sleeps plus preemption).
  long waitsInEvents = 0;
  double offCpuMs = 0;
  // Of that off-CPU time, how long the thread was runnable but waiting for a core.
  int64_t runnableInEventsNs = 0;

  bool notify(QObject* receiver, QEvent* event) override {
    if (!recording || depth_ > 0) return QApplication::notify(receiver, event);
    ++depth_;
    QElapsedTimer clock;
    clock.start();
    const double cpu0 = threadCpuMs();
    const ThreadWaits waits0 = threadWaits();
    const bool result = QApplication::notify(receiver, event);
    const double wall = static_cast<double>(clock.nsecsElapsed()) / 1e6;
    --depth_;
    const double cpu = threadCpuMs() - cpu0;
    const ThreadWaits during = threadWaits() - waits0;
    waitsInEvents += during.voluntary;
    offCpuMs += std::max(0.0, wall - cpu);
    runnableInEventsNs += during.runnableNs;
    if (wall > 8.0) {
      // A chart's scene says little; name the view that shows it.
      QString owner = receiver->objectName();
      if (auto* scene = qobject_cast<QGraphicsScene*>(receiver); scene && !scene->views().isEmpty()) {
        for (QWidget* w = scene->views().front(); w; w = w->parentWidget()) {
          const QString name = QString::fromLatin1(w->metaObject()->className());
          if (name.startsWith(QStringLiteral("kvscope::"))) {
            owner = name;
            break;
          }
        }
      }
      slow.push_back({wall, cpu, during,
                      QStringLiteral("%1 (%2) event %3")
                          .arg(QString::fromLatin1(receiver->metaObject()->className()), owner)
                          .arg(static_cast<int>(event->type()))});
    }
    return result;
  }

 private:
  int depth_ = 0;
};

struct Options {
  int tokens = 32768;
  int layers = 2;
  int changes = 60;
  int intervalMs = 30;
  std::vector<int> tabs = {0, 1, 2};
  QString tempDir;
};

// Runs the event loop until `done` holds or `timeoutMs` passes; false on timeout.
bool waitUntil(const std::function<bool()>& done, int timeoutMs) {
  QElapsedTimer clock;
  clock.start();
  while (!done()) {
    if (clock.elapsed() > timeoutMs) return false;
    QEventLoop loop;
    QTimer::singleShot(5, &loop, &QEventLoop::quit);
    loop.exec();
  }
  return true;
}

int64_t steadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// A thread that does nothing but sleep 1 ms at a time, at real-time priority where the system
// allows it, and notes every time it woke more than 8 ms late. A GUI gap that this thread slept
// through as well was the whole machine not running us (on a VM: the host not running its
// vCPUs), not the GUI thread's own work nor kvscope's workers taking its core: a real-time
// thread preempts them at once.
class Watcher {
 public:
  Watcher() {
    thread_ = std::thread([this] {
      sched_param param{};
      param.sched_priority = 1;
      realtime_ = pthread_setschedparam(pthread_self(), SCHED_FIFO, &param) == 0;
      started_ = true;
      const int stat = open("/proc/stat", O_RDONLY | O_CLOEXEC);
      int64_t last = steadyNs();
      for (long wake = 0; !stop_.load(); ++wake) {
        timespec ts{0, 1000000};
        clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, nullptr);
        const int64_t now = steadyNs();
        const std::lock_guard<std::mutex> lock(mutex_);
        if (now - last > 8000000) missed_.emplace_back(last, now);
        if (wake % 2 == 0 && stat >= 0) stealSamples_.push_back({now, readSteal(stat)});
        last = now;
      }
      if (stat >= 0) close(stat);
    });
    while (!started_.load()) std::this_thread::yield();
  }
  ~Watcher() {
    stop_ = true;
    thread_.join();
  }
  bool realtime() const { return realtime_; }
  // How much steal time (the hypervisor running something else while this vCPU wanted to run)
  // /proc/stat credited to `cpu` over [from, to] (steady ns), in its 10 ms units: a delay of d ms
  // shows as d/10 rounded either way. -1 when unknown.
  long stealTicksWithin(int cpu, int64_t from, int64_t to) {
    const std::lock_guard<std::mutex> lock(mutex_);
    const StealSample* before = nullptr;
    const StealSample* after = nullptr;
    for (const auto& sample : stealSamples_) {
      if (sample.atNs <= from) before = &sample;
      if (sample.atNs >= to) {
        after = &sample;
        break;
      }
    }
    if (before == nullptr || after == nullptr || cpu < 0 || static_cast<size_t>(cpu) >= before->ticks.size() ||
        static_cast<size_t>(cpu) >= after->ticks.size()) {
      return -1;
    }
    return static_cast<long>(after->ticks[static_cast<size_t>(cpu)] - before->ticks[static_cast<size_t>(cpu)]);
  }
  // How many ms of [from, to] (steady ns) the watcher slept through.
  double missedWithin(int64_t from, int64_t to) {
    const std::lock_guard<std::mutex> lock(mutex_);
    int64_t overlap = 0;
    for (const auto& [a, b] : missed_) overlap += std::max<int64_t>(0, std::min(b, to) - std::max(a, from));
    return static_cast<double>(overlap) / 1e6;
  }

 private:
  std::thread thread_;
  std::atomic<bool> stop_{false}, started_{false};
  bool realtime_ = false;
  struct StealSample {
    int64_t atNs = 0;
    std::vector<unsigned long long> ticks;  // per cpu
  };
  // The steal field of every "cpuN" line of /proc/stat.
  static std::vector<unsigned long long> readSteal(int fd) {
    std::vector<unsigned long long> ticks;
    static char text[1 << 16];  // only the watcher thread reads; room for hundreds of cpus
    const ssize_t n = pread(fd, text, sizeof text - 1, 0);
    if (n <= 0) return ticks;
    text[n] = '\0';
    for (char* line = std::strstr(text, "\ncpu"); line != nullptr; line = std::strstr(line + 1, "\ncpu")) {
      unsigned cpu = 0;
      unsigned long long f[8] = {};
      if (std::sscanf(line + 1, "cpu%u %llu %llu %llu %llu %llu %llu %llu %llu", &cpu, &f[0], &f[1], &f[2], &f[3],
                      &f[4], &f[5], &f[6], &f[7]) != 9) {
        break;
      }
      if (cpu != ticks.size()) break;
      ticks.push_back(f[7]);
    }
    return ticks;
  }
  std::mutex mutex_;
  std::vector<std::pair<int64_t, int64_t>> missed_;
  std::vector<StealSample> stealSamples_;
};

// Gaps between consecutive heartbeat ticks, in milliseconds.
class Heartbeat {
 public:
  explicit Heartbeat(const TimedApplication& app) : app_(app) {
    timer_.setTimerType(Qt::PreciseTimer);
    timer_.setInterval(1);
    QObject::connect(&timer_, &QTimer::timeout, [this] {
      const int64_t now = steadyNs();
      const double cpu = threadCpuMs();
      const ThreadWaits waits = threadWaits();
      const double inEventsOffCpu = app_.offCpuMs;
      const int cpuId = sched_getcpu();
      const int64_t inEventsRunnable = app_.runnableInEventsNs;
      if (last_ >= 0) {
        const double gap = static_cast<double>(now - last_) / 1e6;
        gaps_.push_back(gap);
        if (gap > 16.0) {
          const ThreadWaits during = waits - lastWaits_;
          const double runnableOutside =
              static_cast<double>(during.runnableNs - (inEventsRunnable - lastInEventsRunnable_)) / 1e6;
          long_.push_back({last_, now, gap, cpu - lastCpu_, during, inEventsOffCpu - lastInEventsOffCpu_,
                           std::max(0.0, runnableOutside), lastCpuId_, cpuId});
        }
      }
      last_ = now;
      lastCpu_ = cpu;
      lastWaits_ = waits;
      lastInEventsOffCpu_ = inEventsOffCpu;
      lastInEventsRunnable_ = inEventsRunnable;
      lastCpuId_ = cpuId;
    });
  }
  // A gap over 16 ms: when (steady ns), its wall and GUI-thread CPU time, what the thread
  // waited for, its time off the CPU inside event handlers (blocked or runnable) and its time
  // runnable outside them.
  struct Gap {
    int64_t fromNs = 0, toNs = 0;
    double wallMs = 0, cpuMs = 0;
    ThreadWaits waits;
    double inEventsOffCpuMs = 0, runnableOutsideMs = 0;
    int cpuBefore = -1, cpuAfter = -1;  // where the GUI thread ran at the ticks around the gap
    // The part of the gap the GUI thread was working, waiting for a core or inside a handler;
    // the rest it slept in its event loop, past its 1 ms timer.
    double busyMs() const { return cpuMs + inEventsOffCpuMs + runnableOutsideMs; }
  };
  const std::vector<Gap>& longGaps() const { return long_; }
  void start() {
    gaps_.clear();
    long_.clear();
    last_ = -1;
    timer_.start();
  }
  std::vector<double> stop() {
    timer_.stop();
    return gaps_;
  }

 private:
  const TimedApplication& app_;
  QTimer timer_;
  int64_t last_ = -1;
  double lastCpu_ = 0, lastInEventsOffCpu_ = 0;
  int64_t lastInEventsRunnable_ = 0;
  int lastCpuId_ = -1;
  ThreadWaits lastWaits_;
  std::vector<double> gaps_;
  std::vector<Gap> long_;
};

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto i = static_cast<size_t>(std::min<double>(static_cast<double>(v.size() - 1), p * static_cast<double>(v.size())));
  return v[i];
}

int usage() {
  std::fprintf(stderr, "usage: kvscope_gui_stall_bench [--tokens T] [--layers L] [--changes N] [--interval-ms MS] "
                       "[--tabs 0,1,2] [--temp-dir DIR]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
  keepFreedMemoryForReuse();  // as the app's main does
  TimedApplication app(argc, argv);
  QStandardPaths::setTestModeEnabled(true);  // leave the user's settings and recent files alone
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool hasValue = i + 1 < argc;
    if (a == "--tokens" && hasValue) options.tokens = std::atoi(argv[++i]);
    else if (a == "--layers" && hasValue) options.layers = std::atoi(argv[++i]);
    else if (a == "--changes" && hasValue) options.changes = std::atoi(argv[++i]);
    else if (a == "--interval-ms" && hasValue) options.intervalMs = std::atoi(argv[++i]);
    else if (a == "--temp-dir" && hasValue) options.tempDir = QString::fromLocal8Bit(argv[++i]);
    else if (a == "--tabs" && hasValue) {
      options.tabs.clear();
      for (const QString& t : QString::fromLocal8Bit(argv[++i]).split(QLatin1Char(','))) options.tabs.push_back(t.toInt());
    } else {
      return usage();
    }
  }
  if (options.tokens < 256 || options.layers < 1 || options.changes < 1 || options.intervalMs < 1) return usage();

  // The dump: the shape (KVH=8, H=32, Tq=64, D=128) at T tokens, deleted at exit.
  QTemporaryDir dir(options.tempDir.isEmpty() ? QDir::tempPath() + QStringLiteral("/kvscope-stall-XXXXXX")
                                              : options.tempDir + QStringLiteral("/kvscope-stall-XXXXXX"));
  if (!dir.isValid()) {
    std::fprintf(stderr, "cannot create a temporary folder\n");
    return 1;
  }
  SynthOptions synth;
  synth.layers = options.layers;
  synth.kvHeads = 8;
  synth.heads = 32;
  synth.tokens = options.tokens;
  synth.queries = 64;
  synth.headDim = 128;
  const std::string path = dir.filePath(QStringLiteral("stall.h5")).toStdString();
  QElapsedTimer clock;
  clock.start();
  if (Status s = writeSynthDump(path, synth); !s.isOk()) {
    std::fprintf(stderr, "%s\n", s.message().c_str());
    return 1;
  }
  std::printf("dump: L=%d KVH=8 H=32 T=%d Tq=64 D=128 written in %.1f s\n", options.layers, options.tokens,
              clock.elapsed() / 1000.0);

  MainWindow w(false);
  w.resize(1400, 900);
  w.show();
  w.setSpecs(*parseSpec("int4,axis=channel,group=32,residual=128"), *parseSpec("int2,axis=token,group=32,residual=128"));
  bool layerReady = false, driftReady = false;
  QObject::connect(&w, &MainWindow::layerReady, [&] { layerReady = true; });
  QObject::connect(&w, &MainWindow::driftReady, [&] { driftReady = true; });
  clock.restart();
  w.openDump(QString::fromStdString(path));
  if (!waitUntil([&] { return layerReady && driftReady; }, 600000)) {
    std::fprintf(stderr, "the dump did not open: %s\n", w.lastError().toLocal8Bit().constData());
    return 1;
  }
  std::printf("opened, first views and drift series in %.2f s\n", clock.elapsed() / 1000.0);
  std::printf("drag: %d changes of the K bits slider, %d ms apart; heartbeat 1 ms\n\n", options.changes,
              options.intervalMs);
  Watcher watcher;
  std::printf("watcher thread: %s\n\n", watcher.realtime() ? "SCHED_FIFO (real-time)"
                                                          : "normal priority (no permission for SCHED_FIFO)");
  std::printf("%-10s %10s %10s %10s %12s %12s %12s %16s %16s %14s %14s %12s %12s\n", "tab", "max ms", "p99 ms",
              "p50 ms", "gaps >16ms", "vCPU stolen", "own >16ms", "views ready ms", "drift ready ms", "event waits", "off-CPU ms", "GUI CPU ms",
              "GUI faults");

  const char* tabNames[] = {"histogram", "heat map", "drift", "summary", "budget"};
  QSlider* bits = w.keyPanel()->bitsSlider();
  int round = -1;
  for (int tab : options.tabs) {
    if (tab < 0 || tab > 4) continue;
    ++round;
    w.showTab(tab);
    // Let the summary and everything from the previous round finish first.
    waitUntil([&] { return !w.busy(); }, 600000);
    Heartbeat heartbeat(app);
    heartbeat.start();
    const double roundCpu0 = threadCpuMs();
    const ThreadWaits roundWaits0 = threadWaits();
    int done = 0;
    int finalBits = 0;
    qint64 lastChangeNs = 0;
    QElapsedTimer run;
    run.start();
    QTimer drag;
    drag.setTimerType(Qt::PreciseTimer);
    drag.setInterval(options.intervalMs);
    QObject::connect(&drag, &QTimer::timeout, [&] {
      // Back and forth over 2…8 bits, as a hand dragging the slider does.
      // Each round ends on its own value (3, 5, 7 bits for the first three), so that the last
      // change always asks for a setting the views do not show yet.
      const int step = (done + 4 * round) % 12;
      finalBits = 2 + (step < 6 ? step : 12 - step);
      bits->setValue(finalBits);
      lastChangeNs = run.nsecsElapsed();
      if (++done == options.changes) drag.stop();
    });
    layerReady = driftReady = false;
    app.slow.clear();
    app.waitsInEvents = 0;
    app.offCpuMs = 0;
    app.runnableInEventsNs = 0;
    app.recording = true;
    drag.start();
    const bool viewsOk = waitUntil(
        [&] {
          return done == options.changes && layerReady && w.layerQuant() && w.layerQuant()->keySpec.bits == finalBits;
        },
        600000);
    const double viewsMs = static_cast<double>(run.nsecsElapsed() - lastChangeNs) / 1e6;
    const bool driftOk = waitUntil([&] { return driftReady; }, 600000);
    const double driftMs = static_cast<double>(run.nsecsElapsed() - lastChangeNs) / 1e6;
    const std::vector<double> gaps = heartbeat.stop();
    const double roundCpu = threadCpuMs() - roundCpu0;
    const long roundFaults = (threadWaits() - roundWaits0).faults;
    app.recording = false;
    const auto over = std::count_if(gaps.begin(), gaps.end(), [](double g) { return g > 16.0; });
    // Whom each gap is blamed on. The machine: the watcher slept through so much of it that less
    // than 16 ms is left. The GUI thread's vCPU: the hypervisor credited that vCPU with steal
    // time during the gap, and the thread was neither working nor inside a handler for 16 ms of
    // it (it slept in its event loop or sat runnable while its vCPU was not running). Ours: the
    // rest.
    std::vector<double> missed;
    std::vector<long> stealBefore, stealAfter;
    std::vector<const char*> blame;
    long own = 0, stolen = 0;
    for (const auto& g : heartbeat.longGaps()) {
      missed.push_back(watcher.missedWithin(g.fromNs, g.toNs));
      stealBefore.push_back(watcher.stealTicksWithin(g.cpuBefore, g.fromNs, g.toNs));
      stealAfter.push_back(g.cpuAfter == g.cpuBefore ? stealBefore.back()
                                                      : watcher.stealTicksWithin(g.cpuAfter, g.fromNs, g.toNs));
      if (g.wallMs - missed.back() <= 16.0) {
        blame.push_back("the machine stopped");
      } else if (std::max(stealBefore.back(), stealAfter.back()) > 0 && g.cpuMs + g.inEventsOffCpuMs <= 16.0) {
        blame.push_back("its vCPU was stolen");
        ++stolen;
      } else {
        blame.push_back("ours");
        ++own;
      }
    }
    std::printf("%-10s %10.1f %10.1f %10.1f %12ld %12ld %12ld %16.0f %16.0f %14ld %14.1f %12.1f %12ld%s\n",
                tabNames[tab], gaps.empty() ? 0.0 : *std::max_element(gaps.begin(), gaps.end()),
                percentile(gaps, 0.99), percentile(gaps, 0.50), static_cast<long>(over), stolen, own, viewsOk ? viewsMs : -1.0,
                driftOk ? driftMs : -1.0, app.waitsInEvents, app.offCpuMs, roundCpu, roundFaults,
                viewsOk && driftOk ? "" : "  (timed out)");
    // The GUI thread's slowest events of the round (wall ms / thread CPU ms).
    std::sort(app.slow.begin(), app.slow.end(), [](const auto& a, const auto& b) { return a.wallMs > b.wallMs; });
    for (size_t i = 0; i < app.slow.size() && i < 4; ++i) {
      const auto& e = app.slow[i];
      std::printf("    slow event: %6.1f ms wall, %6.1f ms cpu (waited %ld, preempted %ld, runnable %.1f ms, "
                  "%ld page faults): %s\n",
                  e.wallMs, e.cpuMs, e.waits.voluntary, e.waits.involuntary, static_cast<double>(e.waits.runnableNs) / 1e6,
                  e.waits.faults, e.what.toLocal8Bit().constData());
    }
    for (size_t i = 0; i < missed.size(); ++i) {
      const auto& g = heartbeat.longGaps()[i];
      std::printf("    gap over 16 ms: %6.1f ms wall, %6.1f ms cpu (waited %ld, preempted %ld, %ld page faults),"
                  " %.1f ms off the CPU in handlers, %.1f ms runnable outside them, %.1f ms asleep in the event loop;"
                  " the watcher slept through %.1f ms of it; steal on vCPU %d: %ld, on vCPU %d: %ld (10 ms units): %s\n",
                  g.wallMs, g.cpuMs, g.waits.voluntary, g.waits.involuntary, g.waits.faults, g.inEventsOffCpuMs,
                  g.runnableOutsideMs, std::max(0.0, g.wallMs - g.busyMs()), missed[i], g.cpuBefore, stealBefore[i],
                  g.cpuAfter, stealAfter[i], blame[i]);
    }
    std::fflush(stdout);
  }
  w.close();
  return 0;
}
