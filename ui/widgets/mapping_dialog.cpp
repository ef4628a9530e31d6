// SPDX-License-Identifier: GPL-3.0-or-later
#include "ui/widgets/mapping_dialog.h"

#include <QComboBox>
#include <QDir>
#include <QFileInfo>
#include <QSettings>
#include <QDialogButtonBox>
#include <QFileDialog>
#include <QGridLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QTableWidget>
#include <QVBoxLayout>

#include "core/util/atomic_file.h"

namespace kvscope::ui {

namespace {

QString shapeText(const std::vector<int64_t>& shape) {
  QStringList parts;
  for (int64_t d : shape) parts << QString::number(d);
  return QStringLiteral("[") + parts.join(QStringLiteral(", ")) + QStringLiteral("]");
}

// A first guess of the axis order from the rank; the user corrects it.
QString axesForRank(size_t rank) {
  switch (rank) {
    case 3: return QStringLiteral("head,token,dim");
    case 4: return QStringLiteral("layer,head,token,dim");
    case 5: return QStringLiteral("layer,batch,head,token,dim");
    default: return {};
  }
}

std::vector<std::string> splitAxes(const QString& text) {
  std::vector<std::string> out;
  for (const QString& part : text.split(QLatin1Char(','), Qt::SkipEmptyParts)) out.push_back(part.trimmed().toStdString());
  return out;
}

}  // namespace

MappingDialog::MappingDialog(const QString& path, const DatasetTree& tree, QWidget* parent)
    : QDialog(parent), path_(path), tree_(tree) {
  setWindowTitle(tr("Map the tensors of %1").arg(path));
  table_ = new QTableWidget(static_cast<int>(tree_.datasets.size()), 3, this);
  table_->setHorizontalHeaderLabels({tr("dataset"), tr("shape"), tr("type")});
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->verticalHeader()->hide();
  for (size_t i = 0; i < tree_.datasets.size(); ++i) {
    const DatasetEntry& d = tree_.datasets[i];
    table_->setItem(static_cast<int>(i), 0, new QTableWidgetItem(QString::fromStdString(d.path)));
    table_->setItem(static_cast<int>(i), 1, new QTableWidgetItem(shapeText(d.shape)));
    table_->setItem(static_cast<int>(i), 2, new QTableWidgetItem(QString::fromStdString(d.dtype)));
  }
  table_->resizeColumnsToContents();
  table_->setToolTip(tr("Every dataset in the file with its shape; assign them below."));

  auto* grid = new QGridLayout;
  grid->addWidget(new QLabel(tr("<b>tensor</b>"), this), 0, 0);
  grid->addWidget(new QLabel(tr("<b>dataset</b> ({layer} in the path for one dataset per layer)"), this), 0, 1);
  grid->addWidget(new QLabel(tr("<b>axes</b> (layer, batch, head, token, dim)"), this), 0, 2);
  key_ = addRow(grid, 1, tr("K (after RoPE)"), tr("The cached keys as attention uses them."), false);
  value_ = addRow(grid, 2, tr("V"), tr("The cached values."), false);
  query_ = addRow(grid, 3, tr("Q (optional)"), tr("The queries, needed for attention metrics."), true);
  preRope_ = addRow(grid, 4, tr("pre-RoPE K (optional)"), tr("The keys before RoPE, needed for pre-RoPE key quantization."), true);
  layers_ = new QLineEdit(this);
  layers_->setPlaceholderText(tr("only when {layer} paths cannot be counted"));
  layers_->setToolTip(tr("Number of layers, when per-layer dataset paths cannot be enumerated."));
  grid->addWidget(new QLabel(tr("layers"), this), 5, 0);
  grid->addWidget(layers_, 5, 1);

  message_ = new QLabel(this);
  message_->setWordWrap(true);
  message_->setStyleSheet(QStringLiteral("color: #c0392b;"));
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Open | QDialogButtonBox::Cancel, this);
  QPushButton* saveButton = buttons->addButton(tr("Save mapping…"), QDialogButtonBox::ActionRole);
  saveButton->setToolTip(tr("Write this mapping as JSON for kvscope-cli --mapping."));
  connect(buttons, &QDialogButtonBox::accepted, this, &MappingDialog::accept);
  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
  connect(saveButton, &QPushButton::clicked, this, &MappingDialog::save);

