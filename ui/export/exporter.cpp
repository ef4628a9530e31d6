// SPDX-License-Identifier: GPL-3.0-or-later
#include "ui/export/exporter.h"

#include <QDir>
#include <QFileInfo>
#include <QFontMetricsF>
#include <QGuiApplication>
#include <QImage>
#include <QPalette>
#include <QRegularExpression>
#include <QPageSize>
#include <QPainter>
#include <QPdfWriter>
#include <QSvgGenerator>

#include <cmath>

#include "core/util/atomic_file.h"

namespace kvscope::ui {

namespace {

Status checkTarget(const QString& path, const QString& protectedPath) {
  if (path.isEmpty()) return Status::invalidArgument("export: no file name given");
  if (!protectedPath.isEmpty()) {
    const QFileInfo target(path), dump(protectedPath);
    const QString a = target.exists() ? target.canonicalFilePath() : target.absoluteFilePath();
    const QString b = dump.exists() ? dump.canonicalFilePath() : dump.absoluteFilePath();
    if (a == b) {
      return Status::invalidArgument(path.toStdString() + ": refusing to overwrite the open dump");
    }
  }
  return Status::ok();
}

}  // namespace

QString exportSuffix(ExportFormat format) {
  switch (format) {
    case ExportFormat::Png: return QStringLiteral("png");
    case ExportFormat::Svg: return QStringLiteral("svg");
    case ExportFormat::Pdf: return QStringLiteral("pdf");
    case ExportFormat::Csv: return QStringLiteral("csv");
  }
  return {};
}

std::optional<ExportFormat> exportFormatFor(const QString& path) {
  const QString suffix = QFileInfo(path).suffix().toLower();
  for (ExportFormat f : {ExportFormat::Png, ExportFormat::Svg, ExportFormat::Pdf, ExportFormat::Csv}) {
    if (suffix == exportSuffix(f)) return f;
  }
  return std::nullopt;
}

Status exportText(const QString& path, const QByteArray& content, const QString& protectedPath) {
  KVS_RETURN_IF_ERROR(checkTarget(path, protectedPath));
  return writeFileAtomic(path.toStdString(), std::string_view(content.constData(), static_cast<size_t>(content.size())));
}

namespace {

constexpr double kMinInches = 0.5, kMaxInches = 40, kMinDpi = 36, kMaxDpi = 2400;
constexpr int kMaxPixels = 20000;

// The resolution fonts are laid out at (the screen's logical DPI, as QImage and the charts use).
double deviceDpi() { return QImage(1, 1, QImage::Format_ARGB32).logicalDpiY(); }

std::optional<double> toInches(double v, const QString& unit) {
  if (unit == QLatin1String("in")) return v;
  if (unit == QLatin1String("mm")) return v / 25.4;
  if (unit == QLatin1String("cm")) return v / 2.54;
  if (unit == QLatin1String("pt")) return v / 72.0;
  return std::nullopt;
}

}  // namespace

double layoutPixelsPerInch() {
  const QFont font = QGuiApplication::font();
  const double dpi = deviceDpi();
  const double points = font.pointSizeF() > 0 ? font.pointSizeF() : font.pixelSize() * 72.0 / dpi;
  // The base font is points × dpi / 72 layout pixels high; kBodyPoints / 72 inch on the page.
  return points * dpi / kBodyPoints;
}

QSizeF ExportSize::layoutSize() const {
  if (!physical()) return QSizeF(pixels);
  const double l = layoutPixelsPerInch();
  return QSizeF(inches.width() * l, inches.height() * l);
}

QSize ExportSize::pngPixels() const {
  if (!physical()) return pixels;
  return QSize(static_cast<int>(std::lround(inches.width() * dpi)), static_cast<int>(std::lround(inches.height() * dpi)));
}

QString ExportSize::text() const {
  if (!physical()) return QStringLiteral("%1 × %2 px").arg(pixels.width()).arg(pixels.height());
  return QStringLiteral("%1in × %2in at %3 dpi").arg(inches.width(), 0, 'g', 4).arg(inches.height(), 0, 'g', 4).arg(dpi, 0, 'g', 5);
}

Expected<ExportSize> parseExportSize(const QString& text, const std::string& flag) {
  const std::string allowed = ": expected a width such as 3.5in, 7in or 89mm, or WIDTHxHEIGHT such as 3.5inx2.4in, "
                              "89mmx60mm or 1600x1000 (pixels); units in, mm, cm, pt (physical, 0.5–40 in a side) "
                              "or px (16–20000 a side); got '" + text.toStdString() + "'";
  static const QRegularExpression re(
      QStringLiteral(R"(^\s*([0-9]*\.?[0-9]+)\s*(in|mm|cm|pt|px)?\s*(?:[x×*]\s*([0-9]*\.?[0-9]+)\s*(in|mm|cm|pt|px)?)?\s*$)"));
  const QRegularExpressionMatch m = re.match(text.toLower());
  if (!m.hasMatch()) return Status::invalidArgument(flag + allowed);
  const double w = m.captured(1).toDouble();
  QString wUnit = m.captured(2);
  const bool hasHeight = m.hasCaptured(3) && !m.captured(3).isEmpty();
  const double h = hasHeight ? m.captured(3).toDouble() : 0;
  QString hUnit = m.captured(4);
  if (wUnit.isEmpty()) wUnit = hUnit;  // "3.5x2.4in": the unit applies to both
  if (hasHeight && hUnit.isEmpty()) hUnit = wUnit;
  ExportSize out;
  if (wUnit.isEmpty() || wUnit == QLatin1String("px")) {
    if (!hasHeight) return Status::invalidArgument(flag + ": a size in pixels needs both, WIDTHxHEIGHT" + allowed.substr(1));
    if (hUnit != wUnit) return Status::invalidArgument(flag + ": mixes pixels and physical units" + allowed.substr(1));
    const double wr = std::round(w), hr = std::round(h);
    if (w != wr || h != hr || wr < 16 || hr < 16 || wr > kMaxPixels || hr > kMaxPixels) {
      return Status::invalidArgument(flag + ": pixels must be whole numbers from 16 to " + std::to_string(kMaxPixels) +
                                     allowed.substr(1));
    }
    out.pixels = QSize(static_cast<int>(wr), static_cast<int>(hr));
    return out;
  }
  if (hUnit == QLatin1String("px")) return Status::invalidArgument(flag + ": mixes pixels and physical units" + allowed.substr(1));
  const auto wi = toInches(w, wUnit);
  const auto hi = hasHeight ? toInches(h, hUnit) : std::optional<double>(*wi * 0.75);
  if (!wi || !hi) return Status::invalidArgument(flag + allowed);
  if (*wi < kMinInches || *hi < kMinInches || *wi > kMaxInches || *hi > kMaxInches) {
    return Status::invalidArgument(flag + ": each side must be from 0.5 in (12.7 mm) to 40 in (1016 mm)" + allowed.substr(1));
  }
  out.inches = QSizeF(*wi, *hi);
  return out;
}

Expected<double> parseExportDpi(const QString& text, const std::string& flag) {
  bool ok = false;
  const double dpi = text.trimmed().toDouble(&ok);
  if (!ok || !std::isfinite(dpi) || dpi < kMinDpi || dpi > kMaxDpi) {
    return Status::invalidArgument(flag + ": expected dots per inch from " + std::to_string(static_cast<int>(kMinDpi)) +
                                   " to " + std::to_string(static_cast<int>(kMaxDpi)) + " (e.g. 300 or 600); got '" +
                                   text.toStdString() + "'");
  }
  return dpi;
}

QStringList splitCsvTables(const QString& csv) {
  QStringList tables;
  QString current;
  for (const QString& line : csv.split(QLatin1Char('\n'))) {
    if (line.trimmed().isEmpty()) {
      if (!current.isEmpty()) tables << current;
      current.clear();
      continue;
    }
    current += line + QLatin1Char('\n');
  }
  if (!current.isEmpty()) tables << current;
  return tables;
}

QString csvHeaderComment(const QStringList& metadata) {
  QString out;
  for (const QString& line : metadata) out += QStringLiteral("# ") + QString(line).replace(QLatin1Char('\n'), QLatin1Char(' ')) + QLatin1Char('\n');
  return out;
}

namespace {

// The figure, then the caption line under it, in layout pixels.
void drawFigure(ExportableView& view, QPainter& painter, const QSizeF& layout, const QString& caption) {
  double captionHeight = 0;
  QFont font = QGuiApplication::font();
  if (!caption.isEmpty()) {
    font.setPointSizeF((font.pointSizeF() > 0 ? font.pointSizeF() : 9.0) * 0.9);
    // One line, wrapped at spaces onto more (at most three) when the figure is narrow.
    const QFontMetricsF fm(font);
    const double wrapped = fm.boundingRect(QRectF(0, 0, layout.width() - 12, 1e6), Qt::TextWordWrap, caption).height();
    captionHeight = std::min(wrapped, fm.lineSpacing() * 3) + fm.height() * 0.6;
  }
  const QRectF figure(QPointF(0, 0), QSizeF(layout.width(), std::max(8.0, layout.height() - captionHeight)));
  view.renderTo(painter, figure);
  if (captionHeight > 0) {
    const QPalette palette = QGuiApplication::palette();
    const QRectF band(0, figure.bottom(), layout.width(), captionHeight);
    painter.save();
    painter.fillRect(band, palette.color(QPalette::Base));
    painter.setPen(palette.color(QPalette::Text));
    painter.setFont(font);
    painter.drawText(band.adjusted(6, 0, -6, 0), Qt::AlignLeft | Qt::AlignVCenter | Qt::TextWordWrap, caption);
    painter.restore();
  }
}

}  // namespace

QImage renderImage(ExportableView& view, const ExportOptions& options, QSize pixels) {
  const QSizeF layout = options.size.layoutSize();
  if (pixels.isEmpty()) pixels = options.size.pngPixels();
  QImage image(pixels, QImage::Format_ARGB32_Premultiplied);
  image.fill(Qt::white);
  {
    QPainter painter(&image);
    painter.setRenderHint(QPainter::Antialiasing);
    painter.scale(pixels.width() / layout.width(), pixels.height() / layout.height());
    drawFigure(view, painter, layout, options.caption);
  }
  return image;
}

Status exportView(ExportableView& view, const QString& path, ExportFormat format, QSize size,
                  const QString& protectedPath) {
  ExportOptions options;
  options.size.pixels = size;
  return exportView(view, path, format, options, protectedPath);
}

Status exportView(ExportableView& view, const QString& path, ExportFormat format, const ExportOptions& options,
                  const QString& protectedPath) {
  KVS_RETURN_IF_ERROR(checkTarget(path, protectedPath));
  if (format == ExportFormat::Csv) {
    // One table per file: the first at `path`, the others beside it as <stem>-<name>.csv.
    const QStringList tables = splitCsvTables(view.toCsv());
    const QStringList names = view.csvTableNames();
    const QFileInfo info(path);
    for (int i = 0; i < std::max<qsizetype>(1, tables.size()); ++i) {
      const QString name = i == 0 ? QString() : names.value(i - 1, QStringLiteral("table%1").arg(i + 1));
      const QString target = i == 0 ? path : info.dir().filePath(info.completeBaseName() + QLatin1Char('-') + name + QStringLiteral(".csv"));
      QStringList metadata = options.metadata;
      if (i > 0) metadata << QStringLiteral("table: ") + name;
      KVS_RETURN_IF_ERROR(exportText(target, (csvHeaderComment(metadata) + tables.value(i)).toUtf8(), protectedPath));
    }
    return Status::ok();
  }
  const ExportSize& size = options.size;
  const QSize png = size.pngPixels();
  if (!size.physical() &&
      (png.width() < 16 || png.height() < 16 || png.width() > kMaxPixels || png.height() > kMaxPixels)) {
    return Status::invalidArgument("export: size " + std::to_string(png.width()) + "x" +
                                   std::to_string(png.height()) + " is outside 16..20000 pixels");
  }
  if (size.physical() && format == ExportFormat::Png &&
      (png.width() > kMaxPixels || png.height() > kMaxPixels || png.width() < 16 || png.height() < 16)) {
    return Status::invalidArgument("export: " + size.text().toStdString() + " is " + std::to_string(png.width()) + "x" +
                                   std::to_string(png.height()) + " pixels; a PNG may have 16 to 20000 a side (lower --export-dpi)");
  }
  const QSizeF layout = size.layoutSize();
  const auto draw = [&](QPainter& painter) { drawFigure(view, painter, layout, options.caption); };
  const std::string where = path.toStdString();
  const double dpi = deviceDpi();
  return writeViaTemporary(where, [&](const std::string& temporary) -> Status {
    const QString tmp = QString::fromStdString(temporary);
    switch (format) {
      case ExportFormat::Png: {
        QImage image = renderImage(view, options, png);
        if (size.physical()) {
          // Set after painting: fonts were laid out at the screen's DPI and scaled with the rest.
          const int dpm = static_cast<int>(std::lround(size.dpi / 0.0254));
          image.setDotsPerMeterX(dpm);
          image.setDotsPerMeterY(dpm);
        }
        if (!image.save(tmp, "PNG")) return Status::ioError(where + ": could not write the PNG image");
        return Status::ok();
      }
      case ExportFormat::Svg: {
        QSvgGenerator svg;
        svg.setFileName(tmp);
        if (size.physical()) {
          // width/height in mm (size / resolution); the drawing in layout pixels through the viewBox.
          svg.setResolution(static_cast<int>(std::lround(dpi)));
          svg.setSize(QSize(static_cast<int>(std::lround(size.inches.width() * dpi)),
                            static_cast<int>(std::lround(size.inches.height() * dpi))));
        } else {
          svg.setSize(png);
        }
        svg.setViewBox(QRectF(QPointF(0, 0), layout));
        svg.setTitle(view.exportName());
        svg.setDescription(options.caption.isEmpty() ? QStringLiteral("kvscope ") + QStringLiteral(KVSCOPE_VERSION)
                                                     : options.caption);
        QPainter painter;
        if (!painter.begin(&svg)) return Status::ioError(where + ": could not start the SVG file");
        draw(painter);
        if (!painter.end()) return Status::ioError(where + ": could not finish the SVG file");
        return Status::ok();
      }
      case ExportFormat::Pdf: {
        QPdfWriter pdf(tmp);
        if (size.physical()) {
          pdf.setResolution(static_cast<int>(std::lround(dpi)));
          pdf.setPageSize(QPageSize(size.inches, QPageSize::Inch));
        } else {
          pdf.setResolution(72);  // one point per pixel of the requested size
          pdf.setPageSize(QPageSize(QSizeF(png), QPageSize::Point));
        }
        pdf.setPageMargins(QMarginsF(0, 0, 0, 0));
        pdf.setTitle(view.exportName());
        pdf.setCreator(QStringLiteral("kvscope"));
        QPainter painter;
        if (!painter.begin(&pdf)) return Status::ioError(where + ": could not start the PDF file");
        if (size.physical()) painter.scale(dpi / layoutPixelsPerInch(), dpi / layoutPixelsPerInch());
        draw(painter);
        if (!painter.end()) return Status::ioError(where + ": could not finish the PDF file");
        return Status::ok();
      }
      case ExportFormat::Csv: break;
    }
    return Status::internal("export: unhandled format");
  });
}

}  // namespace kvscope::ui
