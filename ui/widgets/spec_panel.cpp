// SPDX-License-Identifier: GPL-3.0-or-later
#include "ui/widgets/spec_panel.h"

#include <algorithm>

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFontMetrics>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QSignalBlocker>
#include <QSlider>
#include <QSpinBox>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>

#include "core/quant/format_table.h"
#include "core/engine/presets.h"

namespace kvscope::ui {

namespace {

// Percentile slider in steps of 0.001 from 0.800 to 1.000.
constexpr int kClipMin = 800, kClipMax = 1000;

// Group sizes are powers of two in practice (32, 64, 128): the arrows double and halve.
class PowerOfTwoSpinBox : public QSpinBox {
 public:
  using QSpinBox::QSpinBox;
  void stepBy(int steps) override {
    int v = value();
    for (; steps > 0; --steps) v = v <= 0 ? 1 : nextPowerOfTwo(v);
    for (; steps < 0; ++steps) v = v <= 1 ? 0 : previousPowerOfTwo(v);
    setValue(std::clamp(v, minimum(), maximum()));
  }

 private:
  static int nextPowerOfTwo(int v) {
    int p = 1;
    while (p <= v && p < (1 << 29)) p <<= 1;
    return p;
  }
  static int previousPowerOfTwo(int v) {
    int p = 1;
    while ((p << 1) < v) p <<= 1;
    return p;
  }
};

// Every error of a spec string, not only the parser's first: the format alone, then each
// option on that format, then the whole string (for errors between options).
QStringList specErrors(const std::string& text) {
  QStringList errors;
  const auto add = [&errors](const Status& s) {
    const QString m = QString::fromStdString(s.message());
    if (!m.isEmpty() && !errors.contains(m)) errors << m;
  };
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    parts.push_back(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (parts.empty()) return errors;
  auto base = parseSpec(parts.front());
  if (!base) {
    add(base.status());
    return errors;  // every option would repeat the format's error
  }
  for (size_t i = 1; i < parts.size(); ++i) {
    auto one = parseSpec(parts.front() + "," + parts[i]);
    if (!one) add(one.status());
  }
  if (errors.isEmpty()) {
    auto all = parseSpec(text);
    if (!all) add(all.status());
  }
  return errors;
}

QString formatItemText(const FormatInfo& f) {
  const QString name = QString::fromUtf8(f.name.data(), static_cast<qsizetype>(f.name.size()));
  return f.hasBits ? name + QStringLiteral("<b> (1–8 bits)") : name;
}

}  // namespace

SpecPanel::SpecPanel(bool isKey, QWidget* parent) : QWidget(parent), isKey_(isKey) {
  setObjectName(isKey ? QStringLiteral("keyPanel") : QStringLiteral("valuePanel"));
  auto* form = new QFormLayout;
  form->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);

  if (!isKey_) {
    link_ = new QCheckBox(tr("Same as key"), this);
    link_->setToolTip(tr("Quantize values with the key's setting (pre-RoPE excepted) and follow its changes."));
    form->addRow(link_);
    connect(link_, &QCheckBox::toggled, this, [this](bool on) {
      updateEnabled();
      emit linkToggled(on);
    });
  }

  format_ = new QComboBox(this);
  format_->setToolTip(tr("The number format the cache stores, as defined in quantization.md §2."));
  for (const FormatInfo& f : formatTable()) {
    format_->addItem(formatItemText(f), static_cast<int>(f.id));
    format_->setItemData(format_->count() - 1,
                         QString::fromUtf8(f.description.data(), static_cast<qsizetype>(f.description.size())),
                         Qt::ToolTipRole);
  }
  if (format_->count() == 0) {
    format_->addItem(tr("formats not available yet"));
    format_->setEnabled(false);
  }
  form->addRow(tr("Format"), format_);

  bits_ = new QSlider(Qt::Horizontal, this);
  bits_->setRange(1, 8);
  bits_->setPageStep(1);
  bits_->setTickPosition(QSlider::TicksBelow);
  bits_->setToolTip(tr("Payload bits of each integer code; fewer bits mean coarser levels."));
  bitsLabel_ = new QLabel(this);
  auto* bitsRow = new QHBoxLayout;
  bitsRow->addWidget(bits_, 1);
  bitsRow->addWidget(bitsLabel_);
  form->addRow(tr("Bits"), bitsRow);

