// SPDX-License-Identifier: GPL-3.0-or-later
// The window's document (after LabPlot's backend objects): the open dump, the one copy of the K
// and V plans in force, the setting pinned as A, the selection, undo/redo and session files. The
// widgets and views show it and send it the user's edits; it announces every change by a signal
// and knows no widget. Opening a dump is one transaction: the new dump, the setting re-resolved
// for it (or the reason it does not fit) and the clamped selection are in place before
// dumpChanged() is emitted, and listeners drop every result of the old dump on that signal.
#pragma once

#include <QObject>
#include <QString>
#include <QStringList>

#include <nlohmann/json.hpp>

#include <memory>
#include <optional>

#include "core/diagnose/diagnose.h"
#include "core/io/dump.h"
#include "core/io/mapping.h"
#include "core/quant/plan.h"
#include "ui/state/selection.h"

class QUndoStack;

namespace kvscope::ui {

class JobRunner;

/// How the setting in force was made; a preset or engine string is resolved again for each dump
/// opened (its specs depend on the dump's shape), plans typed or edited are kept as they are.
struct SettingSource {
  enum class Kind {
    Default,  ///< untouched: what llama.cpp users run most, resolved for each dump
    Plans,    ///< edited in the panels, typed, loaded from a session or the command line
    Preset,   ///< a §9 preset by name
    Engine,   ///< an engine's flags (core/engine/engine.h)
  };
  Kind kind = Kind::Default;
  QString text;  ///< the preset name or the engine string
  bool operator==(const SettingSource& o) const { return kind == o.kind && text == o.text; }
};

/// The K and V settings as one undoable state.
struct Setting {
  Plan key;
  Plan value;           ///< V's own plan; while linked, valuePlan() follows K instead
  bool linked = false;  ///< the Value panel's "same as key"
  SettingSource source;
  QStringList notes;    ///< what the preset or engine rule says for this dump (ignored flags, rotation)
  [[nodiscard]] bool sameAs(const Setting& o) const { return key == o.key && value == o.value && linked == o.linked; }
};

/// The setting pinned as A, on the open dump or on a dump of its own (two dumps side by side: the
/// same model at two lengths, two models, two texts).
struct PinnedSetting {
  Plan key;
  Plan value;
  /// A's own dump; null: A is computed on the open dump (and follows it when another is opened).
  std::shared_ptr<const Dump> dump;
  bool operator==(const PinnedSetting& o) const { return key == o.key && value == o.value && dump == o.dump; }
};

/// "K q8_0 · V q4_0" (plan strings, §12).
QString describeSetting(const Plan& key, const Plan& value);

/// What changed in the selection (Session::selectionChanged).
enum SelectionChange : int {
  kLayerChanged = 1,
  kKvHeadChanged = 2,
  kQueryChanged = 4,   ///< query head or row
  kPointChanged = 8,   ///< channel or token
};

class Session : public QObject {
  Q_OBJECT

 public:
  explicit Session(QObject* parent = nullptr);
  ~Session() override;

  // ---- The dump --------------------------------------------------------------------------------
  /// Opens a dump in the background; dumpChanged() or an error follows, and the old dump stays
  /// open until the new one is read.
  void openDump(const QString& path, std::optional<Mapping> mapping = std::nullopt);
  /// Opens the built-in sample (written once into the cache folder).
  void openSample();
  [[nodiscard]] const std::shared_ptr<const Dump>& dump() const { return dump_; }
  [[nodiscard]] const std::optional<Mapping>& mapping() const { return mapping_; }
  [[nodiscard]] const QStringList& tokenText() const { return tokenText_; }
  /// The lane that opens dumps (the window shows its progress).
  JobRunner* openRunner() { return openRunner_; }

