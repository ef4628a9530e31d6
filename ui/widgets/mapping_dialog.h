// SPDX-License-Identifier: GPL-3.0-or-later
// Opening a file that is not a canonical dump: the user assigns K, V, Q and pre-RoPE K and
// their axis order from the file's dataset list; the mapping can be saved for the CLI.
#pragma once

#include <QDialog>

#include "core/io/dataset_tree.h"
#include "core/io/mapping.h"

class QComboBox;
class QGridLayout;
class QLabel;
class QLineEdit;
class QTableWidget;

namespace kvscope::ui {

class MappingDialog : public QDialog {
  Q_OBJECT

 public:
  MappingDialog(const QString& path, const DatasetTree& tree, QWidget* parent = nullptr);

  /// The mapping the fields describe, or why they do not describe one.
  [[nodiscard]] Expected<Mapping> mapping() const;

 signals:
  void mappingAccepted(const kvscope::Mapping& mapping);

 private:
  struct Row {
    QComboBox* dataset;
    QLineEdit* axes;
  };
  Row addRow(QGridLayout* grid, int row, const QString& label, const QString& tip, bool optional);
  void guess();
  void save();
  void accept() override;

  QString path_;
  DatasetTree tree_;
  QTableWidget* table_;
  Row key_, value_, query_, preRope_;
  QLineEdit* layers_;
  QLabel* message_;
};

}  // namespace kvscope::ui