  symmetric_ = new QCheckBox(tr("Symmetric (no zero point)"), this);
  symmetric_->setToolTip(tr("Use a max-abs scale around zero instead of a min/max range with a stored minimum."));
  form->addRow(QString(), symmetric_);

  axis_ = new QComboBox(this);
  for (Axis a : {Axis::Tensor, Axis::Head, Axis::Token, Axis::Channel}) {
    axis_->addItem(QString::fromUtf8(axisName(a)), static_cast<int>(a));
  }
  axis_->setToolTip(tr("Which values share one scale: the whole tensor, one head, one token or one channel."));
  form->addRow(tr("Granularity"), axis_);

  group_ = new PowerOfTwoSpinBox(this);
  group_->setRange(0, 1 << 20);
  group_->setSpecialValueText(tr("whole axis"));
  group_->setToolTip(tr("Split each token's channels (or each channel's tokens) into runs of this many values; 0 keeps one "
                        "run. The arrows step through powers of two; any size can be typed."));
  form->addRow(tr("Group size"), group_);

  clip_ = new QComboBox(this);
  clip_->addItem(tr("off"), static_cast<int>(Clip::Kind::None));
  clip_->addItem(tr("percentile"), static_cast<int>(Clip::Kind::Percentile));
  clip_->addItem(tr("MSE search"), static_cast<int>(Clip::Kind::Mse));
  clip_->setToolTip(tr("Shrink each group's range before quantizing: at a percentile of its values, or where the squared error is least."));
  clipP_ = new QSlider(Qt::Horizontal, this);
  clipP_->setRange(kClipMin, kClipMax);
  clipP_->setToolTip(tr("The fraction of each group's values that stays inside the clipped range."));
  clipLabel_ = new QLabel(this);
  clipLabel_->setMinimumWidth(QFontMetrics(clipLabel_->font()).horizontalAdvance(QStringLiteral("0.000")) + 4);
  clipP_->setMinimumWidth(140);
  form->addRow(tr("Clipping"), clip_);
  // The percentile slider gets a row of its own: beside the combo it was ~50 px wide.
  auto* clipRow = new QHBoxLayout;
  clipRow->addWidget(clipP_, 1);
  clipRow->addWidget(clipLabel_);
  form->addRow(tr("Percentile"), clipRow);

  outliers_ = new QDoubleSpinBox(this);
  outliers_->setDecimals(4);
  outliers_->setRange(0.0, 0.5);
  outliers_->setSingleStep(0.001);
  outliers_->setToolTip(tr("Fraction of each kv head's largest values kept exactly beside the quantized tensor (dense-and-sparse)."));
  form->addRow(tr("Outlier fraction"), outliers_);

  sinks_ = new QSpinBox(this);
  sinks_->setRange(0, 1 << 20);
  sinks_->setToolTip(tr("Keep this many first tokens (attention sinks) unquantized."));
  form->addRow(tr("Sink tokens"), sinks_);

  residual_ = new QSpinBox(this);
  residual_->setRange(0, 1 << 20);
  residual_->setToolTip(tr("Keep this many most recent tokens unquantized, as a residual window does."));
  form->addRow(tr("Residual tokens"), residual_);

  hadamard_ = new QCheckBox(tr("Rotation"), this);
  hadamard_->setToolTip(tr("Rotate each token vector before quantizing, spreading outliers over channels: the "
                           "normalized Hadamard matrix when the head dim is a power of two, otherwise a seeded "
                           "random orthogonal matrix. Type rot=hadamard:N, rot=rht or rot=random,seed=N in the "
                           "spec field for the other rotations."));
  form->addRow(QString(), hadamard_);

  prerope_ = new QCheckBox(tr("Pre-RoPE keys"), this);
  prerope_->setToolTip(tr("Quantize the keys before RoPE and re-apply RoPE to the reconstruction (needs key_pre_rope in the dump)."));
  if (isKey_) form->addRow(QString(), prerope_);
  else prerope_->hide();

