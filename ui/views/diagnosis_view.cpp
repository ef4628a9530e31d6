// SPDX-License-Identifier: GPL-3.0-or-later
#include "ui/views/diagnosis_view.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPainter>
#include <QPushButton>
#include <QTreeWidget>
#include <QVBoxLayout>

#include <algorithm>

#include "core/inspect/view_data.h"
#include "core/quant/plan.h"
#include "ui/state/session.h"
#include "ui/views/table_text.h"
#include "ui/workers/job_runner.h"

namespace kvscope::ui {

namespace {

QString q(const std::string& s) { return QString::fromStdString(s); }

enum Column { kSeverity, kWhat, kLayer, kKvHead, kQueryHead, kChannel, kToken, kTensor, kNumbers, kColumns };

QColor severityColour(const char* severity) {
  const std::string s = severity;
  if (s == "high") return QColor(0xc6, 0x28, 0x28);
  if (s == "medium") return QColor(0xe0, 0x8a, 0x00);
  return QColor(0x75, 0x75, 0x75);
}

QString numbersText(const Evidence& e) {
  QStringList parts;
  for (const auto& [name, v] : e.numbers) parts << QStringLiteral("%1 %2").arg(q(name)).arg(v, 0, 'g', 4);
  return parts.join(QStringLiteral(", "));
}

QString placeText(const Evidence& e) {
  QStringList parts;
  if (e.layer >= 0) parts << QObject::tr("layer %1").arg(e.layer);
  if (e.kvHead >= 0) parts << QObject::tr("kv head %1").arg(e.kvHead);
  if (e.queryHead >= 0) parts << QObject::tr("query head %1").arg(e.queryHead);
  if (e.channel >= 0) parts << QObject::tr("channel %1").arg(e.channel);
  if (e.token >= 0) parts << QObject::tr("token %1").arg(e.token);
  if (!e.tensor.empty()) parts << q(e.tensor);
  return parts.join(QStringLiteral(" · "));
}

QString cell(int v) { return v >= 0 ? QString::number(v) : QString(); }

QString csvField(QString s) {
  if (s.contains(QLatin1Char(',')) || s.contains(QLatin1Char('"')) || s.contains(QLatin1Char('\n'))) {
    s.replace(QLatin1Char('"'), QStringLiteral("\"\""));
    return QLatin1Char('"') + s + QLatin1Char('"');
  }
  return s;
}

}  // namespace

Expected<std::pair<Plan, Plan>> applySuggestionToPlans(const Plan& key, const Plan& value,
                                                       const SettingSuggestion& suggestion, const DumpInfo& info) {
  SpecContext context;
  context.kvHeads = info.kvHeads;
  context.headDim = info.headDim;
  context.hasKeyPreRope = info.hasKeyPreRope;
  std::pair<Plan, Plan> out{key, value};
  if (suggestion.key) {
    context.isKey = true;
    auto k = applySuggestion(key, suggestion, context);
    if (!k) return k.status().withContext("K");
    out.first = *k;
  }
  if (suggestion.value) {
    context.isKey = false;
    auto v = applySuggestion(value, suggestion, context);
    if (!v) return v.status().withContext("V");
    out.second = *v;
  }
  return out;
}

DiagnosisView::DiagnosisView(QWidget* parent) : QWidget(parent) {
  runner_ = new JobRunner(tr("diagnosis"), this);
  tree_ = new QTreeWidget(this);
  tree_->setColumnCount(kColumns);
  tree_->setHeaderLabels({tr("Severity"), tr("Finding / evidence"), tr("Layer"), tr("KV head"), tr("Query head"),
                          tr("Channel"), tr("Token"), tr("Tensor"), tr("Numbers")});
  tree_->setRootIsDecorated(true);
  tree_->setAlternatingRowColors(true);
  // One line per row, figures whole (issue 32 defect 6): a long finding is elided and its
  // tooltip holds the whole text; the columns of figures are as wide as their contents.
  setUpFigureTree(tree_);
  tree_->header()->setStretchLastSection(false);
  status_ = new QLabel(this);
  status_->setObjectName(QStringLiteral("diagnosisStatus"));
  status_->setWordWrap(true);
  advice_ = new QLabel(this);
  advice_->setObjectName(QStringLiteral("diagnosisAdvice"));
  advice_->setWordWrap(true);
  advice_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  applyBox_ = new QWidget(this);
  applyLayout_ = new QHBoxLayout(applyBox_);
  applyLayout_->setContentsMargins(0, 0, 0, 0);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  layout->addWidget(status_);
  layout->addWidget(tree_, 1);
  layout->addWidget(advice_);
  layout->addWidget(applyBox_);

  connect(tree_, &QTreeWidget::itemClicked, this, [this](QTreeWidgetItem* item) { onClicked(item); });
  connect(tree_, &QTreeWidget::itemActivated, this, [this](QTreeWidgetItem* item) { onClicked(item); });
  connect(tree_, &QTreeWidget::currentItemChanged, this, [this](QTreeWidgetItem* item) {
    showFinding(item ? indexOf(item).first : -1);
  });
  connect(runner_, &JobRunner::progressed, this, [this](double fraction, const QString&) {
    if (runningDump_) status_->setText(tr("Diagnosing… %1%").arg(static_cast<int>(fraction * 100)));
  });
  connect(runner_, &JobRunner::busyChanged, this, [this](bool busy) {
    if (!busy && runningDump_) {
      runningDump_.reset();
      status_->setText(tr("Not diagnosed (cancelled or failed); show this view again to rerun."));
    }
  });
  connect(runner_, &JobRunner::failed, this, [this](const QString& message) { status_->setText(tr("⚠ %1").arg(message)); });
  showFinding(-1);
}

DiagnosisView::~DiagnosisView() {
  runner_->cancel();
  runner_->waitForIdle();
}

void DiagnosisView::setDump(std::shared_ptr<const Dump> dump) {
  runner_->cancel();
  runningDump_.reset();
  dump_ = std::move(dump);
  diagnosis_.reset();
  diagnosisDump_.reset();
  fill();
  status_->setText(tr("The diagnosis runs when this view is shown."));
  if (isVisible()) compute();
}

void DiagnosisView::compute() {
  if (!dump_ || upToDate() || runningDump_ == dump_) return;
  runningDump_ = dump_;
  status_->setText(tr("Diagnosing…"));
  auto dump = dump_;
  runner_->start<DiagnosisPtr>(
      [dump](const Progress& progress) -> Expected<DiagnosisPtr> {
        auto d = diagnose(*dump, DiagnoseOptions{}, progress);
        if (!d) return d.status();
        return DiagnosisPtr(std::make_shared<const Diagnosis>(std::move(d).value()));
      },
      [this, dump](DiagnosisPtr d) {
        runningDump_.reset();
        if (dump != dump_) return;
        diagnosis_ = std::move(d);
        diagnosisDump_ = dump;
        fill();
        emit computed();
        exportReady();
      });
}

void DiagnosisView::showEvent(QShowEvent* event) {
  QWidget::showEvent(event);
  compute();
}

std::pair<int, int> DiagnosisView::indexOf(const QTreeWidgetItem* item) {
  if (item == nullptr) return {-1, -1};
  if (item->parent() == nullptr) return {item->data(0, Qt::UserRole).toInt(), -1};
  return {item->parent()->data(0, Qt::UserRole).toInt(), item->parent()->indexOfChild(const_cast<QTreeWidgetItem*>(item))};
}

void DiagnosisView::fill() {
  tree_->clear();
  shownFinding_ = -1;
  if (!diagnosis_) {
    showFinding(-1);
    return;
  }
  const Diagnosis& d = *diagnosis_;
  for (size_t i = 0; i < d.findings.size(); ++i) {
    const Finding& f = d.findings[i];
    auto* top = new QTreeWidgetItem(tree_);
    const char* severity = findingSeverity(f.kind);
    top->setText(kSeverity, QString::fromLatin1(severity));
    top->setForeground(kSeverity, severityColour(severity));
    QFont bold = top->font(kWhat);
    bold.setBold(true);
    top->setFont(kSeverity, bold);
    top->setFont(kWhat, bold);
    top->setText(kWhat, QStringLiteral("%1: %2").arg(QString::fromLatin1(findingKindName(f.kind)), q(f.summary)));
    top->setToolTip(kWhat, q(f.summary) + QStringLiteral("\n\n") + tr("What to do: ") + q(f.advice));
    top->setData(0, Qt::UserRole, static_cast<int>(i));
    if (f.matches > static_cast<int>(f.evidence.size())) {
      top->setText(kNumbers, tr("%1 places; the strongest %2 below").arg(groupedInteger(f.matches)).arg(f.evidence.size()));
    }
    for (const Evidence& e : f.evidence) {
      auto* row = new QTreeWidgetItem(top);
      row->setText(kWhat, placeText(e));
      row->setToolTip(kWhat, placeText(e));
      row->setText(kLayer, cell(e.layer));
      row->setText(kKvHead, cell(e.kvHead));
      row->setText(kQueryHead, cell(e.queryHead));
      row->setText(kChannel, cell(e.channel));
      row->setText(kToken, e.token >= 0 ? QString::number(e.token) : QString());
      row->setText(kTensor, q(e.tensor));
      row->setText(kNumbers, numbersText(e));
      row->setToolTip(kNumbers, numbersText(e));
    }
    top->setExpanded(true);
  }
  tree_->resizeColumnToContents(kSeverity);
  for (int c = kLayer; c <= kTensor; ++c) tree_->resizeColumnToContents(c);
  // The finding column is as wide as its evidence rows' places (a finding's summary is elided:
  // it is whole in its tooltip and under the list); the numbers take the rest.
  const QFontMetrics metrics(tree_->font());
  int places = 0;
  for (int i = 0; i < tree_->topLevelItemCount(); ++i) {
    const QTreeWidgetItem* top = tree_->topLevelItem(i);
    for (int j = 0; j < top->childCount(); ++j) places = std::max(places, metrics.horizontalAdvance(top->child(j)->text(kWhat)));
  }
  tree_->setColumnWidth(kWhat, std::max(260, places + 2 * tree_->indentation() + 16));
  // The numbers whole (the tree scrolls sideways when they are long), at least to the right edge.
  tree_->resizeColumnToContents(kNumbers);
  int used = 0;
  for (int c = 0; c < kNumbers; ++c) used += tree_->columnWidth(c);
  tree_->setColumnWidth(kNumbers, std::max(tree_->columnWidth(kNumbers), tree_->viewport()->width() - used));
  QString text = d.findings.empty() ? tr("No findings: nothing in this dump is known to make it hard to quantize.")
                                    : tr("%1 finding(s) over %2 layer(s).").arg(d.findings.size()).arg(d.layers.size());
  for (const std::string& n : d.notes) text += QStringLiteral(" ") + q(n) + QLatin1Char('.');
  text += tr(" Click a finding or one of its evidence rows to select that layer, kv head (and channel or token) in "
             "the other views. Thresholds: docs/diagnose.md.");
  status_->setText(text);
  if (!d.findings.empty()) tree_->setCurrentItem(tree_->topLevelItem(0));
  else showFinding(-1);
}

QList<QPushButton*> DiagnosisView::applyButtons() const { return applyBox_->findChildren<QPushButton*>(); }

void DiagnosisView::showFinding(int finding) {
  if (finding == shownFinding_ && finding >= 0) return;
  shownFinding_ = finding;
  while (QLayoutItem* item = applyLayout_->takeAt(0)) {
    if (QWidget* w = item->widget()) {
      w->setParent(nullptr);  // out of findChildren at once; deleted when the event loop runs
      w->deleteLater();
    }
    delete item;
  }
  if (!diagnosis_ || finding < 0 || static_cast<size_t>(finding) >= diagnosis_->findings.size()) {
    advice_->setText(diagnosis_ ? tr("Select a finding to see what to do.") : QString());
    applyBox_->setVisible(false);
    return;
  }
  const Finding& f = diagnosis_->findings[static_cast<size_t>(finding)];
  advice_->setText(tr("<b>%1</b> (%2): %3.<br><b>What to do:</b> %4")
                       .arg(QString::fromLatin1(findingKindName(f.kind)), QString::fromLatin1(findingSeverity(f.kind)),
                            q(f.summary).toHtmlEscaped(), q(f.advice).toHtmlEscaped()));
  const std::vector<SettingSuggestion> suggestions = suggestedSettings(f, diagnosis_->dump);
  for (const SettingSuggestion& s : suggestions) {
    auto* button = new QPushButton(tr("Apply: %1").arg(q(s.label)), applyBox_);
    button->setObjectName(QStringLiteral("apply:%1").arg(q(s.option)));
    button->setToolTip(tr("Set %1 on the %2 setting (its default and every layer override); Edit ▸ Undo takes it back.")
                           .arg(q(s.option), s.key && s.value ? tr("K and V") : (s.key ? tr("K") : tr("V"))));
    connect(button, &QPushButton::clicked, this, [this, s] {
      emit applyRequested(s);
      applySuggestion(s);
    });
    applyLayout_->addWidget(button);
  }
  applyLayout_->addStretch(1);
  applyBox_->setVisible(!suggestions.empty());
}

void DiagnosisView::onClicked(QTreeWidgetItem* item) {
  if (!diagnosis_ || item == nullptr) return;
  const auto [finding, evidence] = indexOf(item);
  if (finding < 0 || static_cast<size_t>(finding) >= diagnosis_->findings.size()) return;
  const Finding& f = diagnosis_->findings[static_cast<size_t>(finding)];
  showFinding(finding);
  if (evidence >= 0 && static_cast<size_t>(evidence) < f.evidence.size()) {
    emit evidenceSelected(f.evidence[static_cast<size_t>(evidence)]);
    if (session()) session()->pointAt(f.evidence[static_cast<size_t>(evidence)]);
    return;
  }
  // A finding's own row: its strongest evidence that names a place.
  for (const Evidence& e : f.evidence) {
    if (e.layer >= 0) {
      emit evidenceSelected(e);
      if (session()) session()->pointAt(e);
      return;
    }
  }
}

void DiagnosisView::applySuggestion(const SettingSuggestion& s) {
  if (!session() || !dump_) return;
  auto plans = applySuggestionToPlans(session()->keyPlan(), session()->valuePlan(), s, dump_->info());
  if (!plans) {
    session()->reportError(tr("diagnosis"), q(plans.status().message()));
    return;
  }
  session()->setPlans(plans->first, plans->second, tr("apply %1").arg(q(s.option)));
  session()->reportStatus(tr("Applied %1: K %2, V %3.").arg(q(s.option), q(toString(plans->first)), q(toString(plans->second))));
}

void DiagnosisView::renderTo(QPainter& painter, const QRectF& target) {
  painter.save();
  const QPalette pal = palette();
  painter.fillRect(target, pal.color(QPalette::Base));
  painter.setPen(pal.color(QPalette::Text));
  const QFont font = painter.font();
  QFont bold = font;
  bold.setBold(true);
  const double margin = 12;
  double y = target.top() + margin;
  const double width = target.width() - 2 * margin;
  const auto paragraph = [&](const QString& text, const QFont& f, double indent, const QColor& colour) {
    painter.setFont(f);
    painter.setPen(colour);
    const QRectF box(target.left() + margin + indent, y, width - indent, target.bottom() - y);
    const QRectF used = painter.boundingRect(box, Qt::TextWordWrap | Qt::AlignLeft | Qt::AlignTop, text);
    painter.drawText(box, Qt::TextWordWrap | Qt::AlignLeft | Qt::AlignTop, text);
    y += used.height() + 4;
  };
  const QColor text = pal.color(QPalette::Text);
  paragraph(diagnosis_ ? tr("Diagnosis of %1").arg(q(diagnosis_->dump.path)) : tr("Diagnosis"), bold, 0, text);
  if (!diagnosis_) {
    paragraph(tr("Not diagnosed yet."), font, 0, text);
    painter.restore();
    return;
  }
  if (diagnosis_->findings.empty()) paragraph(tr("No findings."), font, 0, text);
  for (const Finding& f : diagnosis_->findings) {
    if (y > target.bottom()) break;
    const char* severity = findingSeverity(f.kind);
    paragraph(QStringLiteral("[%1] %2: %3").arg(QString::fromLatin1(severity), QString::fromLatin1(findingKindName(f.kind)), q(f.summary)),
              bold, 0, severityColour(severity));
    paragraph(tr("What to do: %1").arg(q(f.advice)), font, 16, text);
    for (const Evidence& e : f.evidence) paragraph(placeText(e) + QStringLiteral(": ") + numbersText(e), font, 32, text);
    if (f.matches > static_cast<int>(f.evidence.size())) {
      paragraph(tr("… %1 places in all").arg(f.matches), font, 32, text);
    }
    y += 6;
  }
  for (const std::string& n : diagnosis_->notes) paragraph(tr("Note: %1").arg(q(n)), font, 0, text);
  painter.restore();
}

QString DiagnosisView::toCsv() const {
  if (!diagnosis_) return {};
  QString out = QStringLiteral("kind,severity,matches,layer,kv_head,query_head,channel,token,tensor,numbers,summary,advice\n");
  for (const Finding& f : diagnosis_->findings) {
    for (const Evidence& e : f.evidence) {
      QStringList nums;
      for (const auto& [name, v] : e.numbers) nums << QStringLiteral("%1=%2").arg(q(name)).arg(v, 0, 'g', 9);
      out += QStringList{QString::fromLatin1(findingKindName(f.kind)), QString::fromLatin1(findingSeverity(f.kind)),
                         QString::number(f.matches), cell(e.layer), cell(e.kvHead), cell(e.queryHead), cell(e.channel),
                         e.token >= 0 ? QString::number(e.token) : QString(), q(e.tensor), csvField(nums.join(QLatin1Char(';'))),
                         csvField(q(f.summary)), csvField(q(f.advice))}
                 .join(QLatin1Char(','));
      out += QLatin1Char('\n');
    }
  }
  return out;
}

QString DiagnosisView::tabTitle() const { return tr("Diagnosis"); }

}  // namespace kvscope::ui
