// SPDX-License-Identifier: GPL-3.0-or-later
#include "ui/views/budget_view.h"

#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QSpinBox>
#include <QTableWidget>
#include <QVBoxLayout>

#include <cmath>

#include "core/capacity/units.h"

namespace kvscope::ui {

namespace {
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
QString q(const std::string& s) { return QString::fromStdString(s); }
}  // namespace

BudgetView::BudgetView(QWidget* parent) : QWidget(parent) {
  memory_ = new QDoubleSpinBox(this);
  memory_->setRange(0.1, 4096);
  memory_->setValue(80);
  memory_->setSuffix(QStringLiteral(" GiB"));
  memory_->setToolTip(tr("Accelerator memory the model and its KV cache share."));
  weights_ = new QDoubleSpinBox(this);
  weights_->setRange(0, 4096);
  weights_->setValue(16);
  weights_->setSuffix(QStringLiteral(" GiB"));
  weights_->setToolTip(tr("Memory taken by the weights and anything else that is not KV cache."));
  context_ = new QSpinBox(this);
  context_->setRange(1, 1 << 24);
  context_->setValue(4096);
  context_->setToolTip(tr("Tokens per sequence; it fixes how many scale groups a sequence stores."));
  batch_ = new QSpinBox(this);
  batch_->setRange(1, 1 << 16);
  batch_->setValue(1);
  batch_->setToolTip(tr("Sequences decoded together; the plan says whether they fit."));
  device_ = new QComboBox(this);
  device_->addItem(tr("(no decode estimate)"));
  for (const DeviceInfo& d : deviceTable()) {
    device_->addItem(QString::fromUtf8(d.name.data(), static_cast<qsizetype>(d.name.size())));
    device_->setItemData(device_->count() - 1,
                         QString::fromUtf8(d.description.data(), static_cast<qsizetype>(d.description.size())),
                         Qt::ToolTipRole);
  }
  device_->setToolTip(tr("A datasheet device for the decode-step roofline estimate."));

  auto* form = new QFormLayout;
  form->addRow(tr("Memory"), memory_);
  form->addRow(tr("Weights"), weights_);
  form->addRow(tr("Context"), context_);
  form->addRow(tr("Batch"), batch_);
  form->addRow(tr("Device"), device_);
  table_ = new QTableWidget(this);
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->setToolTip(tr("fp16 against the current K and V specs, for a model of the open dump's shape."));
  notes_ = new QLabel(this);
  notes_->setWordWrap(true);
  search_ = new QLabel(tr("Budget search (Pareto fronts of bits per element against error): not available in this "
                          "build yet — core/search has not landed."), this);
  search_->setWordWrap(true);

  auto* top = new QHBoxLayout;
  top->addLayout(form);
  top->addWidget(table_, 1);
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(new QLabel(tr("<b>Capacity calculator</b>"), this));
  layout->addLayout(top, 1);
  layout->addWidget(notes_);
  layout->addWidget(search_);

  connect(memory_, &QDoubleSpinBox::valueChanged, this, &BudgetView::recompute);
  connect(weights_, &QDoubleSpinBox::valueChanged, this, &BudgetView::recompute);
  connect(context_, &QSpinBox::valueChanged, this, &BudgetView::recompute);
  connect(batch_, &QSpinBox::valueChanged, this, &BudgetView::recompute);
  connect(device_, &QComboBox::currentIndexChanged, this, &BudgetView::recompute);
  recompute();
}

void BudgetView::setInputs(const DumpInfo& info, const QuantSpec& key, const QuantSpec& value) {
  shape_ = ModelShape{info.layers, info.kvHeads, info.headDim};
  key_ = key;
  value_ = value;
  recompute();
}

QStringList BudgetView::rowLabels() const {
  QStringList rows{tr("K spec"), tr("V spec"), tr("K bits/element"), tr("V bits/element"), tr("bytes/token"),
                   tr("tokens that fit"), tr("sequences that fit"), tr("batch fits")};
  if (device_->currentIndex() > 0) rows << tr("decode step (s)") << tr("bound by");
  return rows;
}

QStringList BudgetView::column(const CapacityEntry& e) const {
  QStringList c{q(e.keySpec), q(e.valueSpec), QString::number(e.keyBitsPerElement, 'f', 3),
                QString::number(e.valueBitsPerElement, 'f', 3), QString::number(e.bytesPerToken, 'f', 1),
                QString::number(e.tokensFit, 'f', 0), QString::number(e.sequencesFit),
                e.batchFits ? tr("yes") : tr("no")};
  if (e.decode) {
    c << QString::number(e.decode->seconds, 'g', 4) << (e.decode->memoryBound ? tr("memory") : tr("compute"));
  }
  return c;
}

void BudgetView::recompute() {
  plan_.reset();
  error_.clear();
  table_->clear();
  if (!shape_) {
    notes_->setText(tr("Open a dump to plan for its model's shape."));
    return;
  }
  CapacityRequest request;
  request.shape = *shape_;
  request.key = key_;
  request.value = value_;
  request.memoryBytes = memory_->value() * kGiB;
  request.weightsBytes = weights_->value() * kGiB;
  request.context = context_->value();
  request.batch = batch_->value();
  if (device_->currentIndex() > 0) {
    if (const DeviceInfo* d = findDevice(device_->currentText().toStdString())) {
      request.decode = DecodeHardware{std::string(d->name), d->bandwidth, d->fp16Dense, "dense FP16"};
    }
  }
  auto plan = planCapacity(request);
  if (!plan) {
    error_ = q(plan.status().message());
    notes_->setText(error_);
    return;
  }
  plan_ = std::move(plan).value();
  const QStringList rows = rowLabels();
  table_->setRowCount(static_cast<int>(rows.size()));
  table_->setColumnCount(2);
  table_->setVerticalHeaderLabels(rows);
  table_->setHorizontalHeaderLabels({tr("fp16"), tr("quantized")});
  const QStringList a = column(plan_->fp16), b = column(plan_->quantized);
  for (int r = 0; r < rows.size(); ++r) {
    table_->setItem(r, 0, new QTableWidgetItem(a.value(r)));
    table_->setItem(r, 1, new QTableWidgetItem(b.value(r)));
  }
  table_->resizeColumnsToContents();
  QString notes = tr("Available for KV cache: %1.").arg(q(formatBytes(plan_->availableBytes)));
  for (const std::string& n : plan_->notes) notes += QStringLiteral(" ") + q(n);
  notes_->setText(notes);
}

void BudgetView::renderTo(QPainter& painter, const QRectF& target) {
  painter.save();
  painter.fillRect(target, palette().color(QPalette::Base));
  painter.setPen(palette().color(QPalette::Text));
  QFont font = painter.font();
  const QFontMetricsF fm(font);
  const double line = fm.height() * 1.5;
  double y = target.top() + line;
  QFont bold = font;
  bold.setBold(true);
  painter.setFont(bold);
  painter.drawText(QPointF(target.left() + 20, y), tr("Capacity: %1 GiB memory, %2 GiB weights, context %3, batch %4")
                                                       .arg(memory_->value()).arg(weights_->value())
                                                       .arg(context_->value()).arg(batch_->value()));
  painter.setFont(font);
  y += line;
  if (plan_) {
    const QStringList rows = rowLabels();
    const QStringList a = column(plan_->fp16), b = column(plan_->quantized);
    const double c0 = target.left() + 20, c1 = c0 + target.width() * 0.3, c2 = c0 + target.width() * 0.6;
    painter.setFont(bold);
    painter.drawText(QPointF(c1, y), tr("fp16"));
    painter.drawText(QPointF(c2, y), tr("quantized"));
    painter.setFont(font);
    for (int r = 0; r < rows.size(); ++r) {
      y += line;
      painter.drawText(QPointF(c0, y), rows[r]);
      painter.drawText(QPointF(c1, y), a.value(r));
      painter.drawText(QPointF(c2, y), b.value(r));
    }
    y += line;
  }
  painter.drawText(QRectF(target.left() + 20, y, target.width() - 40, target.bottom() - y),
                   Qt::TextWordWrap, notes_->text() + QStringLiteral("\n") + search_->text());
  painter.restore();
}

QString BudgetView::toCsv() const {
  if (!plan_) return {};
  QString out = QStringLiteral("quantity,fp16,quantized\n");
  const QStringList rows = rowLabels();
  const QStringList a = column(plan_->fp16), b = column(plan_->quantized);
  for (int r = 0; r < rows.size(); ++r) out += QStringLiteral("%1,%2,%3\n").arg(rows[r], a.value(r), b.value(r));
  return out;
}

}  // namespace kvscope::ui