  // ---- The setting in force (B while a setting is pinned) ----------------------------------------
  [[nodiscard]] const Setting& setting() const { return setting_; }
  /// The plans in force: V follows K's plan (without prerope) while linked.
  [[nodiscard]] Plan keyPlan() const { return setting_.key; }
  [[nodiscard]] Plan valuePlan() const;
  /// Why the setting cannot be used with the open dump (empty when it can, or no dump is open).
  [[nodiscard]] const QString& settingProblem() const { return problem_; }
  /// A dump is open and the setting fits it.
  [[nodiscard]] bool usable() const { return dump_ && problem_.isEmpty(); }
  /// Makes `setting` the one in force as an undo step named `what`; `mergeable` steps with the
  /// same name merge (a slider drag is one step). Nothing happens when it equals the current one.
  void edit(const Setting& setting, const QString& what, bool mergeable = false);
  /// Sets both plans (a preset, a plan search's result, the command line): unlinks.
  void setPlans(const Plan& key, const Plan& value, const QString& what = {});
  /// Applies a §9 preset by name, resolved for the open dump (or for the next one opened when
  /// none is open); false (and an error) when unknown or not applicable to the dump.
  bool applyPreset(const QString& name);
  /// Applies an engine string (core/engine/engine.h) the same way; the setting's notes hold what
  /// the engine rule says, or the refusal.
  bool applyEngine(const QString& text);
  /// The refusal of the last engine string given, when it was refused (shown under the field).
  [[nodiscard]] const QString& engineRefusal() const { return engineRefusal_; }
  /// Puts `setting` in force without an undo step (what undo, redo and sessions do).
  void restoreSetting(const Setting& setting);

  // ---- A/B ---------------------------------------------------------------------------------------
  [[nodiscard]] const std::optional<PinnedSetting>& pinned() const { return pinned_; }
  /// Pins the setting in force as A (an undo step); the controls go on setting B.
  void pinAsA();
  /// Stops comparing (an undo step).
  void unpinA();
  /// Makes A the setting in force and pins the current one as A (one undo step).
  void swapAB();
  /// Puts the pin in `setting` without an undo step (what undo, redo and sessions do).
  void restorePinned(const std::optional<PinnedSetting>& setting);
  /// Opens the dump at `path` in the background and pins it as A (an undo step) under `plans`, or
  /// when none are given under the setting in force resolved for that dump (its preset or engine
  /// string, as a dump opened in the window would be). A setting that does not fit that dump is
  /// reported and nothing is pinned. The open dump stays B's.
  void pinDumpAsA(const QString& path, std::optional<std::pair<Plan, Plan>> plans = std::nullopt);
  /// The dump A is computed on: its own, or the open one (null when neither).
  [[nodiscard]] std::shared_ptr<const Dump> pinnedDump() const;
  /// A has a dump of its own (not the open one).
  [[nodiscard]] bool pinnedOnOtherDump() const { return pinned_ && pinned_->dump && pinned_->dump != dump_; }
  /// The file name of A's own dump (empty while A is on the open dump).
  [[nodiscard]] QString pinnedDumpName() const;
  /// "K q8_0 · V q4_0", preceded by A's dump's file name when A has its own dump.
  [[nodiscard]] QString describePinned() const;
  /// The lane that opens A's own dump.
  JobRunner* pinRunner() { return pinRunner_; }
  [[nodiscard]] const JobRunner* pinRunner() const { return pinRunner_; }

  // ---- The selection -----------------------------------------------------------------------------
  [[nodiscard]] const Selection& selection() const { return selection_; }
  /// Selects a layer and kv head (clamped to the dump); a new kv head moves the query head into it.
  void select(int layer, int kvHead);
  /// Steps through layers or kv heads, wrapping around.
  void stepLayer(int delta);
  void stepHead(int delta);
  /// Selects a channel and token (the histogram's group, the heat map's cell).
  void selectPoint(int channel, int token);
  /// Selects a query head and row (-1: the last); a query head of another kv head selects that head.
  void selectQuery(int queryHead, int queryIndex);
  /// Selects the place of a diagnosis' evidence; pointedAt() tells the views which tensor to show.
  void pointAt(const Evidence& evidence);

