// SPDX-License-Identifier: GPL-3.0-or-later
// Export All: every view in four forms, the reports and the spec strings into one folder, for
// the window's menu and the headless `--export-dir`.
#pragma once

#include <QString>
#include <QStringList>

#include <string>
#include <vector>

#include "core/util/status.h"

namespace kvscope::ui {

class Session;
class View;
class ViewFeed;
struct ExportSize;

/// Writes each view of `views` (all when `names` is empty; views with nothing to show are left
/// out) as PNG, SVG, PDF and CSV at `size`, each figure with the session's caption and each CSV
/// with its metadata; `specs.txt`; report.json and report.csv once B's summary is complete (as
/// `kvscope-cli eval` writes them, with the preset or engine the setting came from); and
/// comparison.json once A's is too. The open dump is never a target.
Status exportAll(const Session& session, const ViewFeed& feed, const std::vector<View*>& views, const QString& folder,
                 const QStringList& names, const ExportSize& size);

/// comparison.json (core/report/comparison.h) of the pinned A and B; needs both summaries complete.
Expected<std::string> comparisonReportJson(const Session& session, const ViewFeed& feed);

}  // namespace kvscope::ui
