// SPDX-License-Identifier: GPL-3.0-or-later
// Runs one kind of background work at a time, newest request wins: starting a job cancels the
// one before it (its Progress callback starts returning false) and its result is dropped.
#pragma once

#include <QObject>
#include <QString>
#include <QThreadPool>

#include <atomic>
#include <functional>
#include <memory>
#include <optional>

#include "core/util/status.h"

namespace kvscope::ui {

/// A cancellable background lane. Results reach the owner's thread through queued calls; a
/// result of a stale (superseded or cancelled) request is never delivered.
class JobRunner : public QObject {
  Q_OBJECT

 public:
  explicit JobRunner(QString name, QObject* parent = nullptr);
  ~JobRunner() override;

  /// Runs `work` on the lane's thread. `deliver` then runs on this object's thread, unless a
  /// newer job started or cancel() was called meanwhile. `work` must only touch its captures.
  template <typename R>
  void start(std::function<Expected<R>(const Progress&)> work,
             std::function<void(R)> deliver) {
    auto result = std::make_shared<std::optional<R>>();
    launch(
        [work = std::move(work), result](const Progress& progress, const Post&) -> Status {
          Expected<R> r = work(progress);
          if (!r) return r.status();
          result->emplace(std::move(r).value());
          return Status::ok();
        },
        [deliver = std::move(deliver), result] { deliver(std::move(**result)); });
  }

  /// Posts a partial result to this object's thread; dropped when the job is stale by then.
  using Post = std::function<void(std::function<void()>)>;
  /// Like start, for work that delivers pieces as it goes (`post`) and ends with `done`.
  void startStreaming(std::function<Status(const Progress&, const Post&)> work,
                      std::function<void()> done) {
    launch(std::move(work), std::move(done));
  }

  /// Cancels the running job, if any; nothing is delivered for it.
  void cancel();
  /// True while a job that has not been superseded runs.
  [[nodiscard]] bool busy() const { return busy_; }
  [[nodiscard]] const QString& name() const { return name_; }
  /// How many steps nicer than the GUI thread the lane's thread runs (4 unless set; at most 19).
  /// Set before the first job: a lane's thread takes it once.
  void setNice(int steps) { nice_ = steps; }
  /// Blocks until the lane's thread is idle (for tests and shutdown).
  void waitForIdle();

 signals:
  /// Progress of the current job, throttled; fraction in [0, 1].
  void progressed(double fraction, const QString& what);
  /// The current job failed (not emitted for cancellation).
  void failed(const QString& message);
  /// busy() changed.
  void busyChanged(bool busy);

 private:
  void launch(std::function<Status(const Progress&, const Post&)> work,
              std::function<void()> onSuccess);
  void setBusy(bool busy);

  QString name_;
  QThreadPool pool_;
  std::shared_ptr<std::atomic<uint64_t>> generation_;
  uint64_t current_ = 0;
  bool busy_ = false;
  int nice_ = 4;
};

}  // namespace kvscope::ui
