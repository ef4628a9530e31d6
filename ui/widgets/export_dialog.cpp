// SPDX-License-Identifier: GPL-3.0-or-later
#include "ui/widgets/export_dialog.h"

#include <QDialogButtonBox>
#include <QFormLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSettings>
#include <QSpinBox>
#include <QVBoxLayout>

namespace kvscope::ui {

ExportSizeDialog::ExportSizeDialog(const QString& title, QWidget* parent) : QDialog(parent) {
  setWindowTitle(title);
  const QSettings settings;
  size_ = new QLineEdit(settings.value(QStringLiteral("export/size"), QStringLiteral("7inx4.4in")).toString(), this);
  size_->setObjectName(QStringLiteral("exportSize"));
  size_->setToolTip(tr("3.5in (one column of a two-column paper), 7in (the page's width), 89mm, 3.5inx2.4in, or "
                       "1600x1000 in pixels. A single width gets the height 3/4 of it. Text is drawn at %1 pt on the "
                       "page at any physical size.")
                        .arg(kBodyPoints));
  dpi_ = new QSpinBox(this);
  dpi_->setObjectName(QStringLiteral("exportDpi"));
  dpi_->setRange(36, 2400);
  dpi_->setValue(settings.value(QStringLiteral("export/dpi"), 300).toInt());
  dpi_->setSuffix(tr(" dpi"));
  dpi_->setToolTip(tr("PNG pixels per inch of a physical size (SVG and PDF keep the physical size)."));
  message_ = new QLabel(this);
  message_->setWordWrap(true);
  buttons_ = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this);
  auto* form = new QFormLayout;
  form->addRow(tr("Size"), size_);
  form->addRow(tr("PNG resolution"), dpi_);
  auto* layout = new QVBoxLayout(this);
  // The dialog grows with the message (an error lists what is allowed).
  layout->setSizeConstraint(QLayout::SetMinimumSize);
  setMinimumWidth(480);
  layout->addLayout(form);
  layout->addWidget(message_);
  layout->addWidget(buttons_);
  connect(size_, &QLineEdit::textChanged, this, &ExportSizeDialog::validate);
  connect(dpi_, &QSpinBox::valueChanged, this, &ExportSizeDialog::validate);
  connect(buttons_, &QDialogButtonBox::accepted, this, [this] {
    QSettings s;
    s.setValue(QStringLiteral("export/size"), size_->text());
    s.setValue(QStringLiteral("export/dpi"), dpi_->value());
    accept();
  });
  connect(buttons_, &QDialogButtonBox::rejected, this, &QDialog::reject);
  validate();
}

Expected<ExportSize> ExportSizeDialog::exportSize() const {
  auto size = parseExportSize(size_->text(), "size");
  if (!size) return size.status();
  size->dpi = dpi_->value();
  return size;
}

void ExportSizeDialog::validate() {
  const auto size = exportSize();
  buttons_->button(QDialogButtonBox::Ok)->setEnabled(size.hasValue());
  if (!size) {
    message_->setText(QString::fromStdString(size.status().message()));
    return;
  }
  const QSize png = size->pngPixels();
  message_->setText(size->physical() ? tr("%1: PNG %2 × %3 pixels; text at %4 pt.")
                                           .arg(size->text())
                                           .arg(png.width())
                                           .arg(png.height())
                                           .arg(kBodyPoints)
                                     : tr("%1 (the screen's scale).").arg(size->text()));
}

}  // namespace kvscope::ui
