// SPDX-License-Identifier: GPL-3.0-or-later
#include "ui/workers/dump_probe.h"

#include <QCoreApplication>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QProcess>
#include <QTemporaryDir>
#include <QTemporaryFile>

#include <cstring>

namespace kvscope::ui {

std::string probeCliPath() {
  const QByteArray env = qgetenv("KVSCOPE_CLI");
  if (!env.isEmpty() && QFileInfo(QString::fromLocal8Bit(env)).isExecutable())
    return env.toStdString();
  const QString beside = QCoreApplication::applicationDirPath() + QStringLiteral("/kvscope-cli");
  if (QFileInfo(beside).isExecutable()) return beside.toStdString();
  return {};
}

namespace {

/// How a kvscope-cli child ended.
struct CliRun {
  enum class End { NotStarted, TimedOut, Crashed, Exited } end = End::NotStarted;
  int exitCode = 0;
  QString error;   ///< standard error without the "kvscope-cli: " prefix, trimmed
  QByteArray out;  ///< standard output
};

/// Runs `cli args` and waits at most `timeoutMs` (then kills it).
CliRun runCli(const std::string& cli, const QStringList& args, int timeoutMs) {
  CliRun run;
  QProcess process;
  process.setProgram(QString::fromStdString(cli));
  process.setArguments(args);
  process.start();
  if (!process.waitForStarted(5000)) return run;
  if (!process.waitForFinished(timeoutMs)) {
    process.kill();
    process.waitForFinished(2000);
    run.end = CliRun::End::TimedOut;
    return run;
  }
  if (process.exitStatus() == QProcess::CrashExit) {
    run.end = CliRun::End::Crashed;
    return run;
  }
  run.end = CliRun::End::Exited;
  run.exitCode = process.exitCode();
  run.error = QString::fromLocal8Bit(process.readAllStandardError()).trimmed();
  run.error.remove(QStringLiteral("kvscope-cli: "));
  run.out = process.readAllStandardOutput();
  return run;
}

}  // namespace

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
  const CliRun run = runCli(cli, args, timeoutMs);
  switch (run.end) {
    case CliRun::End::NotStarted: return Status::ok();
    case CliRun::End::TimedOut:
      return Status::invalidData(file + ": reading the file's metadata did not finish within " +
                                 std::to_string(timeoutMs / 1000) + " s; it is corrupt or hostile");
    case CliRun::End::Crashed:
      return Status::invalidData(file + ": the file made the reader crash; it is corrupt or hostile");
    case CliRun::End::Exited: break;
  }
  if (run.exitCode == 2) {
    return Status::invalidData(run.error.isEmpty() ? file + ": not a readable dump" : run.error.toStdString());
  }
  return Status::ok();  // exit 0, or a CLI problem unrelated to the file: open in process
}

Expected<Tensor3> readTensorInSubprocess(const std::string& cli, const std::string& file,
                                         const std::optional<Mapping>& mapping, int layer,
                                         TensorKind kind, int sequence, int timeoutMs) {
  const std::string what = file + ": /layers/" + std::to_string(layer) + "/" + tensorKindName(kind);
  // A memory-backed folder when there is one: the tensor only passes through it.
  const QString shm = QStringLiteral("/dev/shm");
  QTemporaryDir dir(QFileInfo(shm).isWritable() ? shm + QStringLiteral("/kvscope-read-XXXXXX")
                                                 : QDir::tempPath() + QStringLiteral("/kvscope-read-XXXXXX"));
  if (!dir.isValid()) return Status::ioError(what + ": cannot create a temporary folder to read through");
  QStringList args{QStringLiteral("read"), QString::fromStdString(file),
                   QStringLiteral("--layer"), QString::number(layer),
                   QStringLiteral("--tensor"), QString::fromLatin1(tensorKindName(kind)),
                   QStringLiteral("--sequence"), QString::number(sequence),
                   QStringLiteral("--out"), dir.filePath(QStringLiteral("tensor.f32"))};
  if (mapping) {
    QFile mappingFile(dir.filePath(QStringLiteral("mapping.json")));
    if (!mappingFile.open(QIODevice::WriteOnly)) return Status::ioError(what + ": cannot write a temporary mapping");
    mappingFile.write(QByteArray::fromStdString(mappingToJson(*mapping)));
    mappingFile.close();
    args << QStringLiteral("--mapping") << mappingFile.fileName();
  }
  const CliRun run = runCli(cli, args, timeoutMs);
  switch (run.end) {
    case CliRun::End::NotStarted: return Status::ioError(what + ": cannot start " + cli);
    case CliRun::End::TimedOut:
      return Status::invalidData(what + ": reading did not finish within " + std::to_string(timeoutMs / 1000) +
                                 " s; the file is corrupt or hostile");
    case CliRun::End::Crashed:
      return Status::invalidData(what + ": the file made the reader crash; it is corrupt or hostile");
    case CliRun::End::Exited: break;
  }
  if (run.exitCode != 0) {
    if (run.exitCode == 130) return Status::cancelled();
    return Status::invalidData(run.error.isEmpty() ? what + ": could not be read" : run.error.toStdString());
  }
  const QStringList shape = QString::fromLatin1(run.out).simplified().split(QLatin1Char(' '));
  bool okH = false, okT = false, okD = false;
  const qint64 heads = shape.value(0).toLongLong(&okH), tokens = shape.value(1).toLongLong(&okT),
               dim = shape.value(2).toLongLong(&okD);
  QFile data(dir.filePath(QStringLiteral("tensor.f32")));
  if (!okH || !okT || !okD || !data.open(QIODevice::ReadOnly) ||
      data.size() != heads * tokens * dim * static_cast<qint64>(sizeof(float))) {
    return Status::internal(what + ": kvscope-cli read gave no tensor of the shape it printed");
  }
  Tensor3 t(heads, tokens, dim);
  if (data.read(reinterpret_cast<char*>(t.data.data()), data.size()) != data.size()) {
    return Status::ioError(what + ": cannot read the tensor back from " + data.fileName().toStdString());
  }
  return t;
}

ReadDelegate isolatedReadDelegate(const std::string& file, const std::optional<Mapping>& mapping) {
  const QByteArray env = qgetenv("KVSCOPE_ISOLATE_READS");
  if (env == "0") return {};
  std::string cli = probeCliPath();
  if (cli.empty()) return {};
  return [cli, file, mapping](int layer, TensorKind kind, int sequence) {
    return readTensorInSubprocess(cli, file, mapping, layer, kind, sequence);
  };
}

}  // namespace kvscope::ui
