// SPDX-License-Identifier: GPL-3.0-or-later
#include "ui/widgets/export_dialog.h"

#include <QDialogButtonBox>
#include <QFormLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPixmap>
#include <QPushButton>
#include <QSettings>
#include <QSpinBox>
#include <QTimer>
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
  preview_ = new QLabel(this);
  preview_->setObjectName(QStringLiteral("exportPreview"));
  preview_->setAlignment(Qt::AlignCenter);
  preview_->setVisible(false);
  // The figure is drawn again a moment after the typing stops, not on every key.
  previewTimer_ = new QTimer(this);
  previewTimer_->setSingleShot(true);
  previewTimer_->setInterval(150);
  connect(previewTimer_, &QTimer::timeout, this, &ExportSizeDialog::updatePreview);
  auto* form = new QFormLayout;
  form->addRow(tr("Size"), size_);
  form->addRow(tr("PNG resolution"), dpi_);
  auto* layout = new QVBoxLayout(this);
  // The dialog grows with the message (an error lists what is allowed).
  layout->setSizeConstraint(QLayout::SetMinimumSize);
  setMinimumWidth(480);
  layout->addLayout(form);
  layout->addWidget(message_);
  layout->addWidget(preview_);
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

void ExportSizeDialog::setPreview(std::function<QImage(const ExportSize&)> render) {
  render_ = std::move(render);
  preview_->setVisible(static_cast<bool>(render_));
  updatePreview();
}

void ExportSizeDialog::updatePreview() {
  if (!render_) return;
  const auto size = exportSize();
  if (!size) return;  // the last good preview stays while the text is being corrected
  // Drawn at its layout size (where 8 pt text is as large as on the page relative to the figure),
  // then shown within 440 × 300 so that what is cut or crowded on the page is seen here.
  const QImage image = render_(*size);
  if (image.isNull()) return;
  const QPixmap pixmap = QPixmap::fromImage(image.scaled(QSize(440, 300), Qt::KeepAspectRatio, Qt::SmoothTransformation));
  preview_->setPixmap(pixmap);
  preview_->setToolTip(tr("Preview of %1: the figure as laid out, shown smaller.").arg(size->text()));
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
  if (render_) previewTimer_->start();
  const QSize png = size->pngPixels();
  message_->setText(size->physical() ? tr("%1: PNG %2 × %3 pixels; text at %4 pt.")
                                           .arg(size->text())
                                           .arg(png.width())
                                           .arg(png.height())
                                           .arg(kBodyPoints)
                                     : tr("%1 (the screen's scale).").arg(size->text()));
}

}  // namespace kvscope::ui
