// SPDX-License-Identifier: GPL-3.0-or-later
#include "ui/export/exporter.h"

#include <QFileInfo>
#include <QImage>
#include <QPageSize>
#include <QPainter>
#include <QPdfWriter>
#include <QSvgGenerator>

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

Status exportView(ExportableView& view, const QString& path, ExportFormat format, QSize size,
                  const QString& protectedPath) {
  KVS_RETURN_IF_ERROR(checkTarget(path, protectedPath));
  if (format == ExportFormat::Csv) return exportText(path, view.toCsv().toUtf8(), protectedPath);
  if (size.width() < 16 || size.height() < 16 || size.width() > 20000 || size.height() > 20000) {
    return Status::invalidArgument("export: size " + std::to_string(size.width()) + "x" +
                                   std::to_string(size.height()) + " is outside 16..20000 pixels");
  }
  const QRectF target(QPointF(0, 0), QSizeF(size));
  const std::string where = path.toStdString();
  return writeViaTemporary(where, [&](const std::string& temporary) -> Status {
    const QString tmp = QString::fromStdString(temporary);
    switch (format) {
      case ExportFormat::Png: {
        QImage image(size, QImage::Format_ARGB32_Premultiplied);
        image.fill(Qt::white);
        {
          QPainter painter(&image);
          painter.setRenderHint(QPainter::Antialiasing);
          view.renderTo(painter, target);
        }
        if (!image.save(tmp, "PNG")) return Status::ioError(where + ": could not write the PNG image");
        return Status::ok();
      }
      case ExportFormat::Svg: {
        QSvgGenerator svg;
        svg.setFileName(tmp);
        svg.setSize(size);
        svg.setViewBox(target);
        svg.setTitle(view.exportName());
        svg.setDescription(QStringLiteral("kvscope ") + QStringLiteral(KVSCOPE_VERSION));
        QPainter painter;
        if (!painter.begin(&svg)) return Status::ioError(where + ": could not start the SVG file");
        view.renderTo(painter, target);
        if (!painter.end()) return Status::ioError(where + ": could not finish the SVG file");
        return Status::ok();
      }
      case ExportFormat::Pdf: {
        QPdfWriter pdf(tmp);
        pdf.setResolution(72);  // one point per pixel of the requested size
        pdf.setPageSize(QPageSize(QSizeF(size), QPageSize::Point));
        pdf.setPageMargins(QMarginsF(0, 0, 0, 0));
        pdf.setTitle(view.exportName());
        pdf.setCreator(QStringLiteral("kvscope"));
        QPainter painter;
        if (!painter.begin(&pdf)) return Status::ioError(where + ": could not start the PDF file");
        view.renderTo(painter, target);
        if (!painter.end()) return Status::ioError(where + ": could not finish the PDF file");
        return Status::ok();
      }
      case ExportFormat::Csv: break;
    }
    return Status::internal("export: unhandled format");
  });
}

}  // namespace kvscope::ui
