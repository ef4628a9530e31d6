// SPDX-License-Identifier: GPL-3.0-or-later
// Writes a view to PNG (QImage), SVG (QSvgGenerator), PDF (QPdfWriter) or CSV, atomically
// (core/util/atomic_file.h), never over the open dump.
#pragma once

#include <QImage>
#include <QSize>
#include <QSizeF>
#include <QString>
#include <QStringList>

#include <optional>

#include "core/util/status.h"
#include "ui/export/exportable.h"

namespace kvscope::ui {

enum class ExportFormat { Png, Svg, Pdf, Csv };

/// "png", "svg", "pdf", "csv".
QString exportSuffix(ExportFormat format);
/// The format a file name's suffix names, if any.
std::optional<ExportFormat> exportFormatFor(const QString& path);

/// A figure's size: in pixels (the layout is that many pixels; PDF: points) or physical
/// (inches) with a resolution for PNG. A physical figure is laid out so that the application's
/// base font comes out at kBodyPoints on the page, whatever the size, and lines scale with it.
struct ExportSize {
  QSize pixels{1600, 1000};  ///< when not physical
  QSizeF inches;             ///< > 0 when physical
  double dpi = 300;          ///< PNG pixels per inch of a physical size
  [[nodiscard]] bool physical() const { return inches.width() > 0 && inches.height() > 0; }
  /// The size the figure is laid out at (layout pixels).
  [[nodiscard]] QSizeF layoutSize() const;
  /// The PNG's size in pixels: pixels, or inches × dpi rounded.
  [[nodiscard]] QSize pngPixels() const;
  /// "3.5in × 2.19in at 300 dpi" or "1600 × 1000 px".
  [[nodiscard]] QString text() const;
};

/// The size text on a page the base font is drawn at in physical exports.
inline constexpr double kBodyPoints = 8.0;
/// Layout pixels per inch of a physical export (so that the base font is kBodyPoints there).
double layoutPixelsPerInch();

/// Parses a size: "WxH" in pixels ("1600x1000"), or physical with units in, mm, cm or pt on each
/// part or only the last ("3.5inx2.4in", "89mmx60mm", "3.5x2.4in"); a single physical width
/// ("3.5in", "7in", "89mm") gets the height 3/4 of the width (room for a chart's labels at 8 pt). Errors
/// name `flag` and what is allowed.
Expected<ExportSize> parseExportSize(const QString& text, const std::string& flag = "--export-size");
/// Parses a PNG resolution (dots per inch, 36–2400); errors name `flag`.
Expected<double> parseExportDpi(const QString& text, const std::string& flag = "--export-dpi");

/// What a figure carries besides the view: its size, a caption line drawn under it, and the
/// metadata lines every CSV starts with ("dump: …" becomes "# dump: …").
struct ExportOptions {
  ExportSize size;
  QString caption;
  QStringList metadata;
};

/// `view` with its caption drawn into an image of `pixels` (empty: the size's PNG pixels), as the
/// PNG export draws it; the export preview and Copy view as image use it too.
QImage renderImage(ExportableView& view, const ExportOptions& options, QSize pixels = {});
/// Writes `view` to `path` in `format`. A CSV holds one table: a view's further tables go to
/// `<stem>-<name>.csv` beside it. `protectedPath` (the open dump) is never written.
Status exportView(ExportableView& view, const QString& path, ExportFormat format, const ExportOptions& options,
                  const QString& protectedPath = {});
/// The same at `size` pixels, without caption or metadata.
Status exportView(ExportableView& view, const QString& path, ExportFormat format, QSize size,
                  const QString& protectedPath = {});

/// The tables of a view's CSV text (separated by empty lines), each with its header line.
QStringList splitCsvTables(const QString& csv);
/// `metadata` as CSV comment lines ("# dump: x.h5\n…").
QString csvHeaderComment(const QStringList& metadata);

/// Writes text to `path` atomically (same protection).
Status exportText(const QString& path, const QByteArray& content, const QString& protectedPath = {});

}  // namespace kvscope::ui
