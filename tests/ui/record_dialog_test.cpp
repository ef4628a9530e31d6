// SPDX-License-Identifier: GPL-3.0-or-later
// File → Record from model… (issue 28 item 8): the dialog runs the model on the text the user
// gives, writes the dump core/model/record.h writes for the same input, opens it in the window,
// and leaves no file when it is cancelled or fails.
#include <QtTest>

#include <QAction>
#include <QFileInfo>
#include <QLabel>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QTemporaryDir>

#include "core/io/dump.h"
#include "core/model/model.h"
#include "core/model/record.h"
#include "tests/support/tiny_models.h"
#include "ui/main_window.h"
#include "ui/widgets/record_dialog.h"

using namespace kvscope;
using namespace kvscope::ui;

namespace {

constexpr int kWaitMs = 60000;

QString writeModel(const QTemporaryDir& dir) {
  const QString path = dir.filePath(QStringLiteral("tiny.gguf"));
  test::writeTinyGguf(test::TinyModelSpec{}, path.toStdString());
  return path;
}

}  // namespace

class RecordDialogTest : public QObject {
  Q_OBJECT

 private slots:
  void init() { QCoreApplication::setOrganizationName(QStringLiteral("kvscope-test-record")); }

  // The typed text is tokenized with the model's vocabulary ("a b" is BOS, "▁a" 286, "▁b" 287 in
  // the tiny SentencePiece vocabulary: tests/support/tiny_models.h), the model samples up to the
  // positions asked for, and the dump holds what core's recordDump writes for that sequence.
  void recordsTheTypedTextAndSamplesToThePositions() {
    QTemporaryDir dir;
    const QString model = writeModel(dir), out = dir.filePath(QStringLiteral("typed.h5"));
    RecordDialog dialog;
    dialog.setModelPath(model);
    dialog.setText(QStringLiteral("a b"));
    dialog.setPositions(9);
    dialog.setOutputPath(out);
    QSignalSpy recorded(&dialog, &RecordDialog::recorded);
    dialog.startRecording();
    QVERIFY(dialog.recording());
    QVERIFY2(recorded.wait(kWaitMs), qPrintable(dialog.message()));
    QCOMPARE(recorded.first().first().toString(), out);
    QVERIFY2(dialog.message().contains(QStringLiteral("9 tokens (6 sampled)")), qPrintable(dialog.message()));

    auto dump = Dump::open(out.toStdString());
    QVERIFY(dump);
    const std::vector<int64_t> tokens = *(*dump)->tokens();
    QCOMPARE(static_cast<int>(tokens.size()), 9);
    QCOMPARE(std::vector<int64_t>(tokens.begin(), tokens.begin() + 3), (std::vector<int64_t>{1, 286, 287}));

    auto m = Model::load(model.toStdString());
    QVERIFY(m);
    RecordOptions options;
    options.tokens = {1, 286, 287};
    options.steps = 9;
    const std::string direct = dir.filePath(QStringLiteral("direct.h5")).toStdString();
    QVERIFY(recordDump(*m, options, direct));
    auto reference = Dump::open(direct);
    QVERIFY(reference);
    QCOMPARE(*(*reference)->tokens(), tokens);
    for (int layer = 0; layer < (*dump)->info().layers; ++layer)
      for (TensorKind kind : {TensorKind::Key, TensorKind::Value, TensorKind::Query})
        QVERIFY((*dump)->read(layer, kind)->data == (*reference)->read(layer, kind)->data);
  }

  // A text file is read as the typed text would be.
  void recordsATextFile() {
    QTemporaryDir dir;
    const QString model = writeModel(dir), out = dir.filePath(QStringLiteral("file.h5"));
    QFile text(dir.filePath(QStringLiteral("prompt.txt")));
    QVERIFY(text.open(QIODevice::WriteOnly));
    text.write("c a");
    text.close();
    RecordDialog dialog;
    dialog.setModelPath(model);
    dialog.setTextFile(text.fileName());
    dialog.setOutputPath(out);
    QSignalSpy recorded(&dialog, &RecordDialog::recorded);
    dialog.startRecording();
    QVERIFY2(recorded.wait(kWaitMs), qPrintable(dialog.message()));
    auto dump = Dump::open(out.toStdString());
    QVERIFY(dump);
    QCOMPARE(*(*dump)->tokens(), (std::vector<int64_t>{1, 288, 286}));
  }