  meta_ = new QComboBox(this);
  for (MetaType m : {MetaType::Fp16, MetaType::Bf16, MetaType::Fp32}) {
    meta_->addItem(QString::fromUtf8(metaTypeName(m)), static_cast<int>(m));
  }
  meta_->setToolTip(tr("The type scales and minimums are stored in; it rounds them and counts toward storage."));
  form->addRow(tr("Metadata type"), meta_);

  unitscale_ = new QCheckBox(tr("Unit scale (uncalibrated fp8)"), this);
  unitscale_->setToolTip(tr("Cast to fp8 with scale 1, as an engine without calibration does."));
  form->addRow(QString(), unitscale_);

  text_ = new QLineEdit(this);
  text_->setObjectName(QStringLiteral("specText"));
  text_->setToolTip(tr("The canonical spec string; edit it and press Enter to set the controls."));
  text_->setMinimumWidth(160);
  form->addRow(tr("Spec"), text_);
  message_ = new QLabel(this);
  message_->setWordWrap(true);
  message_->setStyleSheet(QStringLiteral("color: #c0392b;"));
  form->addRow(message_);
  storage_ = new QLabel(this);
  storage_->setWordWrap(true);
  storage_->setToolTip(tr("Storage under this setting for the open dump's shape (quantization.md §5)."));
  form->addRow(storage_);

  auto* outer = new QVBoxLayout(this);
  outer->setContentsMargins(4, 4, 4, 4);
  outer->addLayout(form);
  outer->addStretch(1);

  connect(format_, &QComboBox::currentIndexChanged, this, [this] { fromControls(true); });
  connect(bits_, &QSlider::valueChanged, this, [this] { fromControls(false); });
  connect(symmetric_, &QCheckBox::toggled, this, [this] { fromControls(false); });
  connect(axis_, &QComboBox::currentIndexChanged, this, [this] { fromControls(false); });
  connect(group_, &QSpinBox::valueChanged, this, [this] { fromControls(false); });
  connect(clip_, &QComboBox::currentIndexChanged, this, [this] { fromControls(false); });
  connect(clipP_, &QSlider::valueChanged, this, [this] { fromControls(false); });
  connect(outliers_, &QDoubleSpinBox::valueChanged, this, [this] { fromControls(false); });
  connect(sinks_, &QSpinBox::valueChanged, this, [this] { fromControls(false); });
  connect(residual_, &QSpinBox::valueChanged, this, [this] { fromControls(false); });
  connect(hadamard_, &QCheckBox::toggled, this, [this] { fromControls(false); });
  connect(prerope_, &QCheckBox::toggled, this, [this] { fromControls(false); });
  connect(meta_, &QComboBox::currentIndexChanged, this, [this] { fromControls(false); });
  connect(unitscale_, &QCheckBox::toggled, this, [this] { fromControls(false); });
  connect(text_, &QLineEdit::returnPressed, this, &SpecPanel::applyText);
  connect(text_, &QLineEdit::editingFinished, this, &SpecPanel::applyText);

