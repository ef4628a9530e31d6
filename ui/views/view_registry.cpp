// SPDX-License-Identifier: GPL-3.0-or-later
#include "ui/views/view_registry.h"

#include <iterator>

#include "ui/views/budget_view.h"
#include "ui/views/diagnosis_view.h"
#include "ui/views/drift_view.h"
#include "ui/views/heatmap_view.h"
#include "ui/views/histogram_view.h"
#include "ui/views/sensitivity_view.h"
#include "ui/views/summary_view.h"

namespace kvscope::ui {

namespace {
template <class V>
ViewRegistration registration() {
  return {QString::fromLatin1(V::kName), [](QWidget* parent) -> View* { return new V(parent); }};
}
}  // namespace

const std::vector<ViewRegistration>& viewRegistry() {
  // Tab order. A new view: its two files under ui/views/ and one line here.
  static const std::vector<ViewRegistration> views{
      registration<HistogramView>(),
      registration<HeatmapView>(),
      registration<DriftView>(),
      registration<SummaryView>(),
      registration<BudgetView>(),
      registration<SensitivityView>(),
      registration<DiagnosisView>(),
  };
  return views;
}

QStringList viewNames() {
  QStringList names;
  for (const ViewRegistration& v : viewRegistry()) names << v.name;
  return names;
}

nlohmann::json viewStatesByName(const nlohmann::json& views) {
  nlohmann::json out = views;
  if (out.contains("tab") && out["tab"].is_number_integer()) {
    // The tabs in the order they had when sessions stored an index.
    static const char* const kLegacyTabs[] = {"histogram", "heatmap",     "drift",    "summary",
                                              "budget",    "sensitivity", "diagnosis"};
    const int index = out["tab"].get<int>();
    if (index >= 0 && index < static_cast<int>(std::size(kLegacyTabs))) out["tab"] = kLegacyTabs[index];
    else out.erase("tab");
  }
  const auto moveInto = [&out](const char* from, const char* view, const char* key) {
    if (!out.contains(from)) return;
    if (!out.contains(view) || !out[view].is_object()) out[view] = nlohmann::json::object();
    if (!out[view].contains(key)) out[view][key] = out[from];
    out.erase(from);
  };
  moveInto("budgets", "summary", "budgets");
  moveInto("capacity", "budget", "capacity");
  moveInto("search", "budget", "search");
  return out;
}

}  // namespace kvscope::ui
