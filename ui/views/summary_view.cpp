// SPDX-License-Identifier: GPL-3.0-or-later
#include "ui/views/summary_view.h"

#include <QBarCategoryAxis>
#include <QBarSeries>
#include <QBarSet>
#include <QChart>
#include <QChartView>
#include <QDoubleSpinBox>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineSeries>
#include <QCheckBox>
#include <QComboBox>
#include <QLogValueAxis>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QStandardItemModel>
#include <QStyle>
#include <QTableView>
#include <QValueAxis>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <string_view>

#include "ui/export/chart_render.h"
#include "ui/state/session.h"
#include "ui/export/chart_ticks.h"
#include "ui/widgets/chart_view.h"

namespace kvscope::ui {

namespace {

enum class Budget { None, Key, Value };

struct Column {
  const char* header;
  const char* tip;  ///< the metric's definition (quantization.md §6–7), shown on the header
  std::function<std::optional<double>(const HeadResult&)> get;
  Budget budget;
};

std::optional<double> attention(const HeadResult& h, const AttentionMetrics AttentionCases::*which,
                                double AttentionMetrics::*field) {
  if (!h.attention) return std::nullopt;
  return (*h.attention).*which.*field;
}

const std::vector<Column>& columns() {
  static const std::vector<Column> all{
      {"K rel_error",
       "K relative error ‖K′ − K‖₂ / ‖K‖₂ over the kv head (quantization.md §7; K′ is K quantized and dequantized).",
       [](const HeadResult& h) { return std::optional<double>(h.key.relError); }, Budget::None},
      {"K sqnr_db",
       "K signal-to-quantization-noise ratio 10·log10(ΣK² / Σ(K′ − K)²) in dB (§7); higher is better.",
       [](const HeadResult& h) { return h.key.sqnrDb; }, Budget::None},
      {"V rel_error",
       "V relative error ‖V′ − V‖₂ / ‖V‖₂ over the kv head (§7).",
       [](const HeadResult& h) { return std::optional<double>(h.value.relError); }, Budget::None},
      {"V sqnr_db",
       "V signal-to-quantization-noise ratio 10·log10(ΣV² / Σ(V′ − V)²) in dB (§7).",
       [](const HeadResult& h) { return h.value.sqnrDb; }, Budget::None},
      {"key_only kl_mean",
       "key_only (K′, exact V): mean over query heads and queries of KL(P‖P′) = Σ P (ln P − ln P′), in nats (§6). "
       "joint's KL is the same (V does not change P), so the table shows it once; the CSV has both.",
       [](const HeadResult& h) { return attention(h, &AttentionCases::keyOnly, &AttentionMetrics::klMean); }, Budget::None},
      {"key_only top1",
       "key_only: fraction of queries whose most-attended key is unchanged, argmax P = argmax P′ (§6).",
       [](const HeadResult& h) { return attention(h, &AttentionCases::keyOnly, &AttentionMetrics::top1Agreement); }, Budget::None},
      {"key_only output_rel_error",
       "key_only: mean over queries of ‖o′ − o‖₂ / ‖o‖₂, o = Σ P v the attention output (§6). The K budget bounds it.",
       [](const HeadResult& h) { return attention(h, &AttentionCases::keyOnly, &AttentionMetrics::outputRelError); }, Budget::Key},
      {"value_only output_rel_error",
       "value_only (exact K, V′): mean over queries of ‖o′ − o‖₂ / ‖o‖₂ (§6). The V budget bounds it.",
       [](const HeadResult& h) { return attention(h, &AttentionCases::valueOnly, &AttentionMetrics::outputRelError); }, Budget::Value},
      {"joint kl_mean",
       "joint (K′ and V′): mean KL(P‖P′) in nats; the same as key_only, since V does not change P (§6).",
       [](const HeadResult& h) { return attention(h, &AttentionCases::joint, &AttentionMetrics::klMean); }, Budget::None},
      {"joint output_rel_error",
       "joint (K′ and V′): mean over queries of ‖o′ − o‖₂ / ‖o‖₂ (§6).",
       [](const HeadResult& h) { return attention(h, &AttentionCases::joint, &AttentionMetrics::outputRelError); }, Budget::None},
  };
  return all;
}

// Fallback when the dump has no queries: budgets apply to the tensors' rel_error.
double keyMetric(const HeadResult& h) {
  return h.attention ? h.attention->keyOnly.outputRelError : h.key.relError;
}
double valueMetric(const HeadResult& h) {
  return h.attention ? h.attention->valueOnly.outputRelError : h.value.relError;
}

QString csvName(const Column& c) { return QString::fromUtf8(c.header).replace(QLatin1Char(' '), QLatin1Char('_')); }

// Metrics where a larger value is better: a positive B − A is an improvement there.
bool higherIsBetter(const QString& name) { return name.contains(QStringLiteral("sqnr")) || name.contains(QStringLiteral("top1")); }

}  // namespace

QStringList SummaryView::metricNames() {
  QStringList names;
  for (const Column& c : columns()) names << csvName(c);
  return names;
}

std::optional<double> SummaryView::metricOf(const HeadResult& head, const QString& name) {
  if (head.skipped) return std::nullopt;
  for (const Column& c : columns()) {
    if (csvName(c) == name) return c.get(head);
  }
  return std::nullopt;
}

const HeadResult* SummaryView::comparisonHead(int layer, int kvHead) const {
  for (const LayerResult& l : compare_) {
    if (l.layer != layer) continue;
    for (const HeadResult& h : l.heads) {
      if (h.kvHead == kvHead) return &h;
    }
  }
  return nullptr;
}

void SummaryView::setComparison(bool pinned, std::vector<LayerResult> a) {
  const bool modeChanged = pinned != pinned_;
  pinned_ = pinned;
  compare_ = std::move(a);
  std::sort(compare_.begin(), compare_.end(), [](const LayerResult& x, const LayerResult& y) { return x.layer < y.layer; });
  compareMetric_->setVisible(pinned_);
  if (modeChanged && pinned_) table_->sortByColumn(0, Qt::AscendingOrder);
  rebuildTable();
  rebuildChart();
}

SummaryView::SummaryView(QWidget* parent) : QWidget(parent) {
  model_ = new QStandardItemModel(this);
  proxy_ = new QSortFilterProxyModel(this);
  proxy_->setSourceModel(model_);
  proxy_->setSortRole(Qt::UserRole);
  table_ = new QTableView(this);
  table_->setModel(proxy_);
  table_->setSortingEnabled(true);
  table_->sortByColumn(0, Qt::AscendingOrder);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setSelectionMode(QAbstractItemView::SingleSelection);
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->verticalHeader()->hide();
  table_->setToolTip(tr("Click a row to select that layer and kv head in every view; click a header to sort."));
  table_->horizontalHeader()->setDefaultAlignment(Qt::AlignCenter);
  // The selected (layer, kv head) stays highlighted whatever the order.
  connect(table_->horizontalHeader(), &QHeaderView::sortIndicatorChanged, this, [this] { highlightSelection(); });

  chart_ = new QChart;
  applyPaletteTheme(chart_);
  chart_->setAnimationOptions(QChart::NoAnimation);
  chart_->legend()->setAlignment(Qt::AlignBottom);
  chartView_ = new InteractiveChartView(chart_, this);
  xAxis_ = new QBarCategoryAxis;
  xAxis_->setTitleText(tr("layer"));
  yAxis_ = new QValueAxis(this);
  keepNiceTicks(yAxis_);
  yLog_ = new QLogValueAxis(this);
  keepLogLabels(yLog_);
  chart_->addAxis(xAxis_, Qt::AlignBottom);
  chart_->addAxis(yAxis_, Qt::AlignLeft);
  logScale_ = new QCheckBox(tr("log scale"), this);
  logScale_->setTristate(false);
  logScale_->setToolTip(tr("Logarithmic metric axis, so that small bars (value_only beside key_only) and the budget "
                           "lines stay visible. On by itself when the bars span two decades or more, until you set it."));
  connect(logScale_, &QCheckBox::clicked, this, [this] {
    logChosen_ = true;
    rebuildChart();
  });

  keyBudget_ = new QDoubleSpinBox(this);
  valueBudget_ = new QDoubleSpinBox(this);
  for (QDoubleSpinBox* box : {keyBudget_, valueBudget_}) {
    box->setDecimals(4);
    box->setRange(0.0, 10.0);
    box->setSingleStep(0.005);
    box->setValue(0.05);
  }
  keyBudget_->setToolTip(tr("Largest acceptable key_only output_rel_error (K rel_error without queries); cells above it turn red."));
  valueBudget_->setToolTip(tr("Largest acceptable value_only output_rel_error (V rel_error without queries); cells above it turn red."));
  status_ = new QLabel(this);
  compareMetric_ = new QComboBox(this);
  compareMetric_->setObjectName(QStringLiteral("comparisonMetric"));
  for (const Column& c : columns()) {
    if (std::string_view(c.header) == "joint kl_mean") continue;  // the same as key_only's (§6)
    compareMetric_->addItem(tr("A/B: %1").arg(QString::fromUtf8(c.header)), csvName(c));
  }
  compareMetric_->setCurrentIndex(compareMetric_->findData(QStringLiteral("joint_output_rel_error")));
  compareMetric_->setToolTip(tr("The metric whose values under A and B, and their difference B − A, the table shows "
                                "after the kv head and the chart draws per layer."));
  compareMetric_->setVisible(false);
  connect(compareMetric_, &QComboBox::currentIndexChanged, this, [this] {
    rebuildTable();
    rebuildChart();
  });

  auto* controls = new QHBoxLayout;
  controls->addWidget(compareMetric_);
  controls->addWidget(new QLabel(tr("K budget"), this));
  controls->addWidget(keyBudget_);
  controls->addWidget(new QLabel(tr("V budget"), this));
  controls->addWidget(valueBudget_);
  controls->addWidget(logScale_);
  controls->addWidget(status_, 1);
  auto* splitter = new QSplitter(Qt::Vertical, this);
  splitter->addWidget(table_);
  splitter->addWidget(chartView_);
  splitter->setStretchFactor(0, 1);
  splitter->setStretchFactor(1, 1);
  chartView_->setMinimumHeight(220);
  splitter->setSizes({300, 400});
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  layout->addLayout(controls);
  layout->addWidget(splitter, 1);

  const auto budgetEdited = [this] {
    rebuildTable();
    rebuildChart();
    emit budgetsChanged(keyBudget(), valueBudget());
    if (session()) session()->setBudgets(keyBudget(), valueBudget());
  };
  connect(keyBudget_, &QDoubleSpinBox::valueChanged, this, budgetEdited);
  connect(valueBudget_, &QDoubleSpinBox::valueChanged, this, budgetEdited);
  connect(table_, &QTableView::clicked, this, [this](const QModelIndex& index) {
    const QModelIndex source = proxy_->mapToSource(index);
    const int layer = model_->item(source.row(), 0)->data(Qt::UserRole).toInt();
    const int head = model_->item(source.row(), 1)->data(Qt::UserRole).toInt();
    selectedLayer_ = layer;
    selectedHead_ = head;
    emit selected(layer, head);
    if (session()) session()->select(layer, head);
  });
  reset(0);
}

void SummaryView::takeDump(const std::shared_ptr<const Dump>& dump, const ViewContext& context) {
  compare_.clear();
  status_->clear();
  setSelection(context.selection.layer, context.selection.kvHead);
  reset(dump ? dump->info().layers : 0);
}

void SummaryView::clearResults(const QString& reason) {
  compare_.clear();
  reset(expected_);
  status_->setText(reason);
}

void SummaryView::takeSummary(const std::vector<LayerResult>& rows, int layers) {
  layers_ = rows;
  expected_ = layers;
  rebuildTable();
  rebuildChart();
}

void SummaryView::takeComparison(const ComparisonData& a) {
  // A on a dump of its own is matched by layer and kv head number; what it lacks stays empty.
  aName_ = a.otherDump ? QFileInfo(QString::fromStdString(a.otherDump->path)).fileName() : QString();
  aLayers_ = a.otherDump ? a.otherDump->layers : -1;
  aKvHeads_ = a.otherDump ? a.otherDump->kvHeads : -1;
  setComparison(a.pinned, a.summary ? *a.summary : std::vector<LayerResult>{});
}

double SummaryView::keyBudget() const { return keyBudget_->value(); }
double SummaryView::valueBudget() const { return valueBudget_->value(); }

void SummaryView::setBudgets(double key, double value) {
  keyBudget_->setValue(key);
  valueBudget_->setValue(value);
}

void SummaryView::setSelection(int layer, int kvHead) {
  selectedLayer_ = layer;
  selectedHead_ = kvHead;
  highlightSelection();
}

void SummaryView::highlightSelection() {
  for (int r = 0; r < proxy_->rowCount(); ++r) {
    const QModelIndex source = proxy_->mapToSource(proxy_->index(r, 0));
    if (model_->item(source.row(), 0)->data(Qt::UserRole).toInt() == selectedLayer_ &&
        model_->item(source.row(), 1)->data(Qt::UserRole).toInt() == selectedHead_) {
      table_->selectRow(r);
      table_->scrollTo(proxy_->index(r, 0));
      return;
    }
  }
  table_->clearSelection();
}

int SummaryView::highlightedRow() const {
  const QModelIndexList rows = table_->selectionModel() ? table_->selectionModel()->selectedRows() : QModelIndexList{};
  return rows.isEmpty() ? -1 : rows.front().row();
}

void SummaryView::reset(int layers) {
  layers_.clear();
  expected_ = layers;
  rebuildTable();
  rebuildChart();
}

void SummaryView::addLayer(const LayerResult& layer) {
  auto it = std::find_if(layers_.begin(), layers_.end(), [&](const LayerResult& l) { return l.layer == layer.layer; });
  if (it != layers_.end()) *it = layer;
  else layers_.push_back(layer);
  std::sort(layers_.begin(), layers_.end(), [](const LayerResult& a, const LayerResult& b) { return a.layer < b.layer; });
  rebuildTable();
  rebuildChart();
}

bool SummaryView::hasAttention() const {
  for (const LayerResult& l : layers_) {
    for (const HeadResult& h : l.heads) {
      if (h.attention) return true;
    }
  }
  return false;
}

void SummaryView::rebuildTable() {
  model_->clear();
  QStringList headers{tr("layer"), tr("kv\nhead")};
  const QString abMetric = compareMetric_->currentData().toString();
  const int abOffset = pinned_ ? 3 : 0;
  // Short headers (the A/B box names the metric; the tooltips too), so that the table still fits.
  if (pinned_) headers << tr("A") << tr("B") << tr("B − A");
  // Short lines (the case or tensor over the metric) keep the table within the window; the
  // tooltips and the CSV carry the full metric names.
  for (const Column& c : columns()) {
    headers << QString::fromUtf8(c.header)
                   .replace(QLatin1Char(' '), QLatin1Char('\n'))
                   .replace(QStringLiteral("output_rel_error"), QStringLiteral("output\nrel_error"));
  }
  model_->setHorizontalHeaderLabels(headers);
  model_->setHeaderData(0, Qt::Horizontal, tr("The layer."), Qt::ToolTipRole);
  model_->setHeaderData(1, Qt::Horizontal, tr("The kv head; its query heads share it."), Qt::ToolTipRole);
  for (size_t i = 0; i < columns().size(); ++i) {
    model_->setHeaderData(static_cast<int>(i) + 2 + abOffset, Qt::Horizontal, tr(columns()[i].tip), Qt::ToolTipRole);
  }
  if (pinned_) {
    model_->setHeaderData(2, Qt::Horizontal, tr("%1 under setting A (pinned).").arg(abMetric), Qt::ToolTipRole);
    model_->setHeaderData(3, Qt::Horizontal, tr("%1 under setting B (the controls; the columns on the right are B's).").arg(abMetric),
                          Qt::ToolTipRole);
    model_->setHeaderData(4, Qt::Horizontal,
                          tr("B − A of %1: click to sort by it. Red where B is worse, green where it is better.").arg(abMetric),
                          Qt::ToolTipRole);
  }
  const QColor over(231, 76, 60, 90), within(46, 204, 113, 70);
  for (const LayerResult& l : layers_) {
    for (const HeadResult& h : l.heads) {
      QList<QStandardItem*> row;
      auto* layerItem = new QStandardItem(QString::number(l.layer));
      layerItem->setData(l.layer, Qt::UserRole);
      layerItem->setToolTip(tr("Layer %1: K %2 · V %3 (the K spec and V spec columns, at the right)")
                                .arg(l.layer)
                                .arg(QString::fromStdString(toString(l.keySpec)), QString::fromStdString(toString(l.valueSpec))));
      auto* headItem = new QStandardItem(QString::number(h.kvHead));
      headItem->setData(h.kvHead, Qt::UserRole);
      row << layerItem << headItem;
      if (pinned_) {
        // A, B and B − A of the chosen metric; numbers sort by value (Qt::UserRole).
        const HeadResult* a = comparisonHead(l.layer, h.kvHead);
        const std::optional<double> va = a ? metricOf(*a, abMetric) : std::nullopt;
        const std::optional<double> vb = metricOf(h, abMetric);
        std::optional<double> d;
        if (va && vb) d = *vb - *va;
        const std::optional<double> cells[3] = {va, vb, d};
        for (int k = 0; k < 3; ++k) {
          const std::optional<double>& v = cells[k];
          // "…": A's layer is still being evaluated; "–": A has no figure (or A's own dump has no
          // such layer or kv head).
          const bool notInA = aLayers_ >= 0 && (l.layer >= aLayers_ || h.kvHead >= aKvHeads_);
          auto* item = new QStandardItem(v ? QString::number(*v, 'g', 3)
                                           : (a == nullptr && k != 1 && !notInA ? tr("…") : QStringLiteral("–")));
          if (notInA && k != 1) item->setToolTip(tr("A's dump (%1) has no layer %2, kv head %3").arg(aName_).arg(l.layer).arg(h.kvHead));
          if (v) {
            item->setData(*v, Qt::UserRole);
            item->setToolTip(QString::number(*v, 'g', 9));
          }
          row << item;
        }
        if (d && *d != 0) {
          const bool better = higherIsBetter(abMetric) ? *d > 0 : *d < 0;
          row.back()->setBackground(better ? within : over);
        }
      }
      for (const Column& c : columns()) {
        auto* item = new QStandardItem;
        if (h.skipped) {
          item->setText(tr("skipped"));
          item->setToolTip(QString::fromStdString(h.skipReason));
        } else if (const auto v = c.get(h)) {
          // Three digits keep the table within the window; the tooltip and the CSV have them all.
          item->setText(QString::number(*v, 'g', 3));
          item->setToolTip(QString::number(*v, 'g', 9));
          item->setData(*v, Qt::UserRole);
          if (c.budget != Budget::None) {
            const double budget = c.budget == Budget::Key ? keyBudget() : valueBudget();
            item->setBackground(*v <= budget ? within : over);
          }
        } else {
          item->setText(QStringLiteral("–"));
        }
        row << item;
      }
      // Each layer's own specs (a plan gives layers different ones, §12).
      for (const QuantSpec* spec : {&l.keySpec, &l.valueSpec}) {
        auto* item = new QStandardItem(QString::fromStdString(toString(*spec)));
        item->setData(item->text(), Qt::UserRole);
        row << item;
      }
      if (model_->rowCount() == 0) {
        const int specColumn = static_cast<int>(row.size()) - 2;
        model_->setHorizontalHeaderItem(specColumn, new QStandardItem(tr("K spec")));
        model_->setHorizontalHeaderItem(specColumn + 1, new QStandardItem(tr("V spec")));
        model_->setHeaderData(specColumn, Qt::Horizontal, tr("The spec this layer's keys were quantized with."),
                              Qt::ToolTipRole);
        model_->setHeaderData(specColumn + 1, Qt::Horizontal, tr("The spec this layer's values were quantized with."),
                              Qt::ToolTipRole);
      }
      model_->appendRow(row);
    }
  }
  // joint kl_mean equals key_only kl_mean by definition (V does not change P, §6): the CSV and
  // report keep it, the table does not spend a column on it.
  for (size_t i = 0; i < columns().size(); ++i) {
    table_->setColumnHidden(static_cast<int>(i) + 2 + abOffset,
                            std::string_view(columns()[i].header) == "joint kl_mean");
  }
  measureColumns();
  fitColumns();
  highlightSelection();
  status_->setText(expected_ > 0 && static_cast<int>(layers_.size()) < expected_
                       ? tr("%1 of %2 layers evaluated…").arg(layers_.size()).arg(expected_)
                       : (expected_ > 0 ? tr("all %1 layers evaluated").arg(expected_) : tr("no dump")));
}

void SummaryView::measureColumns() {
  // What a column needs: its widest header line (headers wrap at their "\n") or its widest
  // figure; the spec columns' long strings are not counted (they elide, with the spec in the
  // row's tooltip). Measured once per rebuild; a resize only compares with the new width.
  QHeaderView* header = table_->horizontalHeader();
  const QFontMetrics headerFont = header->fontMetrics();
  const QFontMetrics cellFont = table_->fontMetrics();
  const int pad = 2 * table_->style()->pixelMetric(QStyle::PM_HeaderMargin) + 8;
  const int specColumns = model_->columnCount() - 2;
  columnNeeds_ = {};
  for (int c = 0; c < model_->columnCount(); ++c) {
    if (table_->isColumnHidden(c)) continue;
    int widest = 0;
    for (const QString& line : model_->headerData(c, Qt::Horizontal).toString().split(QLatin1Char('\n')))
      widest = std::max(widest, headerFont.horizontalAdvance(line));
    if (c < specColumns) {
      for (int r = 0; r < model_->rowCount(); ++r)
        widest = std::max(widest, cellFont.horizontalAdvance(model_->data(model_->index(r, c)).toString()));
    }
    if (c < 2) {
      columnNeeds_.fixed += widest + pad;
    } else {
      columnNeeds_.widestStretched = std::max(columnNeeds_.widestStretched, widest + pad);
      ++columnNeeds_.stretched;
    }
  }
}

void SummaryView::fitColumns() {
  // The metric columns share the width the table has when every header and figure fits in it
  // (no sideways scrolling); when they do not (the A/B columns on a narrow window) each column
  // takes what its header and figures need and the table scrolls sideways: nothing is cut.
  // Stretched columns share the width equally: each must get what the widest of them needs.
  const ColumnNeeds& n = columnNeeds_;
  const bool fits = n.stretched == 0 || (table_->viewport()->width() - n.fixed) / n.stretched >= n.widestStretched;
  QHeaderView* header = table_->horizontalHeader();
  header->setSectionResizeMode(fits ? QHeaderView::Stretch : QHeaderView::ResizeToContents);
  header->setSectionResizeMode(0, QHeaderView::ResizeToContents);
  header->setSectionResizeMode(1, QHeaderView::ResizeToContents);
}

void SummaryView::resizeEvent(QResizeEvent* event) {
  QWidget::resizeEvent(event);
  fitColumns();
}

void SummaryView::rebuildChart() {
  chart_->removeAllSeries();
  xAxis_->clear();
  const bool attentionMetrics = hasAttention();
  chart_->setTitle(attentionMetrics ? tr("output_rel_error per layer (mean over kv heads)")
                                    : tr("rel_error per layer (no queries in this dump)"));
  if (layers_.empty()) return;
  if (pinned_) {
    // A/B comparison: the chosen metric for A and B per layer (mean over kv heads).
    const QString metric = compareMetric_->currentData().toString();
    chart_->setTitle(tr("%1 per layer (mean over kv heads): A vs B").arg(metric));
    auto* aSet = new QBarSet(aName_.isEmpty() ? tr("A (pinned)") : tr("A (%1)").arg(aName_));
    auto* bSet = new QBarSet(tr("B (the controls)"));
    aSet->setColor(QColor(148, 103, 189));
    bSet->setColor(QColor(255, 127, 14));
    QStringList categories;
    double top = 0, bottom = 0;
    const auto mean = [&](const LayerResult* l) {
      double sum = 0;
      int n = 0;
      if (l) {
        for (const HeadResult& h : l->heads) {
          if (const auto v = metricOf(h, metric)) {
            sum += *v;
            ++n;
          }
        }
      }
      return n > 0 ? sum / n : 0.0;
    };
    for (const LayerResult& l : layers_) {
      const LayerResult* a = nullptr;
      for (const LayerResult& c : compare_) {
        if (c.layer == l.layer) a = &c;
      }
      const double va = mean(a), vb = mean(&l);
      *aSet << va;
      *bSet << vb;
      top = std::max({top, va, vb});
      bottom = std::min({bottom, va, vb});
      categories << QString::number(l.layer);
    }
    auto* bars = new QBarSeries;
    bars->append(aSet);
    bars->append(bSet);
    chart_->addSeries(bars);
    xAxis_->append(categories);
    if (chart_->axes(Qt::Vertical).contains(yLog_)) {
      chart_->removeAxis(yLog_);
      yLog_->setParent(this);
    }
    if (!chart_->axes(Qt::Vertical).contains(yAxis_)) chart_->addAxis(yAxis_, Qt::AlignLeft);
    const NiceRange r = niceRange(bottom, top > bottom ? top : bottom + 1);
    setAxisRange(yAxis_, r.lo, r.hi);
    yAxis_->setTitleText(metric);
    bars->attachAxis(xAxis_);
    bars->attachAxis(yAxis_);
    return;
  }
  auto* keySet = new QBarSet(attentionMetrics ? tr("key_only") : tr("K"));
  auto* valueSet = new QBarSet(attentionMetrics ? tr("value_only") : tr("V"));
  auto* jointSet = attentionMetrics ? new QBarSet(tr("joint")) : nullptr;
  QStringList categories;
  double top = std::max(keyBudget(), valueBudget());
  double positiveLo = 0;  // the smallest positive bar or budget, for the log axis floor
  for (double b : {keyBudget(), valueBudget()}) {
    if (b > 0) positiveLo = positiveLo > 0 ? std::min(positiveLo, b) : b;
  }
  for (const LayerResult& l : layers_) {
    double k = 0, v = 0, j = 0;
    int n = 0;
    for (const HeadResult& h : l.heads) {
      if (h.skipped) continue;
      k += keyMetric(h);
      v += valueMetric(h);
      if (h.attention) j += h.attention->joint.outputRelError;
      ++n;
    }
    if (n > 0) {
      k /= n;
      v /= n;
      j /= n;
    }
    *keySet << k;
    *valueSet << v;
    if (jointSet) *jointSet << j;
    top = std::max({top, k, v, j});
    for (double x : {k, v, j}) {
      if (x > 0) positiveLo = positiveLo > 0 ? std::min(positiveLo, x) : x;
    }
    categories << QString::number(l.layer);
  }
  auto* bars = new QBarSeries;
  bars->append(keySet);
  bars->append(valueSet);
  if (jointSet) bars->append(jointSet);
  chart_->addSeries(bars);
  QBarCategoryAxis* xAxis = xAxis_;
  QValueAxis* yAxis = yAxis_;
  xAxis->append(categories);
  // A log axis when the bars span decades (value_only ≈ 0.1 beside key_only ≈ 10), unless the
  // user chose; zero bars sit at the axis floor.
  if (!logChosen_) logScale_->setChecked(positiveLo > 0 && top / positiveLo >= 100);
  const bool log = logScale_->isChecked();
  QAbstractAxis* wanted = log ? static_cast<QAbstractAxis*>(yLog_) : yAxis;
  QAbstractAxis* other = log ? static_cast<QAbstractAxis*>(yAxis) : yLog_;
  if (chart_->axes(Qt::Vertical).contains(other)) {
    chart_->removeAxis(other);
    other->setParent(this);  // removeAxis hands ownership back; kept for the next switch
  }
  if (!chart_->axes(Qt::Vertical).contains(wanted)) chart_->addAxis(wanted, Qt::AlignLeft);
  if (log) {
    setDecadeRange(yLog_, (positiveLo > 0 ? positiveLo : top / 100) / 1.5, top * 1.5);
  } else {
    setAxisRange(yAxis, 0, niceRange(0, top).hi);
  }
  const QString metric = attentionMetrics ? tr("output_rel_error") : tr("rel_error");
  yAxis->setTitleText(metric);
  yLog_->setTitleText(metric + tr(" (log)"));
  bars->attachAxis(xAxis);
  bars->attachAxis(wanted);
  // Budget lines across the bars: on a category axis, category i sits at x = i.
  const double x0 = -0.5, x1 = static_cast<double>(categories.size()) - 0.5;
  const auto budgetLine = [&](double y, const QString& name, const QColor& colour, Qt::PenStyle style) {
    auto* line = new QLineSeries;
    line->setName(name);
    line->append(x0, y);
    line->append(x1, y);
    QPen pen(colour);
    pen.setStyle(style);
    pen.setWidthF(2.0);
    line->setPen(pen);
    chart_->addSeries(line);
    line->attachAxis(xAxis);
    line->attachAxis(wanted);
  };
  budgetLine(keyBudget(), tr("K budget"), keySet->color().darker(150), Qt::DashLine);
  budgetLine(valueBudget(), tr("V budget"), valueSet->color().darker(150), Qt::DotLine);
}

void SummaryView::renderTo(QPainter& painter, const QRectF& target) { renderChart(chart_, painter, target); }


QString SummaryView::toCsv() const {
  QString out = QStringLiteral("layer,kv_head");
  for (const Column& c : columns()) out += QLatin1Char(',') + QString::fromUtf8(c.header).replace(QLatin1Char(' '), QLatin1Char('_'));
  out += QStringLiteral(",key_spec,value_spec");
  // A/B comparison: every metric of A, then B − A, after B's.
  if (pinned_) {
    for (const Column& c : columns()) out += QStringLiteral(",a_") + csvName(c);
    for (const Column& c : columns()) out += QStringLiteral(",b_minus_a_") + csvName(c);
  }
  out += QLatin1Char('\n');
  for (const LayerResult& l : layers_) {
    for (const HeadResult& h : l.heads) {
      out += QStringLiteral("%1,%2").arg(l.layer).arg(h.kvHead);
      for (const Column& c : columns()) {
        const auto v = h.skipped ? std::nullopt : c.get(h);
        out += QLatin1Char(',') + (v ? QString::number(*v, 'g', 9) : QString());
      }
      // Spec strings hold ',' (group=…,clip=…): quoted as CSV quotes a field.
      for (const QuantSpec* spec : {&l.keySpec, &l.valueSpec}) {
        out += QStringLiteral(",\"%1\"").arg(QString::fromStdString(toString(*spec)).replace(QLatin1Char('"'), QStringLiteral("\"\"")));
      }
      if (pinned_) {
        const HeadResult* a = comparisonHead(l.layer, h.kvHead);
        for (int pass = 0; pass < 2; ++pass) {
          for (const Column& c : columns()) {
            const auto va = a && !a->skipped ? c.get(*a) : std::nullopt;
            const auto vb = h.skipped ? std::nullopt : c.get(h);
            const std::optional<double> v = pass == 0 ? va : (va && vb ? std::optional<double>(*vb - *va) : std::nullopt);
            out += QLatin1Char(',') + (v ? QString::number(*v, 'g', 9) : QString());
          }
        }
      }
      out += QLatin1Char('\n');
    }
  }
  return out;
}

QString SummaryView::tabTitle() const { return tr("Layer summary"); }

nlohmann::json SummaryView::saveState() const {
  return {{"log", logScale_->isChecked()}, {"budgets", {{"key", keyBudget()}, {"value", valueBudget()}}}};
}

void SummaryView::loadState(const nlohmann::json& state) {
  if (state.contains("budgets")) {
    setBudgets(state["budgets"].value("key", 0.05), state["budgets"].value("value", 0.05));
  }
  if (state.contains("log")) {
    logScale_->setChecked(state.value("log", false));
    emit logScale_->clicked(logScale_->isChecked());  // a choice, as a click is
  }
}

}  // namespace kvscope::ui
