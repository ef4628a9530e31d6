// SPDX-License-Identifier: GPL-3.0-or-later
// The views of the window, in tab order: one line per view in view_registry.cpp. The tabs, Export
// All, headless `--views` and export, `--tab` and sessions iterate this list.
#pragma once

#include <QString>
#include <QStringList>

#include <vector>

#include <nlohmann/json.hpp>

class QWidget;

namespace kvscope::ui {

class View;

struct ViewRegistration {
  QString name;                  ///< the view's stable name (its V::kName)
  View* (*make)(QWidget* parent);
};

/// Every view, in tab order.
[[nodiscard]] const std::vector<ViewRegistration>& viewRegistry();
/// Their names, in tab order ("histogram", "heatmap", …).
[[nodiscard]] QStringList viewNames();

/// A session's "views" object with every view's state under its name and "tab" a view's name.
/// Sessions written before (kvscope 2b04415 and earlier) hold the tab as an index into that
/// day's tab order, the summary's budgets under "budgets" and the budget view's inputs under
/// "capacity" and "search": those are moved to where the views read them. Combo indexes inside
/// a view's state are the view's to read (View::loadState).
[[nodiscard]] nlohmann::json viewStatesByName(const nlohmann::json& views);

}  // namespace kvscope::ui
