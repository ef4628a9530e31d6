// SPDX-License-Identifier: GPL-3.0-or-later
#include "ui/export_all.h"

#include <QDir>

#include "core/report/comparison.h"
#include "core/report/report_format.h"
#include "ui/export/exporter.h"
#include "ui/state/session.h"
#include "ui/state/view_feed.h"
#include "ui/views/view.h"

namespace kvscope::ui {

namespace {

QString q(const std::string& s) { return QString::fromStdString(s); }

/// The lane's report as kvscope-cli eval writes it, naming the preset or engine of `source`.
Expected<EvalReport> reportOf(const SettingLane& lane, const SettingSource& source) {
  auto report = lane.report();
  if (!report) return report.status();
  if (source.kind == SettingSource::Kind::Preset) report->preset = source.text.toStdString();
  if (source.kind == SettingSource::Kind::Engine) report->engine = source.text.toStdString();
  return report;
}

}  // namespace

Status exportAll(const Session& session, const ViewFeed& feed, const std::vector<View*>& views, const QString& folder,
                 const QStringList& names, const ExportSize& size) {
  if (!session.dump()) return Status::invalidArgument("export: no dump is open");
  if (!QDir().mkpath(folder)) return Status::ioError(folder.toStdString() + ": cannot create the folder");
  const QString protectedPath = q(session.dump()->info().path);
  const QDir dir(folder);
  ExportOptions options;
  options.size = size;
  options.caption = session.exportCaption();
  options.metadata = session.exportMetadata();
  for (View* view : views) {
    if (!names.isEmpty() && !names.contains(view->exportName())) continue;
    if (!view->hasContent()) continue;
    for (ExportFormat f : {ExportFormat::Png, ExportFormat::Svg, ExportFormat::Pdf, ExportFormat::Csv}) {
      const QString path = dir.filePath(view->exportName() + QLatin1Char('.') + exportSuffix(f));
      KVS_RETURN_IF_ERROR(exportView(*view, path, f, options, protectedPath));
    }
  }
  const QString specs = QStringLiteral("key: %1\nvalue: %2\n").arg(q(toString(session.keyPlan())), q(toString(session.valuePlan())));
  KVS_RETURN_IF_ERROR(exportText(dir.filePath(QStringLiteral("specs.txt")), specs.toUtf8(), protectedPath));
  if (feed.summaryComplete()) {
    auto report = reportOf(*feed.current(), session.setting().source);
    if (!report) return report.status();
    KVS_RETURN_IF_ERROR(exportText(dir.filePath(QStringLiteral("report.json")), QByteArray::fromStdString(toJson(*report)),
                                   protectedPath));
    // kvscope-cli eval's CSV, after the same metadata comment as every exported CSV.
    KVS_RETURN_IF_ERROR(exportText(dir.filePath(QStringLiteral("report.csv")),
                                   csvHeaderComment(options.metadata).toUtf8() + QByteArray::fromStdString(toCsv(*report)),
                                   protectedPath));
  }
  if (session.pinned() && feed.summaryComplete() && feed.pinned()->summaryComplete()) {
    auto text = comparisonReportJson(session, feed);
    // Two dumps of different models (other layers or kv heads) have no per-(layer, kv head)
    // difference: the views and both reports are written, comparison.json is not.
    if (!text && session.pinnedOnOtherDump()) return Status::ok();
    if (!text) return text.status();
    KVS_RETURN_IF_ERROR(exportText(dir.filePath(QStringLiteral("comparison.json")), QByteArray::fromStdString(*text),
                                   protectedPath));
  }
  return Status::ok();
}

Expected<std::string> comparisonReportJson(const Session& session, const ViewFeed& feed) {
  if (!session.dump() || !session.pinned()) return Status::invalidArgument("comparison: no setting is pinned as A");
  if (!feed.summaryComplete() || !feed.pinned()->summaryComplete()) {
    return Status::invalidArgument("comparison: the layer summaries of A and B are not complete yet");
  }
  auto a = feed.pinned()->report();
  if (!a) return a.status();
  auto b = reportOf(*feed.current(), session.setting().source);
  if (!b) return b.status();
  KVS_RETURN_IF_ERROR(checkComparable(*a, *b, session.pinnedOnOtherDump() ? DumpMatch::Any : DumpMatch::Same));
  return toComparisonJson(*a, *b);
}

}  // namespace kvscope::ui
