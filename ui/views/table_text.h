// SPDX-License-Identifier: GPL-3.0-or-later
// Numbers and tables as the views show them (issue 32 defect 6): large integers with their
// digits grouped, figures that never wrap, headers that are never cut, tables sized to show
// every row. CSV exports keep plain numbers; only what is drawn on screen is grouped.
#pragma once

#include <QString>
#include <QTableWidgetItem>

class QTableView;
class QTreeView;

namespace kvscope::ui {

/// The digit group separator: U+202F NARROW NO-BREAK SPACE (the SI/ISO 80000 thin space that
/// never breaks a line), whatever the locale.
inline constexpr char16_t kDigitGroupSeparator = u'\u202F';

/// An integer with its digits grouped by threes from 10 000 up ("131 072", "-12 345"); up to
/// four digits it stays whole ("4096"), as SI writes them.
[[nodiscard]] QString groupedInteger(long long value);
/// `value` with `decimals` decimals, its integer part grouped as groupedInteger() does
/// ("131 072.0"); non-finite values as "–".
[[nodiscard]] QString groupedNumber(double value, int decimals);

/// A table cell that sorts by a number (its Qt::UserRole) rather than by its text.
class NumberItem : public QTableWidgetItem {
 public:
  NumberItem(const QString& text, double sortKey);
  bool operator<(const QTableWidgetItem& other) const override;
};

/// Sets a table of figures up: no word wrap and no eliding (a figure is shown whole or the
/// column grows), compact fixed-height rows, columns sized to their contents and headers.
void setUpFigureTable(QTableView* table);
/// The height that shows the header and every row of `table` without a vertical scroll bar.
[[nodiscard]] int heightForAllRows(const QTableView* table);
/// Fixes `table`'s height to heightForAllRows() (for short tables whose every row must show).
void fixHeightToRows(QTableView* table);
/// The same for a tree: no wrapping, one line per row, headers never elided.
void setUpFigureTree(QTreeView* tree);

}  // namespace kvscope::ui
