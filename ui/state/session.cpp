// SPDX-License-Identifier: GPL-3.0-or-later
#include "ui/state/session.h"

#include <QFileInfo>
#include <QStandardPaths>
#include <QUndoCommand>
#include <QUndoStack>

#include <algorithm>

#include "core/engine/engine.h"
#include "core/engine/setting.h"
#include "core/synth/synth.h"
#include "core/util/atomic_file.h"
#include "core/util/json_text.h"
#include "ui/workers/dump_reader.h"
#include "ui/workers/job_runner.h"

namespace kvscope::ui {

namespace {

/// The setting a dump opens on: what llama.cpp users run most (q8_0 keys, q4_0 values), stored as
/// llama.cpp stores them for the dump's shape (its rotation included where the head dim takes one).
constexpr const char* kDefaultEngine = "llama.cpp -ctk q8_0 -ctv q4_0";

QString q(const std::string& s) { return QString::fromStdString(s); }

Plan planOf(const char* spec) { return Plan(*parseSpec(spec)); }

KvShape shapeOf(const DumpInfo& info) { return KvShape{info.headDim, info.layers, info.kvHeads}; }

SpecContext contextOf(const DumpInfo& info, bool isKey) {
  SpecContext c;
  c.isKey = isKey;
  c.kvHeads = info.kvHeads;
  c.headDim = info.headDim;
  c.hasKeyPreRope = info.hasKeyPreRope;
  return c;
}

// One step of the K/V setting, undone and redone as a whole.
class SettingCommand : public QUndoCommand {
 public:
  SettingCommand(Session* session, Setting before, Setting after, const QString& text, bool mergeable)
      : QUndoCommand(text), session_(session), before_(std::move(before)), after_(std::move(after)),
        mergeable_(mergeable) {}
  void undo() override { session_->restoreSetting(before_); }
  void redo() override {
    if (pushed_) session_->restoreSetting(after_);  // the first redo is the push: already applied
    pushed_ = true;
  }
  [[nodiscard]] int id() const override { return 1; }
  bool mergeWith(const QUndoCommand* other) override {
    // A slider drag is one step, not one per value it passed.
    const auto* o = static_cast<const SettingCommand*>(other);
    if (!mergeable_ || !o->mergeable_ || o->text() != text()) return false;
    after_ = o->after_;
    return true;
  }

 private:
  Session* session_;
  Setting before_, after_;
  bool mergeable_;
  bool pushed_ = false;
};

// Pinning, replacing or unpinning A, undone and redone as a whole.
class PinCommand : public QUndoCommand {
 public:
  PinCommand(Session* session, std::optional<PinnedSetting> before, std::optional<PinnedSetting> after,
             const QString& text)
      : QUndoCommand(text), session_(session), before_(std::move(before)), after_(std::move(after)) {}
  void undo() override { session_->restorePinned(before_); }
  void redo() override {
    if (pushed_) session_->restorePinned(after_);
    pushed_ = true;
  }

