// SPDX-License-Identifier: GPL-3.0-or-later
// Writes a view to PNG (QImage), SVG (QSvgGenerator), PDF (QPdfWriter) or CSV, atomically
// (core/util/atomic_file.h), never over the open dump.
#pragma once

#include <QSize>
#include <QString>

#include <optional>

#include "core/util/status.h"
#include "ui/export/exportable.h"

namespace kvscope::ui {

enum class ExportFormat { Png, Svg, Pdf, Csv };

/// "png", "svg", "pdf", "csv".
QString exportSuffix(ExportFormat format);
/// The format a file name's suffix names, if any.
std::optional<ExportFormat> exportFormatFor(const QString& path);

/// Writes `view` to `path` in `format`; images are drawn at `size` pixels (PDF: points).
/// `protectedPath` (the open dump) is never written.
Status exportView(ExportableView& view, const QString& path, ExportFormat format, QSize size,
                  const QString& protectedPath = {});

/// Writes text to `path` atomically (same protection).
Status exportText(const QString& path, const QByteArray& content, const QString& protectedPath = {});

}  // namespace kvscope::ui
