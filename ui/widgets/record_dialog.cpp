// SPDX-License-Identifier: GPL-3.0-or-later
#include "ui/widgets/record_dialog.h"

#include <QDialogButtonBox>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QRadioButton>
#include <QSettings>
#include <QSpinBox>
#include <QStandardPaths>
#include <QVBoxLayout>

#include <memory>
#include <string>

#include "core/model/model.h"
#include "core/model/record.h"
#include "core/util/atomic_file.h"
#include "ui/workers/job_runner.h"

namespace kvscope::ui {

namespace {

QString q(const std::string& s) { return QString::fromStdString(s); }

// What the lane hands back: the dump's path and a one-line summary.
struct Recorded {
  QString path;
  QString summary;
};

}  // namespace

RecordDialog::RecordDialog(QWidget* parent) : QDialog(parent) {
  setWindowTitle(tr("Record from model"));
  QSettings settings;

  model_ = new QLineEdit(this);
  model_->setObjectName(QStringLiteral("recordModel"));
  model_->setPlaceholderText(tr("a GGUF file, a Hugging Face folder or a llama2.c checkpoint"));
  model_->setText(settings.value(QStringLiteral("record/model")).toString());
  auto* modelFile = new QPushButton(tr("File…"), this);
  auto* modelFolder = new QPushButton(tr("Folder…"), this);
  modelFile->setToolTip(tr("A GGUF file or a llama2.c checkpoint (.bin)."));
  modelFolder->setToolTip(tr("A Hugging Face folder: config.json, the safetensors files and tokenizer.json."));
  auto* modelRow = new QHBoxLayout;
  modelRow->addWidget(model_, 1);
  modelRow->addWidget(modelFile);
  modelRow->addWidget(modelFolder);

  typed_ = new QRadioButton(tr("Typed text"), this);
  fromFile_ = new QRadioButton(tr("Text file"), this);
  typed_->setChecked(true);
  text_ = new QPlainTextEdit(this);
  text_->setObjectName(QStringLiteral("recordText"));
  text_->setPlaceholderText(tr("The text to run through the model, tokenized with the model's own tokenizer "
                               "(BOS as the model says). Empty: the model writes from BOS."));
  textFile_ = new QLineEdit(this);
  textFile_->setObjectName(QStringLiteral("recordTextFile"));
  textFile_->setEnabled(false);
  auto* textBrowse = new QPushButton(tr("Browse…"), this);
  textBrowse->setEnabled(false);
  auto* fileRow = new QHBoxLayout;
  fileRow->addWidget(fromFile_);
  fileRow->addWidget(textFile_, 1);
  fileRow->addWidget(textBrowse);
  fromIds_ = new QRadioButton(tr("Token ids"), this);
  ids_ = new QLineEdit(this);
  ids_->setObjectName(QStringLiteral("recordTokenIds"));
  ids_->setPlaceholderText(tr("e.g. 1,403,407: exactly these ids, nothing added (llama2.c checkpoints have no encoder)"));
  ids_->setEnabled(false);
  auto* idsRow = new QHBoxLayout;
  idsRow->addWidget(fromIds_);
  idsRow->addWidget(ids_, 1);
  auto updateInputs = [this, textBrowse] {
    textFile_->setEnabled(fromFile_->isChecked());
    textBrowse->setEnabled(fromFile_->isChecked());
    ids_->setEnabled(fromIds_->isChecked());
    text_->setEnabled(typed_->isChecked());
  };
  connect(typed_, &QRadioButton::toggled, this, updateInputs);
  connect(fromFile_, &QRadioButton::toggled, this, updateInputs);
  connect(fromIds_, &QRadioButton::toggled, this, updateInputs);

  positions_ = new QSpinBox(this);
  positions_->setObjectName(QStringLiteral("recordPositions"));
  positions_->setRange(0, 1 << 20);
  positions_->setSpecialValueText(tr("the text alone"));
  positions_->setToolTip(tr("Positions in the dump: the text's tokens, then tokens the model samples (greedy) up "
                            "to this many. With an empty text, 256 or the model's context if smaller."));

  output_ = new QLineEdit(this);
  output_->setObjectName(QStringLiteral("recordOutput"));
  output_->setPlaceholderText(tr("the dump to write (.h5)"));
  auto* outputBrowse = new QPushButton(tr("Save as…"), this);
  auto* outputRow = new QHBoxLayout;
  outputRow->addWidget(output_, 1);
  outputRow->addWidget(outputBrowse);
  connect(output_, &QLineEdit::textEdited, this, [this] { outputEdited_ = true; });
  connect(model_, &QLineEdit::textChanged, this, &RecordDialog::suggestOutput);

  auto* form = new QFormLayout;
  form->setFieldGrowthPolicy(QFormLayout::ExpandingFieldsGrow);
  form->addRow(tr("Model"), modelRow);
  form->addRow(typed_, text_);
  form->addRow(fileRow);
  form->addRow(idsRow);
  form->addRow(tr("Positions"), positions_);
  form->addRow(tr("Dump"), outputRow);

  progress_ = new QProgressBar(this);
  progress_->setObjectName(QStringLiteral("recordProgress"));
  progress_->setRange(0, 1000);
  progress_->setVisible(false);
  message_ = new QLabel(this);
  message_->setObjectName(QStringLiteral("recordMessage"));
  message_->setWordWrap(true);
  message_->setTextInteractionFlags(Qt::TextSelectableByMouse);

  auto* buttons = new QDialogButtonBox(this);
  record_ = buttons->addButton(tr("Record"), QDialogButtonBox::AcceptRole);
  record_->setObjectName(QStringLiteral("recordStart"));
  record_->setDefault(true);
  close_ = buttons->addButton(QDialogButtonBox::Close);
  close_->setObjectName(QStringLiteral("recordClose"));
  connect(record_, &QPushButton::clicked, this, &RecordDialog::startRecording);
  connect(close_, &QPushButton::clicked, this, &RecordDialog::reject);

  auto* layout = new QVBoxLayout(this);
  layout->addLayout(form);
  layout->addWidget(progress_);
  layout->addWidget(message_);
  layout->addWidget(buttons);
  resize(720, 460);

  connect(modelFile, &QPushButton::clicked, this, &RecordDialog::chooseModelFile);
  connect(modelFolder, &QPushButton::clicked, this, &RecordDialog::chooseModelFolder);
  connect(textBrowse, &QPushButton::clicked, this, &RecordDialog::chooseTextFile);
  connect(outputBrowse, &QPushButton::clicked, this, &RecordDialog::chooseOutput);

  runner_ = new JobRunner(tr("record"), this);
  connect(runner_, &JobRunner::progressed, this, [this](double fraction, const QString& what) {
    progress_->setValue(static_cast<int>(fraction * 1000));
    progress_->setFormat(what.isEmpty() ? QStringLiteral("%p%") : what + QStringLiteral(" · %p%"));
  });
  connect(runner_, &JobRunner::failed, this, [this](const QString& why) {
    setRunning(false);
    showMessage(tr("Nothing was written: %1").arg(why), true);
  });
  suggestOutput();
}

RecordDialog::~RecordDialog() {
  runner_->cancel();
  runner_->waitForIdle();
}

void RecordDialog::setModelPath(const QString& path) { model_->setText(path); }
void RecordDialog::setText(const QString& text) {
  typed_->setChecked(true);
  text_->setPlainText(text);
}
void RecordDialog::setTextFile(const QString& path) {
  fromFile_->setChecked(true);
  textFile_->setText(path);
}
void RecordDialog::setOutputPath(const QString& path) {
  output_->setText(path);
  outputEdited_ = true;
}
void RecordDialog::setTokenIds(const QString& ids) {
  fromIds_->setChecked(true);
  ids_->setText(ids);
}
void RecordDialog::setPositions(int positions) { positions_->setValue(positions); }
bool RecordDialog::recording() const { return runner_->busy(); }
QString RecordDialog::message() const { return message_->text(); }

void RecordDialog::chooseModelFile() {
  const QString start = model_->text().isEmpty() ? QDir::homePath() : QFileInfo(model_->text()).absolutePath();
  const QString path = QFileDialog::getOpenFileName(this, tr("Model file"), start,
                                                    tr("Models (*.gguf *.bin);;All files (*)"));
  if (!path.isEmpty()) model_->setText(path);
}

void RecordDialog::chooseModelFolder() {
  const QString start = model_->text().isEmpty() ? QDir::homePath() : QFileInfo(model_->text()).absolutePath();
  const QString path = QFileDialog::getExistingDirectory(this, tr("Hugging Face model folder"), start);
  if (!path.isEmpty()) model_->setText(path);
}

void RecordDialog::chooseTextFile() {
  const QString path = QFileDialog::getOpenFileName(this, tr("Text file"), QDir::homePath(),
                                                    tr("Text (*.txt *.md);;All files (*)"));
  if (!path.isEmpty()) textFile_->setText(path);
}

void RecordDialog::chooseOutput() {
  const QString path =
      QFileDialog::getSaveFileName(this, tr("Dump to write"), output_->text(), tr("KV dumps (*.h5 *.hdf5)"));
  if (path.isEmpty()) return;
  output_->setText(path);
  outputEdited_ = true;
}

// "<model name>-record.h5" beside the last dump folder, until the user types their own.
void RecordDialog::suggestOutput() {
  if (outputEdited_) return;
  QString folder = QSettings().value(QStringLiteral("record/folder")).toString();
  if (folder.isEmpty() || !QFileInfo(folder).isDir())
    folder = QStandardPaths::writableLocation(QStandardPaths::DocumentsLocation);
  if (folder.isEmpty() || !QFileInfo(folder).isDir()) folder = QDir::homePath();
  const QFileInfo model(model_->text().trimmed());
  const QString stem = model.fileName().isEmpty() ? QStringLiteral("model") : model.completeBaseName();
  output_->setText(QDir(folder).filePath(stem + QStringLiteral("-record.h5")));
}

void RecordDialog::setRunning(bool running) {
  progress_->setVisible(running);
  if (running) progress_->setValue(0);
  record_->setEnabled(!running);
  close_->setText(running ? tr("Cancel") : tr("Close"));
  for (QWidget* w : {static_cast<QWidget*>(model_), static_cast<QWidget*>(positions_), static_cast<QWidget*>(output_)})
    w->setEnabled(!running);
}

void RecordDialog::showMessage(const QString& text, bool error) {
  message_->setStyleSheet(error ? QStringLiteral("color: #c0392b;") : QString());
  message_->setText(text);
}

void RecordDialog::startRecording() {
  if (recording()) return;
  const QString modelPath = model_->text().trimmed();
  const QString out = output_->text().trimmed();
  if (modelPath.isEmpty()) return showMessage(tr("Choose a model: a GGUF file, a Hugging Face folder or a llama2.c checkpoint."), true);
  if (out.isEmpty()) return showMessage(tr("Choose where to write the dump."), true);
  // Checked before the model runs: a recording is minutes of work on a large model.
  const QFileInfo outInfo(out);
  if (!outInfo.absoluteDir().exists())
    return showMessage(tr("The folder %1 does not exist: choose where to write the dump.").arg(outInfo.absolutePath()), true);
  if (outInfo.isDir()) return showMessage(tr("%1 is a folder: name the dump file.").arg(out), true);
  RecordInput input;
  if (fromFile_->isChecked()) {
    const QString file = textFile_->text().trimmed();
    if (file.isEmpty()) return showMessage(tr("Choose a text file, or type the text."), true);
    auto content = readTextFile(file.toStdString());
    if (!content) return showMessage(q(content.status().message()), true);
    input.text = std::move(*content);
  } else if (fromIds_->isChecked()) {
    auto ids = parseTokenList(ids_->text().trimmed().toStdString());
    if (!ids) return showMessage(tr("Token ids: %1").arg(q(ids.status().message())), true);
    if (ids->empty()) return showMessage(tr("Token ids: the list is empty."), true);
    input.tokens = std::move(*ids);
  } else if (!text_->toPlainText().isEmpty()) {
    input.text = text_->toPlainText().toStdString();
  }
  const int positions = positions_->value();
  const bool fromBos = !input.text.has_value() && !input.tokens.has_value();
  QSettings settings;
  settings.setValue(QStringLiteral("record/model"), modelPath);
  settings.setValue(QStringLiteral("record/folder"), QFileInfo(out).absolutePath());

  setRunning(true);
  showMessage(tr("Loading %1…").arg(modelPath), false);
  runner_->start<Recorded>(
      [modelPath, out, input, positions, fromBos](const Progress& progress) -> Expected<Recorded> {
        auto model = Model::load(modelPath.toStdString());
        if (!model) return model.status();
        auto sequence = recordInputTokens(**model, input);
        if (!sequence) return sequence.status();
        RecordOptions options;
        options.tokens = std::move(*sequence);
        auto steps = recordSteps(**model, options.tokens.size(),
                                 positions > 0 ? std::optional<int>(positions) : std::nullopt, fromBos, "Positions");
        if (!steps) return steps.status();
        options.steps = *steps;
        auto summary = recordDump(*model, options, out.toStdString(), progress);
        if (!summary) return summary.status();
        const ModelHparams& hp = (*model)->hparams();
        Recorded r;
        r.path = out;
        r.summary = QStringLiteral("%1: %2 layers, %3 kv heads, head dim %4, %5 tokens (%6 sampled)")
                        .arg(QFileInfo(out).fileName())
                        .arg(hp.layers)
                        .arg(hp.kvHeads)
                        .arg(hp.headDim)
                        .arg(summary->tokens.size())
                        .arg(summary->sampled);
        return r;
      },
      [this](Recorded r) {
        setRunning(false);
        showMessage(tr("Wrote %1").arg(r.summary), false);
        emit recorded(r.path);
        accept();
      });
}

void RecordDialog::cancelRecording() {
  if (!recording()) return;
  runner_->cancel();
  setRunning(false);
  showMessage(tr("Cancelled; no dump was written."), false);
}

// Close while recording cancels the recording first; the dialog stays open to say so.
void RecordDialog::reject() {
  if (recording()) return cancelRecording();
  QDialog::reject();
}

}  // namespace kvscope::ui
