// SPDX-License-Identifier: GPL-3.0-or-later
#include "ui/workers/dump_probe.h"

#include <QCoreApplication>
#include <QFileInfo>
#include <QProcess>
#include <QTemporaryFile>

namespace kvscope::ui {

std::string probeCliPath() {
  const QByteArray env = qgetenv("KVSCOPE_CLI");
  if (!env.isEmpty() && QFileInfo(QString::fromLocal8Bit(env)).isExecutable())
    return env.toStdString();
  const QString beside = QCoreApplication::applicationDirPath() + QStringLiteral("/kvscope-cli");
  if (QFileInfo(beside).isExecutable()) return beside.toStdString();
  return {};
}

Status probeDumpInSubprocess(const std::string& file, const std::optional<Mapping>& mapping,
                             int timeoutMs) {
  const std::string cli = probeCliPath();
  if (cli.empty()) return Status::ok();
  QStringList args{QStringLiteral("info"), QString::fromStdString(file)};
  QTemporaryFile mappingFile;
  if (mapping) {
    if (!mappingFile.open()) return Status::ok();  // cannot probe; the in-process open reports
    mappingFile.write(QByteArray::fromStdString(mappingToJson(*mapping)));
    mappingFile.flush();
    args << QStringLiteral("--mapping") << mappingFile.fileName();
  }
  QProcess process;
  process.setProgram(QString::fromStdString(cli));
  process.setArguments(args);
  process.setStandardOutputFile(QProcess::nullDevice());
  process.start();
  if (!process.waitForStarted(5000)) return Status::ok();
  if (!process.waitForFinished(timeoutMs)) {
    process.kill();
    process.waitForFinished(2000);
    return Status::invalidData(file + ": reading the file's metadata did not finish within " +
                               std::to_string(timeoutMs / 1000) + " s; it is corrupt or hostile");
  }
  if (process.exitStatus() == QProcess::CrashExit)
    return Status::invalidData(file + ": the file made the reader crash; it is corrupt or hostile");
  if (process.exitCode() == 2) {
    QString message = QString::fromLocal8Bit(process.readAllStandardError()).trimmed();
    message.remove(QStringLiteral("kvscope-cli: "));
    if (message.isEmpty()) message = QString::fromStdString(file) + QStringLiteral(": not a readable dump");
    return Status::invalidData(message.toStdString());
  }
  return Status::ok();  // exit 0, or a CLI problem unrelated to the file: open in process
}

}  // namespace kvscope::ui
