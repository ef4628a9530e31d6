// SPDX-License-Identifier: GPL-3.0-or-later
// The size dialog of File ▸ Export view and Export All: a size (physical, e.g. 3.5in or
// 7inx4.4in, or pixels) and the PNG resolution, checked as the headless flags are.
#pragma once

#include <QDialog>

#include "ui/export/exporter.h"

class QDialogButtonBox;
class QLabel;
class QLineEdit;
class QSpinBox;

namespace kvscope::ui {

class ExportSizeDialog : public QDialog {
  Q_OBJECT

 public:
  explicit ExportSizeDialog(const QString& title, QWidget* parent = nullptr);

  /// The size as typed, checked (an error while the text is not a size).
  [[nodiscard]] Expected<ExportSize> exportSize() const;
  QLineEdit* sizeEdit() { return size_; }
  QSpinBox* dpiBox() { return dpi_; }
  QLabel* messageLabel() { return message_; }
  QDialogButtonBox* buttons() { return buttons_; }

 private:
  void validate();

  QLineEdit* size_;
  QSpinBox* dpi_;
  QLabel* message_;
  QDialogButtonBox* buttons_;
};

}  // namespace kvscope::ui
