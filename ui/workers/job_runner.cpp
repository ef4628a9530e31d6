// SPDX-License-Identifier: GPL-3.0-or-later
#include "ui/workers/job_runner.h"

#include <QMetaObject>
#include <QPointer>

#include <algorithm>
#include <cerrno>
#include <chrono>

#ifdef __linux__
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace kvscope::ui {

namespace {

// Background lanes run a few steps nicer than the GUI thread, so that on a busy machine the
// scheduler gives the event loop the CPU first and a slider drag stays smooth; the lanes (and
// the OpenMP threads they start, which inherit it) take what is left. Once per lane thread.
void yieldToGuiThread(int steps) {
#ifdef __linux__
  thread_local bool done = false;
  if (done) return;
  done = true;
  const auto tid = static_cast<id_t>(syscall(SYS_gettid));
  errno = 0;
  const int nice = getpriority(PRIO_PROCESS, tid);
  if (errno == 0) setpriority(PRIO_PROCESS, tid, std::min(nice + steps, 19));
#else
  (void)steps;
#endif
}

}  // namespace

JobRunner::JobRunner(QString name, QObject* parent)
    : QObject(parent), name_(std::move(name)),
      generation_(std::make_shared<std::atomic<uint64_t>>(0)) {
  // One thread per lane: a superseded job finishes its current step while the new one queues.
  pool_.setMaxThreadCount(1);
}

JobRunner::~JobRunner() {
  generation_->fetch_add(1);
  pool_.waitForDone();
}

void JobRunner::cancel() {
  generation_->fetch_add(1);
  setBusy(false);
}

void JobRunner::waitForIdle() { pool_.waitForDone(); }

void JobRunner::setBusy(bool busy) {
  if (busy_ == busy) return;
  busy_ = busy;
  emit busyChanged(busy);
}

void JobRunner::launch(std::function<Status(const Progress&, const Post&)> work,
                       std::function<void()> onSuccess) {
  const uint64_t mine = generation_->fetch_add(1) + 1;
  current_ = mine;
  setBusy(true);
  auto generation = generation_;
  QPointer<JobRunner> self(this);
  pool_.start([work = std::move(work), onSuccess = std::move(onSuccess), generation, mine, self, nice = nice_] {
    yieldToGuiThread(nice);
    using Clock = std::chrono::steady_clock;
    auto lastReport = Clock::now() - std::chrono::seconds(1);
    const Progress progress = [&](double fraction, std::string_view what) {
      if (generation->load() != mine) return false;
      // Throttle to ~20 updates a second so the GUI thread's queue stays short.
      const auto now = Clock::now();
      if (now - lastReport > std::chrono::milliseconds(50)) {
        lastReport = now;
        const QString text = QString::fromUtf8(what.data(), static_cast<qsizetype>(what.size()));
        QMetaObject::invokeMethod(self.data(), [self, generation, mine, fraction, text] {
          if (self && generation->load() == mine) emit self->progressed(fraction, text);
        }, Qt::QueuedConnection);
      }
      return true;
    };
    const Post post = [&](std::function<void()> piece) {
      QMetaObject::invokeMethod(self.data(), [self, generation, mine, piece = std::move(piece)] {
        if (self && generation->load() == mine) piece();
      }, Qt::QueuedConnection);
    };
    if (generation->load() != mine) return;
    Status status = work(progress, post);
    // The runner outlives its pool's tasks (its destructor waits), so `self` is valid here;
    // the queued lambda re-checks it because delivery happens later.
    QMetaObject::invokeMethod(self.data(), [self, generation, mine, status, onSuccess] {
      if (!self || generation->load() != mine) return;
      self->setBusy(false);
      if (status.isOk()) {
        onSuccess();
      } else if (status.code() != StatusCode::Cancelled) {
        emit self->failed(QString::fromStdString(status.message()));
      }
    }, Qt::QueuedConnection);
  });
}

}  // namespace kvscope::ui
