// SPDX-License-Identifier: GPL-3.0-or-later
#include "ui/views/table_text.h"

#include <QHeaderView>
#include <QScrollBar>
#include <QTableView>
#include <QTreeView>

#include <algorithm>
#include <cmath>

namespace kvscope::ui {

namespace {
QString groupDigits(const QString& digits) {
  if (digits.size() <= 4) return digits;
  QString out;
  const qsizetype n = digits.size();
  for (qsizetype i = 0; i < n; ++i) {
    if (i > 0 && (n - i) % 3 == 0) out += QChar(kDigitGroupSeparator);
    out += digits[i];
  }
  return out;
}
}  // namespace

QString groupedInteger(long long value) {
  const unsigned long long magnitude =
      value < 0 ? 0ULL - static_cast<unsigned long long>(value) : static_cast<unsigned long long>(value);
  return (value < 0 ? QStringLiteral("-") : QString()) + groupDigits(QString::number(magnitude));
}

QString groupedNumber(double value, int decimals) {
  if (!std::isfinite(value)) return QStringLiteral("–");
  const QString text = QString::number(std::fabs(value), 'f', decimals);
  const qsizetype dot = text.indexOf(QLatin1Char('.'));
  const QString whole = dot < 0 ? text : text.left(dot);
  const QString rest = dot < 0 ? QString() : text.mid(dot);
  // "-0.0" is not negative on screen.
  const bool negative =
      value < 0 && std::any_of(text.begin(), text.end(), [](QChar c) { return c >= u'1' && c <= u'9'; });
  return (negative ? QStringLiteral("-") : QString()) + groupDigits(whole) + rest;
}

NumberItem::NumberItem(const QString& text, double sortKey) : QTableWidgetItem(text) {
  setData(Qt::UserRole, sortKey);
  setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
}

bool NumberItem::operator<(const QTableWidgetItem& other) const {
  return data(Qt::UserRole).toDouble() < other.data(Qt::UserRole).toDouble();
}

void setUpFigureTable(QTableView* table) {
  table->setWordWrap(false);
  table->setTextElideMode(Qt::ElideNone);
  QHeaderView* rows = table->verticalHeader();
  rows->setSectionResizeMode(QHeaderView::Fixed);
  rows->setDefaultSectionSize(table->fontMetrics().height() + 8);
  QHeaderView* columns = table->horizontalHeader();
  columns->setSectionResizeMode(QHeaderView::ResizeToContents);
  columns->setTextElideMode(Qt::ElideNone);
}

int heightForAllRows(const QTableView* table) {
  int h = 2 * table->frameWidth();
  if (!table->horizontalHeader()->isHidden()) h += table->horizontalHeader()->sizeHint().height();
  h += table->verticalHeader()->length();
  return h;
}

void fixHeightToRows(QTableView* table) {
  table->setVerticalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  table->setFixedHeight(heightForAllRows(table));
}

void setUpFigureTree(QTreeView* tree) {
  tree->setWordWrap(false);
  tree->setUniformRowHeights(true);
  tree->header()->setTextElideMode(Qt::ElideNone);
}

}  // namespace kvscope::ui
