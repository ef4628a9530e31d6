// SPDX-License-Identifier: GPL-3.0-or-later
// The GUI process (issue 33 and issue 32's defect 13). Issue 33: the headless GUI (`--export-dir`, `--screenshot`) never exited after a bad
// `--load-session`: the session opened nothing, so no view ever became ready. It now exits 2
// with the session's message (a JSON error says where, as a person reads it).
#include <QtTest>

#include <QProcess>
#include <QTemporaryDir>

namespace {

class HeadlessSessionTest : public QObject {
  Q_OBJECT

 private slots:
  void aBadSessionEndsAHeadlessRunWithExit2() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    struct Case {
      QByteArray content;
      QString expected;
    };
    const QList<Case> cases = {
        {"{\"kvscope_session\": 1, \"key\": ", QStringLiteral("line 1, column 31: unexpected end of input")},
        {"[1, 2]", QStringLiteral("not a kvscope session")},
        {"{\"kvscope_session\": 1, \"key\": \"int99\"}", QStringLiteral("int99")},
    };
    int n = 0;
    for (const Case& c : cases) {
      const QString session = dir.filePath(QStringLiteral("s%1.json").arg(n++));
      QFile f(session);
      QVERIFY(f.open(QIODevice::WriteOnly));
      f.write(c.content);
      f.close();
      for (const QString& mode : {QStringLiteral("--export-dir"), QStringLiteral("--screenshot")}) {
        const QString target = mode == QStringLiteral("--export-dir") ? dir.filePath(QStringLiteral("out"))
                                                                      : dir.filePath(QStringLiteral("shot.png"));
        QProcess gui;
        gui.setProcessChannelMode(QProcess::SeparateChannels);
        gui.start(QStringLiteral(KVSCOPE_GUI_PATH), {mode, target, QStringLiteral("--load-session"), session});
        QVERIFY(gui.waitForStarted());
        // Before the fix it waited for views that never came: killed here after 60 s.
        const bool finished = gui.waitForFinished(60000);
        if (!finished) gui.kill();
        QVERIFY2(finished, qPrintable(mode + QStringLiteral(": still running 60 s after a bad session")));
        QCOMPARE(gui.exitStatus(), QProcess::NormalExit);
        QCOMPARE(gui.exitCode(), 2);
        const QString err = QString::fromUtf8(gui.readAllStandardError());
        QVERIFY2(err.contains(session) && err.contains(c.expected), qPrintable(err));
        QVERIFY2(!err.contains(QStringLiteral("json.exception")), qPrintable(err));
      }
    }
  }

  // The window's OpenMP teams sleep at their barriers rather than spin (app/gui/main.cpp): the
  // process starts again with OMP_WAIT_POLICY=passive unless the user set a policy.
  void theGuiRunsWithAPassiveWaitPolicyUnlessOneIsSet() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    for (const QString& given : {QString(), QStringLiteral("active")}) {
      QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
      env.remove(QStringLiteral("OMP_WAIT_POLICY"));
      if (!given.isEmpty()) env.insert(QStringLiteral("OMP_WAIT_POLICY"), given);
      QProcess gui;
      gui.setProcessEnvironment(env);
      gui.start(QStringLiteral(KVSCOPE_GUI_PATH), {QStringLiteral("--preset"), QStringLiteral("kivi-4"),
                                                   QStringLiteral("--views"), QStringLiteral("histogram"),
                                                   QStringLiteral("--export-dir"), dir.filePath(QStringLiteral("out"))});
      QVERIFY(gui.waitForStarted());
      const QByteArray expected = "OMP_WAIT_POLICY=" + (given.isEmpty() ? QByteArray("passive") : given.toUtf8());
      // The environment of the running process (after its exec, the same pid).
      bool seen = false;
      QFile environ(QStringLiteral("/proc/%1/environ").arg(gui.processId()));
      for (int i = 0; i < 5000 && !seen && gui.state() == QProcess::Running; ++i) {
        if (environ.open(QIODevice::ReadOnly)) {
          seen = environ.readAll().split('\0').contains(expected);
          environ.close();
        }
        if (!seen) QTest::qWait(2);
      }
      QVERIFY(gui.waitForFinished(60000));
      QVERIFY2(seen, expected.constData());
      QCOMPARE(gui.exitCode(), 0);
    }
  }
};

}  // namespace

QTEST_MAIN(HeadlessSessionTest)
#include "headless_session_test.moc"