  auto* layout = new QVBoxLayout(this);
  layout->addWidget(new QLabel(tr("This file is not a canonical KV dump (no kvdump_version). Say which datasets hold "
                                  "the keys, values and queries and how their axes are ordered."), this));
  layout->addWidget(table_, 1);
  layout->addLayout(grid);
  layout->addWidget(message_);
  layout->addWidget(buttons);
  resize(820, 560);
  guess();
}

MappingDialog::Row MappingDialog::addRow(QGridLayout* grid, int row, const QString& label, const QString& tip,
                                         bool optional) {
  Row r;
  r.dataset = new QComboBox(this);
  r.dataset->setEditable(true);
  if (optional) r.dataset->addItem(QString());
  for (const DatasetEntry& d : tree_.datasets) r.dataset->addItem(QString::fromStdString(d.path));
  r.dataset->setToolTip(tip);
  r.axes = new QLineEdit(this);
  r.axes->setToolTip(tr("The dataset's axes in order, e.g. layer,batch,head,token,dim."));
  grid->addWidget(new QLabel(label, this), row, 0);
  grid->addWidget(r.dataset, row, 1);
  grid->addWidget(r.axes, row, 2);
  connect(r.dataset, &QComboBox::currentTextChanged, this, [this, r](const QString& text) {
    for (const DatasetEntry& d : tree_.datasets) {
      if (QString::fromStdString(d.path) == text) r.axes->setText(axesForRank(d.shape.size()));
    }
  });
  return r;
}

void MappingDialog::guess() {
  const auto pick = [this](const Row& r, QStringList needles) {
    for (const DatasetEntry& d : tree_.datasets) {
      const QString name = QString::fromStdString(d.path).section(QLatin1Char('/'), -1).toLower();
      for (const QString& n : needles) {
        if (name == n || name.startsWith(n + QLatin1Char('_'))) {
          r.dataset->setCurrentText(QString::fromStdString(d.path));
          r.axes->setText(axesForRank(d.shape.size()));
          return;
        }
      }
    }
  };
  pick(key_, {QStringLiteral("key"), QStringLiteral("keys"), QStringLiteral("k")});
  pick(value_, {QStringLiteral("value"), QStringLiteral("values"), QStringLiteral("v")});
  query_.dataset->setCurrentIndex(0);
  preRope_.dataset->setCurrentIndex(0);
  pick(query_, {QStringLiteral("query"), QStringLiteral("queries"), QStringLiteral("q")});
}

Expected<Mapping> MappingDialog::mapping() const {
  Mapping m;
  const auto tensor = [](const Row& r) {
    return TensorMapping{r.dataset->currentText().trimmed().toStdString(), splitAxes(r.axes->text())};
  };
  m.key = tensor(key_);
  m.value = tensor(value_);
  if (!query_.dataset->currentText().trimmed().isEmpty()) m.query = tensor(query_);
  if (!preRope_.dataset->currentText().trimmed().isEmpty()) m.keyPreRope = tensor(preRope_);
  if (!layers_->text().trimmed().isEmpty()) {
    bool ok = false;
    const int n = layers_->text().trimmed().toInt(&ok);
    if (!ok || n <= 0) return Status::invalidArgument("layers: expected a positive number");
    m.layers = n;
  }
  if (m.key.path.empty() || m.value.path.empty()) return Status::invalidArgument("K and V need a dataset each");
  // Round-trip through the mapping parser so the dialog applies the same rules as the CLI.
  return parseMapping(mappingToJson(m), path_.toStdString() + " (mapping)");
}

void MappingDialog::save() {
  auto m = mapping();
  if (!m) {
    message_->setText(QString::fromStdString(m.status().message()));
    return;
  }
  // Where the last mapping was saved, else beside the file it maps.
  QSettings settings;
  const QString folder = settings.value(QStringLiteral("mappingFolder"), QFileInfo(path_).absolutePath()).toString();
  const QString target = QFileDialog::getSaveFileName(this, tr("Save mapping"),
                                                      QDir(folder).filePath(QStringLiteral("mapping.json")),
                                                      tr("Mapping (*.json)"));
  if (target.isEmpty()) return;
  settings.setValue(QStringLiteral("mappingFolder"), QFileInfo(target).absolutePath());
  const Status s = writeFileAtomic(target.toStdString(), mappingToJson(*m));
  message_->setText(s.isOk() ? tr("Saved %1.").arg(target) : QString::fromStdString(s.message()));
}

void MappingDialog::accept() {
  auto m = mapping();
  if (!m) {
    message_->setText(QString::fromStdString(m.status().message()));
    return;
  }
  emit mappingAccepted(*m);
  QDialog::accept();
}

}  // namespace kvscope::ui
