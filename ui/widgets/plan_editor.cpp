// SPDX-License-Identifier: GPL-3.0-or-later
#include "ui/widgets/plan_editor.h"

#include <QBrush>
#include <QColor>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QTableWidget>
#include <QVBoxLayout>

#include <algorithm>

#include "ui/widgets/spec_panel.h"

namespace kvscope::ui {

namespace {

QString q(const std::string& s) { return QString::fromStdString(s); }

constexpr int kLayersColumn = 0, kSpecColumn = 1;
const QColor kBadCell(231, 76, 60, 90);

}  // namespace

std::vector<QuantSpec> layerSpecsOf(const Plan& plan, int layers) {
  std::vector<QuantSpec> out;
  out.reserve(static_cast<size_t>(std::max(0, layers)));
  for (int l = 0; l < layers; ++l) out.push_back(specForLayer(plan, l, layers));
  return out;
}

PlanEditor::PlanEditor(SpecPanel* keyPanel, SpecPanel* valuePanel, QWidget* parent)
    : QWidget(parent), keyPanel_(keyPanel), valuePanel_(valuePanel) {
  setObjectName(QStringLiteral("planEditor"));
  key_.isKey = true;
  value_.isKey = false;
  auto* outer = new QVBoxLayout(this);
  outer->setContentsMargins(4, 4, 4, 4);
  auto* heading = new QLabel(tr("<b>Layer plan</b>"), this);
  heading->setToolTip(tr("Per-layer specs (quantization.md §12): the panels above edit the default."));
  outer->addWidget(heading);
  auto* intro = new QLabel(tr("Layers get the Key/Value panel's spec unless an override names them (later rows win)."),
                           this);
  intro->setWordWrap(true);
  outer->addWidget(intro);
  layerLabel_ = new QLabel(this);
  layerLabel_->setObjectName(QStringLiteral("planLayerLabel"));
  layerLabel_->setWordWrap(true);
  layerLabel_->setToolTip(tr("The specs the layer in view is quantized with."));
  outer->addWidget(layerLabel_);
  outer->addWidget(buildSide(key_));
  outer->addWidget(buildSide(value_));
  outer->addStretch(1);  // spare height below the lists, not between them
  // Unlinking keeps what V had, as the panel keeps the copied spec: K's overrides become V's own.
  connect(valuePanel_, &SpecPanel::linkToggled, this, [this](bool on) {
    if (!on) {
      value_.applied = key_.applied;
      for (PlanOverride& o : value_.applied) o.spec.prerope = false;
      fillTable(value_);
      value_.pending.clear();
    }
    updateTexts();
  });
  updateTexts();
}

QWidget* PlanEditor::buildSide(Side& s) {
  auto* box = new QWidget(this);
  auto* layout = new QVBoxLayout(box);
  layout->setContentsMargins(0, 4, 0, 0);
  layout->setSpacing(2);
  const QString name = s.isKey ? tr("K") : tr("V");
  auto* title = new QLabel(s.isKey ? tr("<b>Key overrides</b>") : tr("<b>Value overrides</b>"), box);
  auto* buttons = new QHBoxLayout;
  buttons->addWidget(title, 1);
  layout->addLayout(buttons);

  s.table = new QTableWidget(0, 2, box);
  s.table->setObjectName(s.isKey ? QStringLiteral("keyOverrides") : QStringLiteral("valueOverrides"));
  s.table->setHorizontalHeaderLabels({tr("Layers"), tr("Spec")});
  s.table->horizontalHeaderItem(kLayersColumn)
      ->setToolTip(tr("RANGE(+RANGE)*, RANGE = N, N-M, firstN or lastN; layers count from 0."));
  s.table->horizontalHeaderItem(kSpecColumn)->setToolTip(tr("The spec those layers get instead of the default."));
  s.table->horizontalHeader()->setSectionResizeMode(kLayersColumn, QHeaderView::ResizeToContents);
  s.table->horizontalHeader()->setSectionResizeMode(kSpecColumn, QHeaderView::Stretch);
  s.table->verticalHeader()->hide();
  s.table->setSelectionBehavior(QAbstractItemView::SelectRows);
  s.table->setEditTriggers(QAbstractItemView::DoubleClicked | QAbstractItemView::EditKeyPressed |
                           QAbstractItemView::AnyKeyPressed);
  s.table->setToolTip(tr("%1 overrides: double-click a cell to edit it. A row applies only when its layers "
                         "and spec are valid for the open dump.")
                          .arg(name));
  s.table->setVerticalScrollBarPolicy(Qt::ScrollBarAsNeeded);
  s.table->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  layout->addWidget(s.table);
  fitTable(s);

  s.add = new QPushButton(tr("Add"), box);
  s.add->setObjectName(s.isKey ? QStringLiteral("addKeyOverride") : QStringLiteral("addValueOverride"));
  s.add->setToolTip(tr("Add an override for the layer in view, with the spec it has now; then edit its layers and spec."));
  s.remove = new QPushButton(tr("Remove"), box);
  s.remove->setObjectName(s.isKey ? QStringLiteral("removeKeyOverride") : QStringLiteral("removeValueOverride"));
  s.remove->setToolTip(tr("Remove the selected overrides (the last one when none is selected)."));
  buttons->addWidget(s.add);
  buttons->addWidget(s.remove);

  auto* planRow = new QHBoxLayout;
  planRow->addWidget(new QLabel(tr("%1 plan").arg(name), box));
  s.plan = new QLineEdit(box);
  s.plan->setObjectName(s.isKey ? QStringLiteral("keyPlanText") : QStringLiteral("valuePlanText"));
  s.plan->setToolTip(tr("The whole %1 plan, SPEC(;LAYERS:SPEC)*: the default spec, then the overrides. Edit it "
                        "and press Enter to set both.")
                         .arg(name));
  planRow->addWidget(s.plan, 1);
  layout->addLayout(planRow);

  s.message = new QLabel(box);
  s.message->setObjectName(s.isKey ? QStringLiteral("keyPlanMessage") : QStringLiteral("valuePlanMessage"));
  s.message->setWordWrap(true);
  s.message->setStyleSheet(QStringLiteral("color: #c0392b;"));
  layout->addWidget(s.message);

  Side* sp = &s;
  connect(s.table, &QTableWidget::itemChanged, this, [this, sp] {
    if (!filling_) onRowsEdited(*sp);
  });
  connect(s.add, &QPushButton::clicked, this, [this, sp] {
    const Plan current = sp->isKey ? keyPlan() : valuePlan();
    const int layer = layers_ > 0 ? std::clamp(currentLayer_, 0, layers_ - 1) : currentLayer_;
    filling_ = true;
    const int row = sp->table->rowCount();
    sp->table->insertRow(row);
    sp->table->setItem(row, kLayersColumn, new QTableWidgetItem(QString::number(layer)));
    sp->table->setItem(row, kSpecColumn, new QTableWidgetItem(q(toString(specForLayer(current, layer, layers_)))));
    filling_ = false;
    fitTable(*sp);
    onRowsEdited(*sp);
    if (QTableWidgetItem* spec = sp->table->item(row, kSpecColumn)) {
      sp->table->setCurrentItem(spec);
      if (isVisible()) sp->table->editItem(spec);
    }
  });
  connect(s.remove, &QPushButton::clicked, this, [this, sp] {
    std::vector<int> rows;
    for (const QModelIndex& index : sp->table->selectionModel()->selectedRows()) rows.push_back(index.row());
    if (rows.empty() && sp->table->rowCount() > 0) rows.push_back(sp->table->rowCount() - 1);
    std::sort(rows.rbegin(), rows.rend());
    filling_ = true;
    for (int row : rows) sp->table->removeRow(row);
    filling_ = false;
    fitTable(*sp);
    onRowsEdited(*sp);
  });
  connect(s.plan, &QLineEdit::returnPressed, this, [this, sp] { onPlanTyped(*sp); });
  connect(s.plan, &QLineEdit::editingFinished, this, [this, sp] { onPlanTyped(*sp); });
  return box;
}

QuantSpec PlanEditor::base(bool isKey) const {
  if (isKey || !linked()) return (isKey ? keyPanel_ : valuePanel_)->spec();
  QuantSpec v = keyPanel_->spec();
  v.prerope = false;
  return v;
}

bool PlanEditor::linked() const { return valuePanel_->linkedToKey(); }

Plan PlanEditor::keyPlan() const {
  Plan p(keyPanel_->spec());
  p.overrides = key_.applied;
  return p;
}

Plan PlanEditor::valuePlan() const {
  Plan p(base(false));
  if (linked()) {
    // V follows K's whole plan, as its default follows K's spec.
    p.overrides = key_.applied;
    for (PlanOverride& o : p.overrides) o.spec.prerope = false;
  } else {
    p.overrides = value_.applied;
  }
  return p;
}

const std::vector<PlanOverride>& PlanEditor::overrides(bool isKey) const { return side(isKey).applied; }

void PlanEditor::setOverrides(bool isKey, std::vector<PlanOverride> overrides) {
  Side& s = side(isKey);
  s.applied = std::move(overrides);
  fillTable(s);
  s.pending.clear();
  updateTexts();
}

void PlanEditor::setContext(const SpecContext& context, int layers) {
  context_ = context;
  layers_ = std::max(0, layers);
  updateTexts();
}

void PlanEditor::setCurrentLayer(int layer) {
  currentLayer_ = layer;
  updateTexts();
}

void PlanEditor::refresh() { updateTexts(); }

QString PlanEditor::check(bool isKey, const Plan& plan) const {
  if (layers_ > 0) {
    auto resolved = resolve(plan, layers_);
    if (!resolved) return q(resolved.status().message());
  }
  SpecContext context = context_;
  context.isKey = isKey;
  for (size_t i = 0; i < plan.overrides.size(); ++i) {
    const PlanOverride& o = plan.overrides[i];
    const Status status = validateSpec(o.spec, context);
    if (!status.isOk()) {
      return tr("override %1 (%2): %3").arg(i + 1).arg(q(toString(o.layers)), q(status.message()));
    }
  }
  return {};
}

bool PlanEditor::isValid() const { return errorText().isEmpty(); }

QString PlanEditor::errorText() const {
  const QString k = check(true, keyPlan());
  if (!k.isEmpty()) return tr("key plan: %1").arg(k);
  const QString v = check(false, valuePlan());
  if (!v.isEmpty()) return tr("value plan: %1").arg(v);
  return {};
}

void PlanEditor::fillTable(Side& s) {
  filling_ = true;
  s.table->setRowCount(0);
  for (const PlanOverride& o : s.applied) {
    const int row = s.table->rowCount();
    s.table->insertRow(row);
    s.table->setItem(row, kLayersColumn, new QTableWidgetItem(q(toString(o.layers))));
    s.table->setItem(row, kSpecColumn, new QTableWidgetItem(q(toString(o.spec))));
  }
  filling_ = false;
  fitTable(s);
}

void PlanEditor::fitTable(Side& s) {
  // As tall as its rows (one empty row's room at least, six at most): the spec panels above
  // keep the dock's height.
  const int rows = std::clamp(s.table->rowCount(), 1, 6);
  const int frame = 2 * s.table->frameWidth();
  s.table->setFixedHeight(s.table->horizontalHeader()->sizeHint().height() +
                          rows * s.table->verticalHeader()->defaultSectionSize() + frame);
}

void PlanEditor::onRowsEdited(Side& s) {
  // Every row must parse and the plan must fit the dump; otherwise the applied plan stays and
  // the offending cell is marked.
  std::vector<PlanOverride> rows;
  QString error;
  filling_ = true;
  for (int r = 0; r < s.table->rowCount(); ++r) {
    for (int c : {kLayersColumn, kSpecColumn}) {
      if (!s.table->item(r, c)) s.table->setItem(r, c, new QTableWidgetItem);
      s.table->item(r, c)->setBackground(QBrush());
      s.table->item(r, c)->setToolTip({});
    }
    QTableWidgetItem* layersItem = s.table->item(r, kLayersColumn);
    QTableWidgetItem* specItem = s.table->item(r, kSpecColumn);
    PlanOverride o;
    auto ranges = parseLayerRanges(layersItem->text().trimmed().toStdString());
    QString cellError;
    QTableWidgetItem* bad = nullptr;
    if (!ranges) {
      cellError = tr("override %1, layers: %2").arg(r + 1).arg(q(ranges.status().message()));
      bad = layersItem;
    } else {
      o.layers = *ranges;
      auto spec = parseSpec(specItem->text().trimmed().toStdString());
      if (!spec) {
        cellError = tr("override %1, spec: %2").arg(r + 1).arg(q(spec.status().message()));
        bad = specItem;
      } else {
        o.spec = *spec;
      }
    }
    if (bad) {
      bad->setBackground(kBadCell);
      bad->setToolTip(cellError);
      if (error.isEmpty()) error = cellError;
    }
    rows.push_back(std::move(o));
  }
  filling_ = false;
  if (error.isEmpty()) {
    Plan candidate(base(s.isKey));
    candidate.overrides = rows;
    error = check(s.isKey, candidate);
    // Mark the cell the dump rejects: a layer it does not have, or a spec its shape refuses.
    SpecContext context = context_;
    context.isKey = s.isKey;
    filling_ = true;
    for (size_t i = 0; !error.isEmpty() && i < rows.size(); ++i) {
      Plan single(base(s.isKey));
      single.overrides = {rows[i]};
      const int column = layers_ > 0 && !resolve(single, layers_).hasValue() ? kLayersColumn
                         : !validateSpec(rows[i].spec, context).isOk()       ? kSpecColumn
                                                                             : -1;
      if (column < 0) continue;
      QTableWidgetItem* bad = s.table->item(static_cast<int>(i), column);
      bad->setBackground(kBadCell);
      bad->setToolTip(error);
    }
    filling_ = false;
  }
  if (!error.isEmpty()) {
    s.pending = error + tr(" — the applied plan is unchanged.");
    updateTexts();
    return;
  }
  s.applied = std::move(rows);
  fillTable(s);  // canonical text in every cell
  s.pending.clear();
  updateTexts();
  emit overridesChanged();
}

QString PlanEditor::enterPlan(bool isKey, const Plan& plan) {
  Side& s = side(isKey);
  const QString error = check(isKey, plan);
  if (!error.isEmpty()) {
    s.pending = error + tr(" — the applied plan is unchanged.");
    updateTexts();
    return error;
  }
  s.applied = plan.overrides;
  fillTable(s);
  s.pending.clear();
  updateTexts();
  return {};
}

void PlanEditor::onPlanTyped(Side& s) {
  if (!s.plan->isModified() || s.plan->isReadOnly()) return;
  s.plan->setModified(false);
  auto plan = parsePlan(s.plan->text().trimmed().toStdString());
  if (!plan) {
    s.pending = q(plan.status().message()) + tr(" — the applied plan is unchanged.");
    updateTexts();
    return;
  }
  if (!enterPlan(s.isKey, *plan).isEmpty()) return;
  // The base goes to the panel through the main window, which recomputes.
  emit planEntered(s.isKey, plan->base);
  updateTexts();
}

void PlanEditor::updateTexts() {
  const bool isLinked = linked();
  if (isLinked) {
    // The greyed V list shows what V follows (K's overrides), which unlinking keeps.
    std::vector<PlanOverride> followed = key_.applied;
    for (PlanOverride& o : followed) o.spec.prerope = false;
    if (followed != value_.applied) {
      value_.applied = std::move(followed);
      value_.pending.clear();
      fillTable(value_);
    }
  }
  for (Side* s : {&key_, &value_}) {
    const Plan plan = s->isKey ? keyPlan() : valuePlan();
    if (!s->plan->hasFocus() || !s->plan->isModified()) {
      s->plan->setText(q(toString(plan)));
      s->plan->setModified(false);
    }
    const bool follows = !s->isKey && isLinked;
    s->plan->setReadOnly(follows);
    s->table->setEnabled(!follows);
    s->add->setEnabled(!follows);
    s->remove->setEnabled(!follows);
    if (follows) {
      s->message->setText(tr("Values follow the key's plan (Same as key)."));
      if (!s->message->styleSheet().isEmpty()) s->message->setStyleSheet(QString());
    } else {
      if (s->message->styleSheet().isEmpty()) s->message->setStyleSheet(QStringLiteral("color: #c0392b;"));
      // An edit's own error stays until an edit applies; otherwise an applied plan that stopped
      // fitting (another dump, another default) says so.
      s->message->setText(!s->pending.isEmpty() ? s->pending : check(s->isKey, plan));
    }
  }
  if (layers_ <= 0) {
    layerLabel_->setText(tr("Open a dump to see each layer's specs."));
    return;
  }
  const int layer = std::clamp(currentLayer_, 0, layers_ - 1);
  const Plan k = keyPlan(), v = valuePlan();
  const QuantSpec& ks = specForLayer(k, layer, layers_);
  const QuantSpec& vs = specForLayer(v, layer, layers_);
  const QString overridden = tr(" (override)");
  layerLabel_->setText(tr("Layer %1 in view: <b>K</b> %2%3 · <b>V</b> %4%5")
                           .arg(layer)
                           .arg(q(toString(ks)).toHtmlEscaped(), ks == k.base ? QString() : overridden,
                                q(toString(vs)).toHtmlEscaped(), vs == v.base ? QString() : overridden));
}

}  // namespace kvscope::ui
