// SPDX-License-Identifier: GPL-3.0-or-later
#include "ui/widgets/dataset_panel.h"

#include <QFileInfo>
#include <QFont>
#include <QHeaderView>
#include <QLabel>
#include <QLocale>
#include <QTreeWidget>
#include <QVBoxLayout>

namespace kvscope::ui {

namespace {
constexpr int kLayerRole = Qt::UserRole + 1;
constexpr int kHeadRole = Qt::UserRole + 2;
constexpr int kMarkedRole = Qt::UserRole + 3;  // the layer's K or V spec is not the default
}  // namespace

DatasetPanel::DatasetPanel(QWidget* parent) : QWidget(parent) {
  summary_ = new QLabel(this);
  summary_->setWordWrap(true);
  summary_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  summary_->setToolTip(tr("The open dump's model, shape and the size of its KV cache in fp16."));
  tree_ = new QTreeWidget(this);
  tree_->setHeaderLabels({tr("Item"), tr("Details")});
  tree_->header()->setSectionResizeMode(0, QHeaderView::ResizeToContents);
  tree_->setToolTip(tr("Select a layer or a kv head to show it in every view."));
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  layout->addWidget(summary_);
  layout->addWidget(tree_, 1);
  connect(tree_, &QTreeWidget::currentItemChanged, this, [this](QTreeWidgetItem* item) {
    if (updating_ || !item) return;
    const QVariant layer = item->data(0, kLayerRole);
    if (!layer.isValid()) return;
    const QVariant head = item->data(0, kHeadRole);
    emit selected(layer.toInt(), head.isValid() ? head.toInt() : -1);
  });
  clear();
}

void DatasetPanel::clear() {
  updating_ = true;
  tree_->clear();
  summary_->setText(tr("No dump open. Use File ▸ Open or drop a file here."));
  updating_ = false;
}

void DatasetPanel::setDump(const DumpInfo& info) {
  updating_ = true;
  tree_->clear();
  const QLocale locale;
  summary_->setText(
      tr("<b>%1</b><br>model: %2<br>%3 layers · %4 kv heads · %5 query heads · %6 tokens · "
         "%7 queries · head dim %8 · %9<br>fp16 KV cache: %10 bytes per token")
          .arg(QFileInfo(QString::fromStdString(info.path)).fileName().toHtmlEscaped(),
               info.model.empty() ? tr("(unnamed)") : QString::fromStdString(info.model).toHtmlEscaped())
          .arg(info.layers)
          .arg(info.kvHeads)
          .arg(info.heads)
          .arg(info.tokens)
          .arg(info.queries)
          .arg(info.headDim)
          .arg(QString::fromStdString(info.dtype), locale.toString(static_cast<qlonglong>(info.bytesPerTokenFp16()))));

  const QString shape = QStringLiteral("[%1, %2, %3]").arg(info.kvHeads).arg(info.tokens).arg(info.headDim);
  QStringList tensors{QStringLiteral("key %1").arg(shape), QStringLiteral("value %1").arg(shape)};
  if (info.hasQuery) tensors << QStringLiteral("query [%1, %2, %3]").arg(info.heads).arg(info.queries).arg(info.headDim);
  if (info.hasKeyPreRope) tensors << QStringLiteral("key_pre_rope %1").arg(shape);
  auto* layers = new QTreeWidgetItem(tree_, {tr("layers"), tr("%1").arg(info.layers)});
  for (int l = 0; l < info.layers; ++l) {
    auto* layer = new QTreeWidgetItem(layers, {tr("layer %1").arg(l), tensors.join(QStringLiteral(", "))});
    layer->setData(0, kLayerRole, l);
    for (int g = 0; g < info.kvHeads; ++g) {
      const int group = info.groupSize();
      QString detail;
      if (info.hasQuery && group > 0) {
        detail = tr("query heads %1–%2").arg(g * group).arg(g * group + group - 1);
      }
      auto* head = new QTreeWidgetItem(layer, {tr("kv head %1").arg(g), detail});
      head->setData(0, kLayerRole, l);
      head->setData(0, kHeadRole, g);
    }
  }
  layers->setExpanded(true);
  auto* extras = new QTreeWidgetItem(tree_, {tr("also in the file"), QString()});
  const auto flag = [&](bool has, const QString& name) {
    new QTreeWidgetItem(extras, {name, has ? tr("yes") : tr("no")});
  };
  flag(info.hasTokens, QStringLiteral("tokens"));
  flag(info.hasTokenText, QStringLiteral("token_text"));
  flag(info.hasLogits, QStringLiteral("logits"));
  new QTreeWidgetItem(extras, {QStringLiteral("rope"), QStringLiteral("θ=%1, %2").arg(info.ropeTheta).arg(QString::fromUtf8(ropeStyleName(info.ropeStyle)))});
  new QTreeWidgetItem(extras, {QStringLiteral("softmax_scale"), QString::number(info.softmaxScale, 'g', 6)});
  if (info.sequences > 1) new QTreeWidgetItem(extras, {tr("sequences"), QString::number(info.sequences)});
  for (const std::string& w : info.warnings) new QTreeWidgetItem(extras, {tr("warning"), QString::fromStdString(w)});
  tree_->resizeColumnToContents(0);
  updating_ = false;
}

void DatasetPanel::setLayerSpecs(const std::vector<QuantSpec>& key, const std::vector<QuantSpec>& value,
                                 const QuantSpec& keyDefault, const QuantSpec& valueDefault) {
  QTreeWidgetItem* layers = tree_->topLevelItem(0);
  if (!layers) return;
  for (int l = 0; l < layers->childCount(); ++l) {
    QTreeWidgetItem* item = layers->child(l);
    const auto at = static_cast<size_t>(l);
    if (at >= key.size() || at >= value.size()) continue;
    const bool keyOverridden = key[at] != keyDefault;
    const bool valueOverridden = value[at] != valueDefault;
    const bool marked = keyOverridden || valueOverridden;
    if (item->font(0).bold() != marked) {
      QFont font = item->font(0);
      font.setBold(marked);
      item->setFont(0, font);
    }
    // Only what changed: this runs on every slider step, and each set repaints the tree.
    if (item->data(0, kMarkedRole).toBool() != marked) item->setData(0, kMarkedRole, marked);
    const QString tip = tr("Layer %1\nK: %2%3\nV: %4%5")
                            .arg(l)
                            .arg(QString::fromStdString(toString(key[at])), keyOverridden ? tr(" (override)") : QString(),
                                 QString::fromStdString(toString(value[at])),
                                 valueOverridden ? tr(" (override)") : QString());
    if (item->toolTip(0) != tip) {
      item->setToolTip(0, tip);
      item->setToolTip(1, tip);
    }
    // The name says it too, for readers who do not hover.
    const QString name = marked ? tr("layer %1 ◆").arg(l) : tr("layer %1").arg(l);
    if (item->text(0) != name) item->setText(0, name);
  }
}

bool DatasetPanel::layerMarked(int layer) const {
  QTreeWidgetItem* layers = tree_->topLevelItem(0);
  QTreeWidgetItem* item = layers ? layers->child(layer) : nullptr;
  return item && item->data(0, kMarkedRole).toBool();
}

void DatasetPanel::setSelection(int layer, int kvHead) {
  updating_ = true;
  if (QTreeWidgetItem* layers = tree_->topLevelItem(0)) {
    if (QTreeWidgetItem* l = layers->child(layer)) {
      QTreeWidgetItem* target = kvHead >= 0 && kvHead < l->childCount() ? l->child(kvHead) : l;
      tree_->setCurrentItem(target);
      tree_->scrollToItem(target);
    }
  }
  updating_ = false;
}

}  // namespace kvscope::ui