  // Token ids are recorded exactly, BOS not added (what a llama2.c checkpoint without an encoder needs).
  void recordsTokenIdsExactly() {
    QTemporaryDir dir;
    const QString model = writeModel(dir), out = dir.filePath(QStringLiteral("ids.h5"));
    RecordDialog dialog;
    dialog.setModelPath(model);
    dialog.setTokenIds(QStringLiteral("287, 260,286"));
    dialog.setOutputPath(out);
    QSignalSpy recorded(&dialog, &RecordDialog::recorded);
    dialog.startRecording();
    QVERIFY2(recorded.wait(kWaitMs), qPrintable(dialog.message()));
    auto dump = Dump::open(out.toStdString());
    QVERIFY(dump);
    QCOMPARE(*(*dump)->tokens(), (std::vector<int64_t>{287, 260, 286}));
    RecordDialog bad;
    bad.setModelPath(model);
    bad.setTokenIds(QStringLiteral("1,x"));
    bad.setOutputPath(dir.filePath(QStringLiteral("never.h5")));
    bad.startRecording();
    QVERIFY(!bad.recording());
    QVERIFY2(bad.message().startsWith(QStringLiteral("Token ids: ")), qPrintable(bad.message()));
    QVERIFY(!QFileInfo::exists(dir.filePath(QStringLiteral("never.h5"))));
  }

  // Cancel stops the recording: nothing is announced and no file is left.
  void cancelLeavesNoFile() {
    QTemporaryDir dir;
    const QString model = writeModel(dir), out = dir.filePath(QStringLiteral("cancelled.h5"));
    RecordDialog dialog;
    dialog.setModelPath(model);
    dialog.setText(QString());
    dialog.setPositions(256);  // BOS, then 255 sampled positions: long enough to cancel
    dialog.setOutputPath(out);
    QSignalSpy recorded(&dialog, &RecordDialog::recorded);
    dialog.startRecording();
    auto* close = dialog.findChild<QPushButton*>(QStringLiteral("recordClose"));
    QVERIFY(close != nullptr);
    QCOMPARE(close->text(), QStringLiteral("Cancel"));
    close->click();  // Close while recording = Cancel; the dialog stays to say so
    QVERIFY(!dialog.recording());
    QVERIFY(dialog.message().contains(QStringLiteral("Cancelled")));
    QTest::qWait(500);
    QCOMPARE(recorded.count(), 0);
    QVERIFY(!QFileInfo::exists(out));
    QCOMPARE(QDir(dir.path()).entryList(QDir::Files).size(), 1);  // the model alone, no temporary file
  }

  // A model that cannot be read is named in the message; nothing is written.
  void aBadModelIsNamedAndNothingIsWritten() {
    QTemporaryDir dir;
    const QString bad = dir.filePath(QStringLiteral("not-a-model.gguf")), out = dir.filePath(QStringLiteral("bad.h5"));
    QFile f(bad);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write("this is not a model file");
    f.close();
    RecordDialog dialog;
    dialog.setModelPath(bad);
    dialog.setText(QStringLiteral("a"));
    dialog.setOutputPath(out);
    dialog.startRecording();
    QTRY_VERIFY_WITH_TIMEOUT(!dialog.recording(), kWaitMs);
    QVERIFY2(dialog.message().startsWith(QStringLiteral("Nothing was written")), qPrintable(dialog.message()));
    QVERIFY2(dialog.message().contains(bad), qPrintable(dialog.message()));
    QVERIFY(!QFileInfo::exists(out));

    // An output folder that does not exist is refused before the model runs.
    RecordDialog noFolder;
    noFolder.setModelPath(bad);
    noFolder.setText(QStringLiteral("a"));
    noFolder.setOutputPath(dir.filePath(QStringLiteral("missing/x.h5")));
    noFolder.startRecording();
    QVERIFY(!noFolder.recording());
    QVERIFY2(noFolder.message().contains(QStringLiteral("does not exist")), qPrintable(noFolder.message()));
  }

  // The File menu's entry opens the dialog and the window opens the recorded dump.
  void theWindowOpensTheRecordedDump() {
    QTemporaryDir dir;
    const QString model = writeModel(dir), out = dir.filePath(QStringLiteral("window.h5"));
    MainWindow w;
    auto* action = w.findChild<QAction*>(QStringLiteral("recordFromModel"));
    QVERIFY(action != nullptr);
    action->trigger();
    auto* dialog = w.findChild<RecordDialog*>();
    QVERIFY(dialog != nullptr);
    QVERIFY(dialog->isVisible());
    dialog->setModelPath(model);
    dialog->setText(QStringLiteral("a b c"));
    dialog->setOutputPath(out);
    QSignalSpy opened(&w, &MainWindow::dumpOpened);
    dialog->startRecording();
    QVERIFY(opened.wait(kWaitMs));
    QVERIFY2(w.windowTitle().contains(QStringLiteral("window.h5")), qPrintable(w.windowTitle()));
  }
};

QTEST_MAIN(RecordDialogTest)
#include "record_dialog_test.moc"
