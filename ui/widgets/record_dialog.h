// SPDX-License-Identifier: GPL-3.0-or-later
// File → Record from model…: run a model file (GGUF, Hugging Face folder, llama2.c checkpoint) on a
// text and write its keys, values and queries as a dump (core/model/record.h), with progress per
// layer and Cancel; the dump is announced when it is complete (never a half-written file).
#pragma once

#include <QDialog>
#include <QString>

class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QProgressBar;
class QPushButton;
class QRadioButton;
class QSpinBox;

namespace kvscope::ui {

class JobRunner;

class RecordDialog : public QDialog {
  Q_OBJECT

 public:
  explicit RecordDialog(QWidget* parent = nullptr);
  ~RecordDialog() override;

  /// Pre-fills the fields (tests, and the next recording of a session).
  void setModelPath(const QString& path);
  void setText(const QString& text);
  void setTextFile(const QString& path);
  /// Exactly these ids ("1,403,407"), nothing added.
  void setTokenIds(const QString& ids);
  void setOutputPath(const QString& path);
  /// Positions in the dump; 0 = the text alone.
  void setPositions(int positions);

  /// Starts recording with the fields as they are (the Record button).
  void startRecording();
  /// Cancels a recording in progress (the Cancel button while recording).
  void cancelRecording();
  [[nodiscard]] bool recording() const;
  /// The last error or state shown under the fields.
  [[nodiscard]] QString message() const;

 signals:
  /// The dump at `path` is written and complete.
  void recorded(const QString& path);

 protected:
  void reject() override;

 private:
  void chooseModelFile();
  void chooseModelFolder();
  void chooseTextFile();
  void chooseOutput();
  void suggestOutput();
  void setRunning(bool running);
  void showMessage(const QString& text, bool error);

  QLineEdit* model_;
  QRadioButton* typed_;
  QRadioButton* fromFile_;
  QPlainTextEdit* text_;
  QLineEdit* textFile_;
  QRadioButton* fromIds_;
  QLineEdit* ids_;
  QSpinBox* positions_;
  QLineEdit* output_;
  QProgressBar* progress_;
  QLabel* message_;
  QPushButton* record_;
  QPushButton* close_;
  JobRunner* runner_;
  bool outputEdited_ = false;
};

}  // namespace kvscope::ui