  // ---- Budgets (the layer summary's, which the budget search follows) ---------------------------
  /// The largest acceptable key_only (K) and value_only (V) output_rel_error.
  void setBudgets(double key, double value);
  [[nodiscard]] std::pair<double, double> budgets() const { return budgets_; }

  // ---- Undo and files ----------------------------------------------------------------------------
  [[nodiscard]] QUndoStack* undoStack() { return undo_; }
  /// Session JSON: dump, mapping, plans, link, selection, A, and `views` (each view's state by name).
  [[nodiscard]] std::string toJson(const nlohmann::ordered_json& views) const;
  /// Writes toJson(views) atomically to `path`; Ctrl+S writes there from then on.
  Status save(const QString& path, const nlohmann::ordered_json& views);
  /// Reads a session: the setting, the selection and A now (one undo step), then opens its dump.
  /// Returns the views' states (by name) for the window to apply; a moved dump is reported.
  Expected<nlohmann::json> load(const QString& path);
  /// Where Ctrl+S writes the session (the last one saved or loaded; empty: it asks).
  [[nodiscard]] const QString& path() const { return path_; }

  /// The caption line under exported figures: dump, layer, kv head, K and V plans.
  [[nodiscard]] QString exportCaption() const;
  /// The lines every exported CSV starts with ("dump: …", "model: …", "layer: …", "key: …", …).
  [[nodiscard]] QStringList exportMetadata() const;

  /// Reports an error in the one place that shows errors (the window), e.g. from a view.
  void reportError(const QString& context, const QString& message) { emit errorReported(context, message); }
  void reportStatus(const QString& message) { emit statusReported(message); }

 signals:
  /// A new dump is open, with the setting resolved for it and the selection clamped to it. Every
  /// result computed for the previous dump is void.
  void dumpChanged();
  /// The setting in force changed (plans, link, notes or whether it fits the dump).
  void settingChanged();
  /// A was pinned, replaced or unpinned.
  void pinnedChanged();
  /// The selection changed; `what` ORs SelectionChange flags.
  void selectionChanged(int what);
  /// A diagnosis' evidence was selected: views that can show its tensor and place do.
  void pointedAt(const kvscope::Evidence& evidence);
  void budgetsChanged(double key, double value);
  void errorReported(const QString& context, const QString& message);
  void statusReported(const QString& message);

 private:
  struct Opened;
  /// Opens a dump and reads its token text (on a lane).
  static Expected<std::shared_ptr<Opened>> read(const std::string& file, const std::optional<Mapping>& mapping,
                                                const Progress& progress);
  void adopt(const std::shared_ptr<Opened>& opened);
  /// Why plans do not fit a dump ("key: …"), or empty.
  static QString problemOf(const Plan& key, const Plan& value, const DumpInfo& info);
  Status resolveSourceFor(Setting& out, const DumpInfo& info) const;
  /// Resolves setting_ (by its source) for the open dump and sets problem_.
  void resolveForDump(QString* note);
  /// Resolves `out`'s preset, engine or default source for the open dump into its plans and notes.
  Status resolveSource(Setting& out) const;
  void checkProblem();
  void clampSelection();
  bool applySource(const SettingSource& source);

  std::shared_ptr<const Dump> dump_;
  std::optional<Mapping> mapping_;
  QStringList tokenText_;
  Setting setting_;
  QString problem_;
  QString engineRefusal_;
  std::optional<PinnedSetting> pinned_;
  Selection selection_;
  std::pair<double, double> budgets_{0.05, 0.05};
  QUndoStack* undo_;
  QString path_;
  QString pendingMessage_;  ///< said when the dump a session names is open
  JobRunner* openRunner_;
  JobRunner* pinRunner_;
};

}  // namespace kvscope::ui
