// SPDX-License-Identifier: GPL-3.0-or-later
// kvscope: the desktop app. Placeholder window until the GUI issue lands.
#include <QApplication>
#include <QLabel>

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  QLabel label("kvscope");
  label.show();
  return QApplication::exec();
}
