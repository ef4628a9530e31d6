// SPDX-License-Identifier: GPL-3.0-or-later
// The size dialog of File ▸ Export view and Export All: a size (physical, e.g. 3.5in or
// 7inx4.4in, or pixels) and the PNG resolution, checked as the headless flags are.
#pragma once

#include <QDialog>
#include <QImage>

#include <functional>

#include "ui/export/exporter.h"

class QDialogButtonBox;
class QLabel;
class QLineEdit;
class QSpinBox;
class QTimer;

namespace kvscope::ui {

class ExportSizeDialog : public QDialog {
  Q_OBJECT

 public:
  explicit ExportSizeDialog(const QString& title, QWidget* parent = nullptr);

  /// Shows a preview of what the size gives: `render` draws the figure laid out at that size
  /// (called again, shortly after, whenever the size changes).
  void setPreview(std::function<QImage(const ExportSize&)> render);
  /// The size as typed, checked (an error while the text is not a size).
  [[nodiscard]] Expected<ExportSize> exportSize() const;
  QLineEdit* sizeEdit() { return size_; }
  QSpinBox* dpiBox() { return dpi_; }
  QLabel* messageLabel() { return message_; }
  QDialogButtonBox* buttons() { return buttons_; }
  QLabel* previewLabel() { return preview_; }

 private:
  void validate();
  void updatePreview();

  QLineEdit* size_;
  QSpinBox* dpi_;
  QLabel* message_;
  QDialogButtonBox* buttons_;
  QLabel* preview_;
  QTimer* previewTimer_;
  std::function<QImage(const ExportSize&)> render_;
};

}  // namespace kvscope::ui
