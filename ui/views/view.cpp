// SPDX-License-Identifier: GPL-3.0-or-later
#include "ui/views/view.h"

#include <QComboBox>

namespace kvscope::ui {

namespace {
constexpr int kItemNameRole = Qt::UserRole + 64;
}

void addNamedItem(QComboBox* box, const QString& name, const QString& text, const QVariant& data) {
  box->addItem(text, data);
  box->setItemData(box->count() - 1, name, kItemNameRole);
}

QString currentItemName(const QComboBox* box) {
  return box->currentIndex() < 0 ? QString() : box->itemData(box->currentIndex(), kItemNameRole).toString();
}

bool selectItemName(QComboBox* box, const QString& name) {
  const int index = box->findData(name, kItemNameRole);
  if (index < 0) return false;
  box->setCurrentIndex(index);
  return true;
}

void loadNamedChoice(QComboBox* box, const nlohmann::json& state, const char* key, const QStringList& legacyOrder,
                     const QString& fallback) {
  if (!state.is_object() || !state.contains(key)) {
    selectItemName(box, fallback);
    return;
  }
  const nlohmann::json& v = state[key];
  if (v.is_string()) {
    selectItemName(box, QString::fromStdString(v.get<std::string>()));
  } else if (v.is_number_integer()) {
    const int index = v.get<int>();
    if (index >= 0 && index < legacyOrder.size()) selectItemName(box, legacyOrder[index]);
  }
}

}  // namespace kvscope::ui