 private:
  Session* session_;
  std::optional<PinnedSetting> before_, after_;
  bool pushed_ = false;
};

}  // namespace

struct Session::Opened {
  std::shared_ptr<const Dump> dump;
  std::optional<Mapping> mapping;
  QStringList tokenText;
};

QString describeSetting(const Plan& key, const Plan& value) {
  return QStringLiteral("K %1 · V %2").arg(q(toString(key)), q(toString(value)));
}

Session::Session(QObject* parent) : QObject(parent) {
  undo_ = new QUndoStack(this);
  openRunner_ = new JobRunner(tr("opening"), this);
  pinRunner_ = new JobRunner(tr("opening A's dump"), this);
  setting_.key = planOf("q8_0");
  setting_.value = planOf("q4_0");
}

Session::~Session() {
  openRunner_->cancel();
  pinRunner_->cancel();
  openRunner_->waitForIdle();
  pinRunner_->waitForIdle();
}

Plan Session::valuePlan() const {
  if (!setting_.linked) return setting_.value;
  // V follows K's whole plan, as its default follows K's spec; pre-RoPE is for keys only.
  Plan p = setting_.key;
  p.base.prerope = false;
  for (PlanOverride& o : p.overrides) o.spec.prerope = false;
  return p;
}

// ---- The dump ----------------------------------------------------------------------------------

void Session::openSample() {
  const QString folder = QStandardPaths::writableLocation(QStandardPaths::CacheLocation);
  emit statusReported(tr("Preparing the built-in sample…"));
  openRunner_->start<std::string>(
      [folder](const Progress&) -> Expected<std::string> { return ensureSampleDump(folder.toStdString()); },
      [this](std::string path) { openDump(q(path)); });
}

Expected<std::shared_ptr<Session::Opened>> Session::read(const std::string& file, const std::optional<Mapping>& mapping,
                                                          const Progress& progress) {
  OpenOptions options;
  options.mapping = mapping;
  // A file that crashes or hangs libhdf5 must not take the window with it: the dump is
  // opened, and every read of it served, by a kvscope-cli reader process.
  options.isolation = readerIsolation();
  if (!report(progress, 0.2, "opening")) return Status::cancelled();
  auto dump = Dump::open(file, options);
  if (!dump) return dump.status();
  if (!report(progress, 0.5, "reading token text")) return Status::cancelled();
  auto opened = std::make_shared<Opened>();
  opened->dump = *dump;
  opened->mapping = mapping;
  if ((*dump)->info().hasTokenText) {
    if (auto text = (*dump)->tokenText()) {
      for (const std::string& t : *text) opened->tokenText << QString::fromStdString(t);
    }
  }
  return opened;
}

void Session::openDump(const QString& path, std::optional<Mapping> mapping) {
  emit statusReported(tr("Opening %1…").arg(path));
  const std::string file = path.toStdString();
  openRunner_->start<std::shared_ptr<Opened>>(
      [file, mapping](const Progress& progress) { return read(file, mapping, progress); },
      [this](std::shared_ptr<Opened> opened) { adopt(opened); });
}

void Session::adopt(const std::shared_ptr<Opened>& opened) {
  dump_ = opened->dump;
  mapping_ = opened->mapping;
  engineRefusal_.clear();  // it named the old dump's shape
  tokenText_ = opened->tokenText;
  clampSelection();
  QString note;
  resolveForDump(&note);
  const DumpInfo& info = dump_->info();
  // Listeners drop every result of the old dump, then show this one.
  emit dumpChanged();
  QString status = tr("Opened %1.").arg(q(info.path)) + note;
  if (!problem_.isEmpty()) status += tr(" ⚠ The setting does not fit this dump: %1").arg(problem_);
  for (const std::string& w : info.warnings) status += QStringLiteral(" ⚠ ") + q(w);
  if (!pendingMessage_.isEmpty()) {
    status += QStringLiteral(" ") + pendingMessage_;
    pendingMessage_.clear();
  }
  emit statusReported(status);
  if (!problem_.isEmpty()) emit errorReported(tr("setting"), problem_);
}

void Session::clampSelection() {
  const DumpInfo& info = dump_->info();
  selection_.layer = std::clamp(selection_.layer, 0, info.layers - 1);
  selection_.kvHead = std::clamp(selection_.kvHead, 0, info.kvHeads - 1);
  selection_.queryHead = std::clamp(selection_.queryHead, 0, std::max(0, info.heads - 1));
  if (selection_.queryIndex >= info.queries) selection_.queryIndex = -1;
  selection_.queryIndex = selection_.queryRow(info.queries);  // "the last row" becomes that row
  selection_.channel = std::clamp(selection_.channel, 0, info.headDim - 1);
  selection_.token = std::clamp(selection_.token, 0, info.tokens - 1);
}

Status Session::resolveSource(Setting& out) const { return resolveSourceFor(out, dump_->info()); }

Status Session::resolveSourceFor(Setting& out, const DumpInfo& info) const {
  SettingText text;
  if (out.source.kind == SettingSource::Kind::Preset) text.preset = out.source.text.toStdString();
  else if (out.source.kind == SettingSource::Kind::Engine) text.engine = out.source.text.toStdString();
  else text.engine = kDefaultEngine;
  auto r = resolveSetting(text, shapeOf(info));
  if (!r) return r.status();
  out.key = r->plans.key;
  out.value = r->plans.value;
  out.linked = false;
  out.notes.clear();
  if (out.source.kind != SettingSource::Kind::Default) {
    for (const std::string& n : r->strings.notes) out.notes << q(n);
  }
  return Status::ok();
}

void Session::resolveForDump(QString* note) {
  problem_.clear();
  switch (setting_.source.kind) {
    case SettingSource::Kind::Plans: break;
    case SettingSource::Kind::Preset:
    case SettingSource::Kind::Engine: {
      Setting resolved = setting_;
      const Status s = resolveSource(resolved);
      if (!s.isOk()) {
        // The old dump's plans stay in the panels, refused for this one: nothing is computed.
        problem_ = q(s.message());
        setting_.notes = QStringList{problem_};
        return;
      }
      setting_ = resolved;
      break;
    }
    case SettingSource::Kind::Default: {
      Setting resolved = setting_;
      // llama.cpp refuses its quantized cache types where the head dim is not a multiple of their
      // block (stories260K's 8): then the default is not what llama.cpp users run there either.
      const Status engine = resolveSource(resolved);
      if (engine.isOk()) setting_ = resolved;
      checkProblem();
      if (!engine.isOk() && problem_.isEmpty()) problem_ = q(engine.message());
      if (!problem_.isEmpty()) {
        // The opening default does not fit every shape; untouched, it gives way to per-token int8 /
        // int4, which fit any shape (the status bar says so).
        const QString why = problem_;
        setting_.key = planOf("int8");
        setting_.value = planOf("int4");
        setting_.linked = false;
        *note = tr(" The default specs (%1) do not fit this dump (%2); showing K int8, V int4.")
                    .arg(QString::fromLatin1(kDefaultEngine), why);
      }
      break;
    }
  }
  checkProblem();
}

QString Session::problemOf(const Plan& key, const Plan& value, const DumpInfo& info) {
  const Status k = validatePlan(key, contextOf(info, true), info.layers);
  if (!k.isOk()) return tr("key: %1").arg(q(k.message()));
  const Status v = validatePlan(value, contextOf(info, false), info.layers);
  if (!v.isOk()) return tr("value: %1").arg(q(v.message()));
  return {};
}

void Session::checkProblem() {
  problem_.clear();
  if (dump_) problem_ = problemOf(keyPlan(), valuePlan(), dump_->info());
}

// ---- The setting -------------------------------------------------------------------------------

void Session::edit(const Setting& setting, const QString& what, bool mergeable) {
  if (setting.sameAs(setting_) && setting.source == setting_.source) return;
  const Setting before = setting_;
  setting_ = setting;
  engineRefusal_.clear();  // a refused engine string is no longer what the panels show
  if (setting_.source.kind == SettingSource::Kind::Plans || setting_.source.kind == SettingSource::Kind::Default)
    setting_.notes.clear();
  checkProblem();
  undo_->push(new SettingCommand(this, before, setting_, what, mergeable));
  emit settingChanged();
}

void Session::restoreSetting(const Setting& setting) {
  setting_ = setting;
  if (dump_ && setting_.source.kind != SettingSource::Kind::Plans) {
    // A step recorded on another dump: its preset or engine string is resolved for this one.
    QString note;
    resolveForDump(&note);
  } else {
    checkProblem();
  }
  emit settingChanged();
}

void Session::setPlans(const Plan& key, const Plan& value, const QString& what) {
  Setting s;
  s.key = key;
  s.value = value;
  s.source.kind = SettingSource::Kind::Plans;
  edit(s, what.isEmpty() ? tr("K and V settings") : what);
}

bool Session::applySource(const SettingSource& source) {
  Setting s;
  s.source = source;
  const QString what = (source.kind == SettingSource::Kind::Engine ? tr("engine %1") : tr("preset %1")).arg(source.text);
  if (!dump_) {
    // Resolved for the dump once one is open; a preset is the whole setting, so the plans' overrides go now.
    s.key = Plan(setting_.key.base);
    s.value = Plan(valuePlan().base);
    edit(s, what);
    return true;
  }
  const Status resolved = resolveSource(s);
  if (!resolved.isOk()) {
    if (source.kind == SettingSource::Kind::Engine) {
      engineRefusal_ = q(resolved.message());
      emit settingChanged();
    }
    emit errorReported(source.kind == SettingSource::Kind::Engine ? tr("engine") : tr("preset"), q(resolved.message()));
    return false;
  }
  edit(s, what);
  emit statusReported(tr("%1: K %2, V %3.").arg(source.text, q(toString(s.key)), q(toString(s.value))));
  return true;
}

bool Session::applyPreset(const QString& name) {
  if (findPreset(name.toStdString()) == nullptr) {
    emit errorReported(tr("preset"), q(resolvePreset(name.toStdString(), {}).status().message()));
    return false;
  }
  return applySource(SettingSource{SettingSource::Kind::Preset, name});
}

bool Session::applyEngine(const QString& text) {
  // Flags are checked now; what they store depends on the dump's head dim.
  auto check = resolveEngine(text.toStdString(), {});
  if (!check) {
    engineRefusal_ = q(check.status().message());
    emit settingChanged();
    emit errorReported(tr("engine"), engineRefusal_);
    return false;
  }
  engineRefusal_.clear();
  return applySource(SettingSource{SettingSource::Kind::Engine, text});
}

// ---- A/B ---------------------------------------------------------------------------------------

std::shared_ptr<const Dump> Session::pinnedDump() const {
  if (!pinned_) return nullptr;
  return pinned_->dump ? pinned_->dump : dump_;
}

QString Session::pinnedDumpName() const {
  return pinnedOnOtherDump() ? QFileInfo(q(pinned_->dump->info().path)).fileName() : QString();
}

QString Session::describePinned() const {
  if (!pinned_) return {};
  const QString plans = describeSetting(pinned_->key, pinned_->value);
  if (!pinnedOnOtherDump()) return plans;
  return QStringLiteral("%1 · %2").arg(pinnedDumpName(), plans);
}

void Session::restorePinned(const std::optional<PinnedSetting>& setting) {
  if (setting == pinned_) return;
  pinned_ = setting;
  emit pinnedChanged();
  // Undo and redo land here too: the status bar must not keep "Pinned as A" once A is gone
  // (pinAsA, unpinA and swapAB say more right after).
  emit statusReported(pinned_ ? tr("A is %1.").arg(describePinned()) : tr("A is unpinned; the views show one setting."));
}

void Session::pinDumpAsA(const QString& path, std::optional<std::pair<Plan, Plan>> plans) {
  emit statusReported(tr("Opening %1 as A…").arg(path));
  const std::string file = path.toStdString();
  pinRunner_->start<std::shared_ptr<Opened>>(
      [file](const Progress& progress) { return read(file, std::nullopt, progress); },
      // The setting in force now (a B setting applied while the dump is read does not become A's),
      // with V as valuePlan() gives it (following K while linked).
      [this, plans, asked = setting_, askedValue = valuePlan()](std::shared_ptr<Opened> opened) {
        const DumpInfo& info = opened->dump->info();
        const QString name = QFileInfo(q(info.path)).fileName();
        PinnedSetting a;
        a.dump = opened->dump;
        if (plans) {
          a.key = plans->first;
          a.value = plans->second;
        } else if (asked.source.kind == SettingSource::Kind::Plans) {
          // Plans typed or edited are taken as they are.
          a.key = asked.key;
          a.value = askedValue;
        } else {
          // A preset or engine string (or the opening default) means what it would on that dump:
          // it is resolved for its shape.
          Setting resolved = asked;
          const Status s = resolveSourceFor(resolved, info);
          if (!s.isOk()) {
            emit errorReported(tr("pin dump as A"), tr("%1: %2").arg(name, q(s.message())));
            return;
          }
          a.key = resolved.key;
          a.value = resolved.value;  // resolving unlinks
        }
        const QString problem = problemOf(a.key, a.value, info);
        if (!problem.isEmpty()) {
          emit errorReported(tr("pin dump as A"),
                             tr("%1: the setting %2 does not fit it: %3").arg(name, describeSetting(a.key, a.value), problem));
          return;
        }
        const std::optional<PinnedSetting> before = pinned_;
        restorePinned(a);
        undo_->push(new PinCommand(this, before, a, tr("pin dump %1 as A").arg(name)));
        emit statusReported(tr("Pinned %1 as A: %2. B is the open dump.").arg(name, describeSetting(a.key, a.value)));
      });
}

void Session::pinAsA() {
  if (!problem_.isEmpty()) {
    emit errorReported(tr("pin as A"), tr("the current setting does not fit the dump; fix it first"));
    return;
  }
  const std::optional<PinnedSetting> before = pinned_;
  const PinnedSetting now{keyPlan(), valuePlan(), nullptr};
  if (before == now) return;
  restorePinned(now);
  undo_->push(new PinCommand(this, before, now, before ? tr("pin the current setting as A") : tr("pin as A")));
  emit statusReported(tr("Pinned as A: %1. Change the controls to set B.").arg(describeSetting(now.key, now.value)));
}

void Session::unpinA() {
  const std::optional<PinnedSetting> before = pinned_;
  if (!before) return;
  const QString was = describePinned();
  restorePinned(std::nullopt);
  undo_->push(new PinCommand(this, before, std::nullopt, tr("unpin A")));
  emit statusReported(tr("Unpinned A (%1); the views show one setting again.").arg(was));
}

void Session::swapAB() {
  const std::optional<PinnedSetting> a = pinned_;
  if (!a || !problem_.isEmpty()) return;
  if (pinnedOnOtherDump()) {
    // The controls set B on the open dump only; swapping would put A's plans on a dump they were
    // not chosen for.
    emit errorReported(tr("swap A and B"), tr("A is on another dump (%1); swapping swaps settings on one dump. Open "
                                              "that dump to make it B, or pin the current setting as A.")
                                               .arg(pinnedDumpName()));
    return;
  }
  const PinnedSetting b{keyPlan(), valuePlan(), nullptr};
  undo_->beginMacro(tr("swap A and B"));
  restorePinned(b);
  undo_->push(new PinCommand(this, a, b, tr("swap A and B")));
  setPlans(a->key, a->value, tr("swap A and B"));
  undo_->endMacro();
  emit statusReported(tr("Swapped: A is %1, B is %2.").arg(describeSetting(b.key, b.value), describeSetting(a->key, a->value)));
}

// ---- The selection -----------------------------------------------------------------------------

void Session::select(int layer, int kvHead) {
  if (!dump_) return;
  const DumpInfo& info = dump_->info();
  layer = std::clamp(layer, 0, info.layers - 1);
  kvHead = std::clamp(kvHead, 0, info.kvHeads - 1);
  int what = 0;
  if (layer != selection_.layer) what |= kLayerChanged;
  if (kvHead != selection_.kvHead) what |= kKvHeadChanged;
  selection_.layer = layer;
  selection_.kvHead = kvHead;
  if ((what & kKvHeadChanged) && info.groupSize() > 0) {
    selection_.queryHead = kvHead * info.groupSize();
    what |= kQueryChanged;
  }
  if (what != 0) emit selectionChanged(what);
}

void Session::stepLayer(int delta) {
  if (dump_) select((selection_.layer + delta + dump_->info().layers) % dump_->info().layers, selection_.kvHead);
}

void Session::stepHead(int delta) {
  if (dump_) select(selection_.layer, (selection_.kvHead + delta + dump_->info().kvHeads) % dump_->info().kvHeads);
}

void Session::selectPoint(int channel, int token) {
  if (dump_) {
    channel = std::clamp(channel, 0, dump_->info().headDim - 1);
    token = std::clamp(token, 0, dump_->info().tokens - 1);
  }
  if (channel == selection_.channel && token == selection_.token) return;
  selection_.channel = channel;
  selection_.token = token;
  emit selectionChanged(kPointChanged);
}

void Session::selectQuery(int queryHead, int queryIndex) {
  int what = 0;
  if (queryHead != selection_.queryHead || queryIndex != selection_.queryIndex) what |= kQueryChanged;
  selection_.queryHead = queryHead;
  selection_.queryIndex = queryIndex;
  if (dump_ && dump_->info().groupSize() > 0) {
    const int kvHead = std::clamp(queryHead / dump_->info().groupSize(), 0, dump_->info().kvHeads - 1);
    if (kvHead != selection_.kvHead) {
      selection_.kvHead = kvHead;
      what |= kKvHeadChanged;
    }
  }
  if (what != 0) emit selectionChanged(what);
}

void Session::pointAt(const Evidence& e) {
  if (!dump_) return;
  const DumpInfo& info = dump_->info();
  int what = 0;
  const auto set = [&what](int& field, int value, int flag) {
    if (field != value) what |= flag;
    field = value;
  };
  if (e.channel >= 0) set(selection_.channel, std::clamp(e.channel, 0, info.headDim - 1), kPointChanged);
  if (e.token >= 0) set(selection_.token, static_cast<int>(std::clamp<int64_t>(e.token, 0, info.tokens - 1)), kPointChanged);
  if (e.layer >= 0) set(selection_.layer, std::clamp(e.layer, 0, info.layers - 1), kLayerChanged);
  if (e.kvHead >= 0) {
    const int head = std::clamp(e.kvHead, 0, info.kvHeads - 1);
    if (head != selection_.kvHead && info.groupSize() > 0) set(selection_.queryHead, head * info.groupSize(), kQueryChanged);
    set(selection_.kvHead, head, kKvHeadChanged);
  }
  if (e.queryHead >= 0 && e.queryHead < info.heads) set(selection_.queryHead, e.queryHead, kQueryChanged);
  // The views switch to the evidence's tensor first, so that the recomputation asks for it.
  emit pointedAt(e);
  emit selectionChanged(what | kPointChanged);
}

void Session::setBudgets(double key, double value) {
  if (budgets_ == std::make_pair(key, value)) return;
  budgets_ = {key, value};
  emit budgetsChanged(key, value);
}

QString Session::exportCaption() const {
  if (!dump_) return {};
  return tr("%1 · layer %2 · kv head %3 · K %4 · V %5")
      .arg(QFileInfo(q(dump_->info().path)).fileName())
      .arg(selection_.layer)
      .arg(selection_.kvHead)
      .arg(q(toString(keyPlan())), q(toString(valuePlan()))) +
         (pinnedOnOtherDump() ? tr(" · A: %1").arg(pinnedDumpName()) : QString());
}

QStringList Session::exportMetadata() const {
  QStringList lines;
  if (dump_) {
    const DumpInfo& info = dump_->info();
    lines << QStringLiteral("dump: ") + q(info.path);
    if (!info.model.empty()) lines << QStringLiteral("model: ") + q(info.model);
    lines << QStringLiteral("layer: %1").arg(selection_.layer) << QStringLiteral("kv head: %1").arg(selection_.kvHead);
  }
  lines << QStringLiteral("key: ") + q(toString(keyPlan())) << QStringLiteral("value: ") + q(toString(valuePlan()));
  if (setting_.source.kind == SettingSource::Kind::Preset) lines << QStringLiteral("preset: ") + setting_.source.text;
  if (setting_.source.kind == SettingSource::Kind::Engine) lines << QStringLiteral("engine: ") + setting_.source.text;
  if (pinned_) {
    // The pinned setting A the B columns are compared with, and its own dump when it has one.
    if (pinnedOnOtherDump()) lines << QStringLiteral("A dump: ") + q(pinned_->dump->info().path);
    lines << QStringLiteral("A key: ") + q(toString(pinned_->key)) << QStringLiteral("A value: ") + q(toString(pinned_->value));
  }
  lines << QStringLiteral("kvscope: ") + QStringLiteral(KVSCOPE_VERSION);
  return lines;
}

// ---- Files -------------------------------------------------------------------------------------

std::string Session::toJson(const nlohmann::ordered_json& views) const {
  nlohmann::ordered_json j;
  j["kvscope_session"] = 1;
  j["dump"] = dump_ ? dump_->info().path : std::string();
  if (mapping_) j["mapping"] = nlohmann::json::parse(mappingToJson(*mapping_), nullptr, false);
  j["key"] = toString(setting_.key);  // plan strings (§12); a plain spec is a one-part plan
  j["value"] = toString(valuePlan());
  j["value_same_as_key"] = setting_.linked;
  if (setting_.source.kind == SettingSource::Kind::Preset) j["preset"] = setting_.source.text.toStdString();
  if (setting_.source.kind == SettingSource::Kind::Engine) j["engine"] = setting_.source.text.toStdString();
  j["selection"] = {{"layer", selection_.layer},       {"kv_head", selection_.kvHead},
                    {"query_head", selection_.queryHead}, {"query_index", selection_.queryIndex},
                    {"channel", selection_.channel},   {"token", selection_.token}};
  j["views"] = views;
  if (pinned_) {
    j["compare"] = {{"key", toString(pinned_->key)}, {"value", toString(pinned_->value)}};
    if (pinnedOnOtherDump()) j["compare"]["dump"] = pinned_->dump->info().path;
  }
  return jsonText(j);
}

Status Session::save(const QString& path, const nlohmann::ordered_json& views) {
  Status s = writeFileAtomic(path.toStdString(), toJson(views));
  if (s.isOk()) path_ = path;  // Ctrl+S writes here from now on
  return s;
}

Expected<nlohmann::json> Session::load(const QString& path) {
  auto text = readTextFile(path.toStdString());
  if (!text) return text.status();
  const std::string origin = path.toStdString();
  auto json = parseJsonText(*text, origin);  // "FILE: line L, column C: …"
  if (!json) return json.status();
  const nlohmann::json j = std::move(*json);
  if (!j.is_object() || !j.contains("kvscope_session") || j["kvscope_session"] != 1) {
    return Status::invalidData(origin + ": not a kvscope session (no \"kvscope_session\": 1)");
  }
  nlohmann::json views = nlohmann::json::object();
  try {
    // Plans (§12); sessions written before plans hold plain specs, which are one-part plans.
    auto key = parsePlan(j.value("key", std::string("none")));
    if (!key) return key.status().withContext(origin + ": key");
    auto value = parsePlan(j.value("value", std::string("none")));
    if (!value) return value.status().withContext(origin + ": value");
    std::optional<PinnedSetting> pinned;
    std::string comparedDump;  // A's own dump, opened after the session's
    // A session is the whole state: one without "compare" unpins.
    if (j.contains("compare") && j["compare"].is_object()) {
      const auto& c = j["compare"];
      auto a = parsePlan(c.value("key", std::string()));
      if (!a) return a.status().withContext(origin + ": compare.key");
      auto b = parsePlan(c.value("value", std::string()));
      if (!b) return b.status().withContext(origin + ": compare.value");
      pinned = PinnedSetting{*a, *b, nullptr};
      comparedDump = c.value("dump", std::string());
    }
    std::optional<Mapping> mapping;
    if (j.contains("mapping") && j["mapping"].is_object()) {
      auto parsed = parseMapping(j["mapping"].dump(), origin + ": mapping");
      if (!parsed) return parsed.status();
      mapping = *parsed;
    }
    Setting s;
    s.key = *key;
    s.value = *value;
    s.linked = j.value("value_same_as_key", false);
    s.source.kind = SettingSource::Kind::Plans;
    if (j.contains("selection") && j["selection"].is_object()) {
      const auto& sel = j["selection"];
      selection_.layer = sel.value("layer", 0);
      selection_.kvHead = sel.value("kv_head", 0);
      selection_.queryHead = sel.value("query_head", 0);
      selection_.queryIndex = sel.value("query_index", -1);
      selection_.channel = sel.value("channel", 0);
      selection_.token = sel.value("token", 0);
    }
    if (!s.sameAs(setting_) || !(s.source == setting_.source)) edit(s, tr("load session"));
    if (!comparedDump.empty()) {
      // A on a dump of its own: pinned once that dump is read (or reported, moved or not fitting).
      restorePinned(std::nullopt);
      if (!QFileInfo::exists(q(comparedDump))) {
        emit errorReported(tr("session"), tr("%1: A's dump %2 was moved or deleted; A is not pinned")
                                              .arg(path, q(comparedDump)));
      } else {
        pinDumpAsA(q(comparedDump), std::make_pair(pinned->key, pinned->value));
      }
    } else {
      restorePinned(pinned);
    }
    path_ = path;
    if (j.contains("views") && j["views"].is_object()) views = j["views"];
    const std::string dumpPath = j.value("dump", std::string());
    if (!dumpPath.empty()) {
      if (!QFileInfo::exists(q(dumpPath))) {
        // The rest of the session still applies; say plainly what is missing.
        emit errorReported(tr("session"), tr("%1: the dump %2 was moved or deleted; specs and view settings were "
                                             "restored, open the dump from its new place")
                                              .arg(path, q(dumpPath)));
        return views;
      }
      pendingMessage_ = tr("(session %1)").arg(QFileInfo(path).fileName());
      openDump(q(dumpPath), mapping);
    }
  } catch (const nlohmann::json::exception& e) {
    return Status::invalidData(origin + ": " + jsonErrorText(e));
  }
  return views;
}

}  // namespace kvscope::ui
