// SPDX-License-Identifier: GPL-3.0-or-later
#include "ui/workers/dump_reader.h"

#include <QCoreApplication>
#include <QFileInfo>

#include "core/io/isolated_reader.h"

namespace kvscope::ui {

std::string readerCliPath() {
  const QByteArray env = qgetenv("KVSCOPE_CLI");
  if (!env.isEmpty() && QFileInfo(QString::fromLocal8Bit(env)).isExecutable())
    return env.toStdString();
  const QString beside = QCoreApplication::applicationDirPath() + QStringLiteral("/kvscope-cli");
  if (QFileInfo(beside).isExecutable()) return beside.toStdString();
  return {};
}

IsolationOptions readerIsolation() { return isolationFromEnvironment(readerCliPath()); }

}  // namespace kvscope::ui