  // Open on what llama.cpp users run: q8_0 keys and q4_0 values, stored as llama.cpp stores them.
  // The main window gives them llama.cpp's rotation once it knows the head dim.
  auto initial = parseSpec(isKey_ ? "q8_0" : "q4_0");
  spec_ = initial ? *initial : defaultSpec(FormatId::Int, 8);
  toControls();
}

bool SpecPanel::linkedToKey() const { return link_ && link_->isChecked(); }

void SpecPanel::setLinkedToKey(bool linked) {
  if (link_) link_->setChecked(linked);
}

void SpecPanel::setSpec(const QuantSpec& spec) {
  spec_ = spec;
  if (!isKey_) spec_.prerope = false;
  toControls();
}

void SpecPanel::setContext(const SpecContext& context) {
  context_ = context;
  context_.isKey = isKey_;
  updateEnabled();
  updateTextAndMessage();
}

void SpecPanel::setStorageText(const QString& text) { storage_->setText(text); }

void SpecPanel::fromControls(bool formatChanged) {
  if (updating_) return;
  QuantSpec s = spec_;
  if (formatChanged) {
    // A new format brings its own defaults for grouping and metadata (§3); the options that
    // are format-independent carry over.
    const auto id = static_cast<FormatId>(format_->currentData().toInt());
    const FormatInfo& next = formatInfo(id);
    s = defaultSpec(id, next.hasBits ? std::clamp(bits_->value(), next.minBits, next.maxBits) : 0);
    s.outliers = spec_.outliers;
    s.sinks = spec_.sinks;
    s.residual = spec_.residual;
    s.chunk = spec_.chunk;
    s.rotation = spec_.rotation;
    s.rotationBlock = spec_.rotationBlock;
    s.seed = spec_.seed;
    s.prerope = spec_.prerope;
  } else {
    const FormatInfo& info = formatInfo(s.format);
    if (info.hasBits) s.bits = bits_->value();
    s.symmetric = (info.options & kOptionSym) != 0 && symmetric_->isChecked();
    if (s.symmetric && s.bits < 2) s.bits = 2;  // int1 has no symmetric form (§2)
    s.axis = static_cast<Axis>(axis_->currentData().toInt());
    s.group = group_->value();
    s.clip.kind = static_cast<Clip::Kind>(clip_->currentData().toInt());
    s.clip.p = s.clip.kind == Clip::Kind::Percentile ? clipP_->value() / 1000.0 : 1.0;
    s.outliers = outliers_->value();
    s.sinks = sinks_->value();
    s.residual = residual_->value();
    if (!hadamard_->isChecked()) {
      s.rotation = Rotation::None;
      s.rotationBlock = 0;
      s.seed = 0;
    } else if (!rotates(s)) {
      const bool powerOfTwo = context_.headDim <= 0 || (context_.headDim & (context_.headDim - 1)) == 0;
      s.rotation = powerOfTwo ? Rotation::Hadamard : Rotation::Random;
    }
    s.prerope = isKey_ && prerope_->isChecked();
    s.scale = static_cast<MetaType>(meta_->currentData().toInt());
    s.unitscale = (info.options & kOptionUnitscale) != 0 && unitscale_->isChecked();
  }
  spec_ = s;
  toControls();
  emit specChanged(spec_);
}

void SpecPanel::toControls() {
  updating_ = true;
  const int formatIndex = format_->findData(static_cast<int>(spec_.format));
  if (formatIndex >= 0) format_->setCurrentIndex(formatIndex);
  const FormatInfo& shown = formatInfo(spec_.format);
  if (shown.hasBits) bits_->setRange(shown.minBits, shown.maxBits);  // tqp2 … tqp8, nuq2 … nuq8
  bits_->setValue(spec_.bits);
  bitsLabel_->setText(tr("%1 bit").arg(spec_.bits));
  symmetric_->setChecked(spec_.symmetric);
  axis_->setCurrentIndex(axis_->findData(static_cast<int>(spec_.axis)));
  group_->setValue(spec_.group);
  clip_->setCurrentIndex(clip_->findData(static_cast<int>(spec_.clip.kind)));
  clipP_->setValue(spec_.clip.kind == Clip::Kind::Percentile
                       ? static_cast<int>(std::lround(spec_.clip.p * 1000))
                       : kClipMax);
  clipLabel_->setText(spec_.clip.kind == Clip::Kind::Percentile ? QString::number(spec_.clip.p, 'f', 3)
                                                                : QString());
  outliers_->setValue(spec_.outliers);
  sinks_->setValue(spec_.sinks);
  residual_->setValue(spec_.residual);
  hadamard_->setChecked(rotates(spec_));
  // tq and tqp always rotate: without rot= they take the default for the head dim (§11).
  const Rotation shownRotation = context_.headDim > 0 ? effectiveRotation(spec_, context_.headDim) : spec_.rotation;
  hadamard_->setText(rotates(spec_) ? (shownRotation == Rotation::None ? tr("Rotation (default)")
                                                                        : tr("Rotation (%1)").arg(rotationName(shownRotation)))
                                    : tr("Rotation"));
  prerope_->setChecked(spec_.prerope);
  meta_->setCurrentIndex(meta_->findData(static_cast<int>(spec_.scale)));
  unitscale_->setChecked(spec_.unitscale);
  updating_ = false;
  updateEnabled();
  updateTextAndMessage();
}

void SpecPanel::updateEnabled() {
  const FormatInfo& info = formatInfo(spec_.format);
  const bool linked = linkedToKey();
  const bool grouped = info.grouped;
  const bool isNone = info.exact;  // `none`: nothing to quantize, so no pipeline options
  format_->setEnabled(!linked && format_->count() > 0 && !formatTable().empty());
  bits_->setEnabled(!linked && info.hasBits);
  symmetric_->setEnabled(!linked && (info.options & kOptionSym) != 0);
  axis_->setEnabled(!linked && grouped);
  group_->setEnabled(!linked && grouped && spec_.axis != Axis::Tensor && spec_.axis != Axis::Head);
  clip_->setEnabled(!linked && grouped);
  clipP_->setEnabled(!linked && grouped && spec_.clip.kind == Clip::Kind::Percentile);
  outliers_->setEnabled(!linked && !isNone);
  sinks_->setEnabled(!linked && !isNone);
  residual_->setEnabled(!linked && !isNone);
  hadamard_->setEnabled(!linked && !isNone && !info.alwaysRotates);  // tq, tqp always rotate
  prerope_->setEnabled(isKey_ && !isNone && context_.hasKeyPreRope);
  meta_->setEnabled(!linked && (info.options & kOptionMetaType) != 0 && !spec_.unitscale);  // tq: the norms' type
  unitscale_->setEnabled(!linked && (info.options & kOptionUnitscale) != 0);
  text_->setReadOnly(linked);
}

void SpecPanel::updateTextAndMessage() {
  const QString canonical = QString::fromStdString(toString(spec_));
  if (!text_->hasFocus() || !text_->isModified()) {
    text_->setText(canonical);
    text_->setModified(false);
    // Show the spec from its start (setText leaves the cursor, and the view, at the end).
    text_->setCursorPosition(0);
  }
  text_->setToolTip(tr("In force: %1\nEdit the canonical spec string and press Enter to set the controls.").arg(canonical));
  const Status status = validateSpec(spec_, context_);
  valid_ = status.isOk();
  message_->setText(valid_ ? QString() : QString::fromStdString(status.message()));
}

QString SpecPanel::rejectionText(const QString& typed) const {
  QStringList lines = specErrors(typed.toStdString());
  if (lines.isEmpty()) lines << tr("not a spec");
  // A preset name is not a spec: point at the presets that match what was typed.
  QStringList presets;
  const QString lower = typed.trimmed().toLower();
  for (const Preset& p : presetTable()) {
    const QString name = QString::fromUtf8(p.name.data(), static_cast<qsizetype>(p.name.size()));
    if (!lower.isEmpty() && (name.startsWith(lower) || lower.startsWith(name) || name.contains(lower))) presets << name;
  }
  QString text = lines.join(QLatin1Char('\n'));
  if (!presets.isEmpty()) {
    text += tr("\n“%1” looks like a preset: %2 (Presets menu; a preset sets both K and V).")
                .arg(typed.trimmed(), presets.join(QStringLiteral(", ")));
  }
  text += tr("\nStill in force: %1").arg(QString::fromStdString(toString(spec_)));
  return text;
}

void SpecPanel::applyText() {
  if (!text_->isModified() || text_->isReadOnly()) return;
  text_->setModified(false);
  const std::string text = text_->text().trimmed().toStdString();
  if (text.find(';') != std::string::npos) {
    // A plan (quantization.md §12): its overrides go to the plan editor.
    auto plan = parsePlan(text);
    if (!plan) {
      // Nothing is applied: the spec (and plan) in force stay valid.
      message_->setText(QString::fromStdString(plan.status().message()) + tr("\nThe plan in force is unchanged."));
      return;
    }
    emit planEntered(*plan);
    return;
  }
  auto parsed = parseSpec(text);
  if (!parsed) {
    // The previous spec stays applied (and valid); the message says so.
    message_->setText(rejectionText(QString::fromStdString(text)));
    return;
  }
  QuantSpec s = *parsed;
  if (!isKey_ && s.prerope) {
    message_->setText(tr("prerope applies to keys only") + tr("\nStill in force: %1").arg(QString::fromStdString(toString(spec_))));
    return;
  }
  spec_ = s;
  toControls();
  emit specChanged(spec_);
}

}  // namespace kvscope::ui
