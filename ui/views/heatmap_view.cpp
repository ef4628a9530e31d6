// SPDX-License-Identifier: GPL-3.0-or-later
#include "ui/views/heatmap_view.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QFileInfo>
#include <QLabel>
#include <QKeyEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QRubberBand>
#include <QSignalBlocker>
#include <QStandardItemModel>
#include <QWheelEvent>
#include <QToolTip>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "core/metrics/outliers.h"
#include "core/inspect/view_compare.h"
#include "ui/state/session.h"
#include "ui/views/colour_map.h"
#include "ui/export/chart_ticks.h"

namespace kvscope::ui {

namespace {

// Figure layout, in pixels of the target.
constexpr double kLeft = 56, kTop = 30, kBottom = 40, kSideBar = 70, kGap = 10, kColourBar = 14,
                 kColourLabels = 72;

QString valueLabel(HeatmapValue v) {
  switch (v) {
    case HeatmapValue::Magnitude: return QStringLiteral("|x|");
    case HeatmapValue::Normalized: return QStringLiteral("|x| / σ(channel)");
    case HeatmapValue::Error: return QStringLiteral("|x′ − x|");
  }
  return {};
}

const QString kDifferenceLabel = QStringLiteral("|x′B − x| − |x′A − x|");

QString formatNumber(double v) { return QString::number(v, 'g', 4); }
QString formatTick(double v) { return QString::number(v, 'g', 3); }

// [lo, hi) of a window over n units, or all of them when the window is empty.
std::pair<int, int> windowOf(double lo, double hi, int n) {
  if (n <= 0) return {0, 0};
  if (!(hi > lo)) return {0, n};
  const int a = std::clamp(static_cast<int>(std::floor(lo + 1e-9)), 0, n - 1);
  const int b = std::clamp(static_cast<int>(std::ceil(hi - 1e-9)), a + 1, n);
  return {a, b};
}

// Keeps a window inside [0, n) with at least one unit; a window over everything becomes empty.
void clampRange(double& lo, double& hi, int n) {
  if (!(hi > lo) || n <= 0) {
    lo = hi = 0;
    return;
  }
  const double span = std::clamp(hi - lo, 1.0, static_cast<double>(n));
  lo = std::clamp(lo, 0.0, n - span);
  hi = lo + span;
  if (span >= n - 1e-9) lo = hi = 0;
}

}  // namespace

HeatmapCanvas::HeatmapCanvas(QWidget* parent) : QWidget(parent) {
  setMouseTracking(true);
  setMinimumSize(360, 220);
  setFocusPolicy(Qt::ClickFocus);  // Esc resets the zoom, as on the charts
  // No setToolTip here: a static tooltip would replace the per-cell readout that mouseMoveEvent
  // shows once the mouse rests on a cell. The hint lives on the view's controls instead.
}

void HeatmapCanvas::setSource(LayerQuantPtr layer, int kvHead, ViewTensor tensor,
                              HeatmapValue value, bool logScale, QStringList tokenText) {
  layer_ = std::move(layer);
  kvHead_ = kvHead;
  tensor_ = tensor;
  value_ = value;
  logScale_ = logScale;
  tokenText_ = std::move(tokenText);
  const Tensor3* previous = source_;
  const int64_t previousTokens = previous ? previous->tokens : -1, previousDim = previous ? previous->dim : -1;
  source_ = layer_ ? layer_->original(tensor_) : nullptr;
  sourceHead_ = layer_ ? layer_->originalHead(kvHead_) : -1;
  if (sourceHead_ < 0) source_ = nullptr;  // a partial read of another head: nothing to show
  builtColumns_ = -1;
  windowColumns_ = -1;
  shown_ = &data_;
  // A new result of the same shape (a spec change, another head) keeps the zoom; another shape resets it.
  if (!source_ || source_->tokens != previousTokens || source_->dim != previousDim) {
    tokenLo_ = tokenHi_ = channelLo_ = channelHi_ = 0;
  }
  if (source_) {
    const ViewRequest& r = layer_->request;
    if (r.kvHead == kvHead_ && r.heatmapColumns > 0 && r.heatmapTensor == tensorKindOf(tensor_) &&
        r.heatmapValue == value_ && layer_->heatmap.columns > 0) {
      // Binned by the layer worker: only the image is left, built when painted.
      data_ = layer_->heatmap;
      builtColumns_ = r.heatmapColumns;
      imagePending_ = true;
    }
  }
  update();
}

void HeatmapCanvas::setComparison(LayerQuantPtr a, bool difference) {
  compare_ = std::move(a);
  difference_ = difference;
  builtColumns_ = -1;
  windowColumns_ = -1;
  update();
}

const Tensor3* HeatmapCanvas::compareHat(int64_t* head) const {
  if (!compare_ || !layer_ || compare_->tensors != layer_->tensors) return nullptr;  // A of this very layer read
  *head = compare_->hatHead(kvHead_);
  const Tensor3* hat = compare_->reconstruction(tensor_);
  return *head >= 0 ? hat : nullptr;
}

int HeatmapCanvas::plotColumns() const {
  const double right = kGap + kSideBar + kGap + kColourBar + kColourLabels;
  return std::max(1, static_cast<int>(std::floor(std::max(10.0, width() - kLeft - right))));
}

const Tensor3* HeatmapCanvas::sourceTensor() const { return source_; }

QString HeatmapCanvas::title() const {
  if (!layer_) return tr("Outlier heat map");
  return tr("%1 · layer %2 · kv head %3 · %4")
      .arg(QString::fromUtf8(viewTensorLabel(tensor_)))
      .arg(layer_->tensors->layer)
      .arg(kvHead_)
      .arg(difference_ ? kDifferenceLabel + tr(" (B − A)") : valueLabel(value_));
}

void HeatmapCanvas::rebuild(int columns) {
  if (!source_) return;
  if (columns == builtColumns_) {
    if (imagePending_) {
      imagePending_ = false;
      buildImage(data_, image_);
    }
    return;
  }
  const int64_t hatHead = layer_->hatHead(kvHead_);
  if (difference_) {
    int64_t aHead = -1;
    const Tensor3* aHat = compareHat(&aHead);
    const Tensor3* bHat = layer_->reconstruction(tensor_);
    if (aHat && bHat && hatHead >= 0) {
      computeErrorDifferenceInto(*source_, sourceHead_, *aHat, aHead, *bHat, hatHead, columns, data_);
    } else {
      data_ = {};
    }
  } else {
    computeHeatmapInto(*source_, sourceHead_, hatHead >= 0 ? layer_->reconstruction(tensor_) : nullptr, hatHead, value_,
                       columns, data_);
  }
  builtColumns_ = columns;
  imagePending_ = false;
  buildImage(data_, image_);
}

void HeatmapCanvas::buildImage(const HeatmapData& data, QImage& image) const {
  image = QImage(data.columns, data.channels, QImage::Format_RGB32);
  // The colour scale is the whole head's (data_), also for a zoomed window: a colour means the
  // same value however far one zooms.
  const double hi = data_.maxValue;
  const double lo = data_.minPositive > 0 && data.minPositive > 0 ? std::min(data_.minPositive, data.minPositive)
                                                                  : data_.minPositive;
  const double logSpan = (hi > 0 && lo > 0 && hi > lo) ? std::log(hi / lo) : 0.0;
  for (int c = 0; c < data.channels; ++c) {
    auto* line = reinterpret_cast<QRgb*>(image.scanLine(c));
    for (int b = 0; b < data.columns; ++b) {
      const double v = data.cell(c, b);
      double t = 0;
      if (difference_) {
        line[b] = divergingColourAt(hi > 0 ? v / hi : 0.0);  // centred at 0, ±max |d| at the ends
        continue;
      }
      if (logScale_) {
        t = (v > 0 && logSpan > 0) ? std::log(v / lo) / logSpan : (v > 0 ? 1.0 : 0.0);
      } else {
        t = hi > 0 ? v / hi : 0.0;
      }
      line[b] = colourAt(std::clamp(t, 0.0, 1.0));
    }
  }
}

const HeatmapData& HeatmapCanvas::shownData(int columns) {
  rebuild(columns);  // the whole head: the colour scale, and what an unzoomed view shows
  const auto [lo, hi] = visibleTokens();
  if (!source_ || (lo == 0 && hi == static_cast<int>(source_->tokens))) return data_;
  const int n = hi - lo;
  const int cols = std::clamp(columns, 1, n);
  if (windowColumns_ == cols && windowLo_ == lo && windowHi_ == hi) return window_;
  // Bin only the window's tokens: a slice of the head (and of x′ for the error), binned as the
  // whole head is. |x|/σ keeps the whole head's σ: the same scale per channel as unzoomed.
  const int64_t dim = source_->dim;
  Tensor3 slice(1, n, dim);
  std::copy_n(source_->row(sourceHead_, lo), static_cast<size_t>(n * dim), slice.data.data());
  Tensor3 hatSlice;
  const int64_t hatHead = layer_->hatHead(kvHead_);
  const Tensor3* hat = hatHead >= 0 ? layer_->reconstruction(tensor_) : nullptr;
  if (value_ == HeatmapValue::Error && hat && hat->tokens == source_->tokens && hat->dim == dim) {
    hatSlice = Tensor3(1, n, dim);
    std::copy_n(hat->row(hatHead, lo), static_cast<size_t>(n * dim), hatSlice.data.data());
  }
  const HeatmapValue value = value_ == HeatmapValue::Normalized ? HeatmapValue::Magnitude : value_;
  if (difference_) {
    // A/B: the change of |error| over the window's tokens, from slices of both reconstructions.
    int64_t aHead = -1;
    const Tensor3* aHat = compareHat(&aHead);
    if (aHat && hat && hat->tokens == source_->tokens && aHat->tokens == source_->tokens) {
      Tensor3 aSlice(1, n, dim), bSlice(1, n, dim);
      std::copy_n(aHat->row(aHead, lo), static_cast<size_t>(n * dim), aSlice.data.data());
      std::copy_n(hat->row(hatHead, lo), static_cast<size_t>(n * dim), bSlice.data.data());
      computeErrorDifferenceInto(slice, 0, aSlice, 0, bSlice, 0, cols, window_);
    } else {
      window_ = {};
    }
  } else {
    computeHeatmapInto(slice, 0, hatSlice.data.empty() ? nullptr : &hatSlice, 0, value, cols, window_);
  }
  if (!difference_ && value_ == HeatmapValue::Normalized && window_.columns > 0) {
    // σ per channel over all tokens of the head, as core's Normalized (core/inspect/view_data.cpp).
    std::vector<double> sum(static_cast<size_t>(dim), 0.0), sum2(static_cast<size_t>(dim), 0.0);
    for (int64_t t = 0; t < source_->tokens; ++t) {
      const float* r = source_->row(sourceHead_, t);
      for (int64_t c = 0; c < dim; ++c) {
        sum[static_cast<size_t>(c)] += r[c];
        sum2[static_cast<size_t>(c)] += static_cast<double>(r[c]) * r[c];
      }
    }
    const double count = static_cast<double>(source_->tokens);
    window_.maxValue = 0;
    float minPositive = std::numeric_limits<float>::infinity();
    for (int c = 0; c < window_.channels; ++c) {
      const double mean = sum[static_cast<size_t>(c)] / count;
      const double var = std::max(0.0, sum2[static_cast<size_t>(c)] / count - mean * mean);
      const double inverse = var > 0 ? 1.0 / std::sqrt(var) : 0.0;
      float& channelMax = window_.channelMax[static_cast<size_t>(c)];
      channelMax = 0;
      for (int b = 0; b < window_.columns; ++b) {
        float& cell = window_.cells[static_cast<size_t>(c) * static_cast<size_t>(window_.columns) + static_cast<size_t>(b)];
        cell = static_cast<float>(cell * inverse);
        channelMax = std::max(channelMax, cell);
        if (cell > 0) minPositive = std::min(minPositive, cell);
      }
      window_.maxValue = std::max(window_.maxValue, channelMax);
    }
    window_.minPositive = std::isfinite(minPositive) ? minPositive : 0.0f;
  }
  for (int& t : window_.cellToken) t += lo;  // tokens of the dump, not of the slice
  windowColumns_ = cols;
  windowLo_ = lo;
  windowHi_ = hi;
  buildImage(window_, windowImage_);
  return window_;
}

std::pair<int, int> HeatmapCanvas::visibleTokens() const {
  return windowOf(tokenLo_, tokenHi_, source_ ? static_cast<int>(source_->tokens) : 0);
}

std::pair<int, int> HeatmapCanvas::visibleChannels() const {
  return windowOf(channelLo_, channelHi_, source_ ? static_cast<int>(source_->dim) : 0);
}

bool HeatmapCanvas::zoomed() const { return tokenHi_ > tokenLo_ || channelHi_ > channelLo_; }

void HeatmapCanvas::clampWindow() {
  if (!source_) return;
  clampRange(tokenLo_, tokenHi_, static_cast<int>(source_->tokens));
  clampRange(channelLo_, channelHi_, static_cast<int>(source_->dim));
  update();
}

void HeatmapCanvas::zoomAt(const QPointF& pos, double factor, bool tokens, bool channels) {
  if (!source_ || !plotRect_.contains(pos) || factor <= 0) return;
  const auto zoom = [factor](double& lo, double& hi, int n, double f) {
    const double l = hi > lo ? lo : 0, h = hi > lo ? hi : n;
    const double centre = l + f * (h - l), span = std::max(1.0, (h - l) / factor);
    lo = centre - f * span;
    hi = lo + span;
  };
  if (tokens) {
    zoom(tokenLo_, tokenHi_, static_cast<int>(source_->tokens), (pos.x() - plotRect_.left()) / plotRect_.width());
  }
  if (channels) {
    zoom(channelLo_, channelHi_, static_cast<int>(source_->dim), (pos.y() - plotRect_.top()) / plotRect_.height());
  }
  clampWindow();
}

void HeatmapCanvas::zoomToRect(const QPointF& a, const QPointF& b) {
  if (!source_) return;
  const QRectF r = QRectF(a, b).normalized() & plotRect_;
  if (r.width() < 2 || r.height() < 2) return;
  const auto [t0, t1] = visibleTokens();
  const auto [c0, c1] = visibleChannels();
  const double fx0 = (r.left() - plotRect_.left()) / plotRect_.width();
  const double fx1 = (r.right() - plotRect_.left()) / plotRect_.width();
  const double fy0 = (r.top() - plotRect_.top()) / plotRect_.height();
  const double fy1 = (r.bottom() - plotRect_.top()) / plotRect_.height();
  tokenLo_ = t0 + fx0 * (t1 - t0);
  tokenHi_ = t0 + fx1 * (t1 - t0);
  channelLo_ = c0 + fy0 * (c1 - c0);
  channelHi_ = c0 + fy1 * (c1 - c0);
  clampWindow();
}

void HeatmapCanvas::panBy(const QPointF& pixels) {
  if (!source_ || plotRect_.width() <= 0 || plotRect_.height() <= 0) return;
  // Dragging right shows what was left of the window; dragging down shows the channels above.
  if (tokenHi_ > tokenLo_) {
    const double shift = -pixels.x() / plotRect_.width() * (tokenHi_ - tokenLo_);
    tokenLo_ += shift;
    tokenHi_ += shift;
  }
  if (channelHi_ > channelLo_) {
    const double shift = -pixels.y() / plotRect_.height() * (channelHi_ - channelLo_);
    channelLo_ += shift;
    channelHi_ += shift;
  }
  clampWindow();
}

void HeatmapCanvas::resetZoom() {
  tokenLo_ = tokenHi_ = channelLo_ = channelHi_ = 0;
  update();
}

void HeatmapCanvas::paintFigure(QPainter& painter, const QRectF& target) {
  painter.save();
  const QPalette pal = palette();
  painter.fillRect(target, pal.color(QPalette::Base));
  painter.setPen(pal.color(QPalette::Text));
  QFont font = painter.font();
  painter.setFont(font);
  const QFontMetricsF fm(font);

  const QRectF titleRect(target.left(), target.top(), target.width(), kTop);
  QFont bold = font;
  bold.setBold(true);
  painter.setFont(bold);
  painter.drawText(titleRect, Qt::AlignCenter, title());
  painter.setFont(font);

  if (!source_) {
    painter.drawText(target, Qt::AlignCenter,
                     layer_ ? tr("This dump has no %1.").arg(QString::fromUtf8(viewTensorLabel(tensor_)))
                            : tr("No data yet: open a dump."));
    painter.restore();
    return;
  }
  const double right = kGap + kSideBar + kGap + kColourBar + kColourLabels;
  const QRectF plot(target.left() + kLeft, target.top() + kTop,
                    std::max(10.0, target.width() - kLeft - right),
                    std::max(10.0, target.height() - kTop - kBottom));
  const HeatmapData& shown = shownData(std::max(1, static_cast<int>(std::floor(plot.width()))));
  shown_ = &shown;
  plotRect_ = plot;
  const auto [t0, t1] = visibleTokens();
  const auto [c0, c1] = visibleChannels();
  const int nTokens = std::max(1, t1 - t0), nChannels = std::max(1, c1 - c0);
  if (difference_ && data_.columns == 0) {
    painter.drawRect(plot);
    painter.drawText(plot, Qt::AlignCenter, tr("Computing setting A for this layer and head…"));
    painter.restore();
    return;
  }

  painter.setRenderHint(QPainter::SmoothPixmapTransform, false);
  const QImage& image = &shown == &data_ ? image_ : windowImage_;
  painter.drawImage(plot, image, QRectF(0, c0, image.width(), nChannels));
  painter.drawRect(plot);

  // Axes: channels down the left, tokens along the bottom.
  // Round steps on every axis (ui/export/chart_ticks.h), as on the charts.
  const int channelStep = std::max(
      1, static_cast<int>(niceTickInterval(nChannels, std::max(1, static_cast<int>(plot.height() / (fm.height() * 1.6))))));
  for (int c = (c0 + channelStep - 1) / channelStep * channelStep; c < c1; c += channelStep) {
    const double y = plot.top() + (c - c0 + 0.5) * plot.height() / nChannels;
    painter.drawText(QRectF(target.left(), y - fm.height() / 2, kLeft - 6, fm.height()),
                     Qt::AlignRight | Qt::AlignVCenter, QString::number(c));
  }
  painter.save();
  painter.translate(target.left() + 10, plot.center().y());
  painter.rotate(-90);
  painter.drawText(QRectF(-60, -fm.height() / 2, 120, fm.height()), Qt::AlignCenter, tr("channel"));
  painter.restore();
  double tokenStep =
      std::max(1.0, niceTickInterval(std::max(1, nTokens - 1), std::max(2, static_cast<int>(plot.width() / 90))));
  if (tokenStep < 10 && tokenStep != std::floor(tokenStep)) tokenStep = 2;  // tokens are whole: 2.5 → 2
  for (double t = std::ceil(t0 / tokenStep - 1e-9) * tokenStep; t <= t1 - 1 + 1e-9; t += tokenStep) {
    const int token = static_cast<int>(std::lround(t));
    const double x = plot.left() + (token - t0 + 0.5) * plot.width() / nTokens;
    painter.drawLine(QPointF(x, plot.bottom()), QPointF(x, plot.bottom() + 4));
    painter.drawText(QRectF(x - 40, plot.bottom() + 4, 80, fm.height()), Qt::AlignHCenter | Qt::AlignTop,
                     QString::number(token));
  }
  QString tokenAxis = tr("token");
  if (zoomed()) {
    tokenAxis += tr("  (tokens %1–%2, channels %3–%4 of %5 × %6)")
                     .arg(t0).arg(t1 - 1).arg(c0).arg(c1 - 1).arg(data_.tokens).arg(data_.channels);
  }
  if (shown.columns < shown.tokens) {
    const QString binned = tr("  (%1 tokens in %2 columns, max per column)").arg(shown.tokens).arg(shown.columns);
    // A narrow figure (a paper's column) gets the short form.
    tokenAxis += fm.horizontalAdvance(tokenAxis + binned) <= plot.width() ? binned : tr(" (max per column)");
  }
  painter.drawText(QRectF(plot.left(), plot.bottom() + 4 + fm.height(), plot.width(), fm.height() + 2),
                   Qt::AlignCenter, tokenAxis);

  // Side bars: per-channel maximum, aligned with the heat map rows.
  const QRectF side(plot.right() + kGap, plot.top(), kSideBar, plot.height());
  painter.drawRect(side);
  const double barMax = data_.maxValue > 0 ? data_.maxValue : 1.0;
  painter.setPen(Qt::NoPen);
  painter.setBrush(pal.color(QPalette::Highlight));
  for (int c = c0; c < c1 && c < shown.channels; ++c) {
    // The maximum over the shown tokens, on the whole head's scale.
    const double y0 = side.top() + (c - c0) * side.height() / nChannels;
    const double h = std::max(1.0, side.height() / nChannels);
    const double w = side.width() * std::min(1.0, shown.channelMax[static_cast<size_t>(c)] / barMax);
    painter.drawRect(QRectF(side.left(), y0, w, h));
  }
  painter.setPen(pal.color(QPalette::Text));
  painter.setBrush(Qt::NoBrush);
  painter.drawText(QRectF(side.left() - 10, plot.bottom() + 4, side.width() + 20, fm.height()),
                   Qt::AlignHCenter | Qt::AlignTop, tr("max"));

  // Colour bar with ticks in the value's units.
  const QRectF bar(side.right() + kGap, plot.top(), kColourBar, plot.height());
  QImage ramp(1, 256, QImage::Format_RGB32);
  for (int i = 0; i < 256; ++i) {
    ramp.setPixel(0, 255 - i, difference_ ? divergingColourAt(i / 127.5 - 1.0) : colourAt(i / 255.0));
  }
  painter.drawImage(bar, ramp);
  painter.drawRect(bar);
  const double hi = data_.maxValue;
  // The change in error runs from −max to +max, 0 (white) in the middle, always linear.
  const double lo = difference_ ? -hi : logScale_ ? data_.minPositive : 0.0;
  // Ticks at round values inside the scale: multiples of a nice step, or decades on a log scale.
  std::vector<std::pair<double, double>> ticks;  // (fraction up the bar, value)
  if (!difference_ && logScale_ && lo > 0 && hi > lo) {
    for (double d = std::pow(10.0, std::ceil(std::log10(lo) - 1e-9)); d <= hi * (1 + 1e-9); d *= 10) {
      ticks.emplace_back(std::log(d / lo) / std::log(hi / lo), d);
    }
  } else if (hi > lo) {
    const double step = niceTickInterval(hi - lo, 5);
    for (double v = std::ceil(lo / step - 1e-9) * step; v <= hi * (1 + 1e-9); v += step) {
      ticks.emplace_back((v - lo) / (hi - lo), v);
    }
  }
  for (const auto& [f, v] : ticks) {
    const double y = bar.bottom() - f * bar.height();
    painter.drawLine(QPointF(bar.right(), y), QPointF(bar.right() + 3, y));
    painter.drawText(QRectF(bar.right() + 5, y - fm.height() / 2, kColourLabels - 5, fm.height()),
                     Qt::AlignLeft | Qt::AlignVCenter, formatTick(v));
  }
  painter.restore();
}

void HeatmapCanvas::paintEvent(QPaintEvent*) {
  QPainter painter(this);
  paintFigure(painter, QRectF(rect()));
}

bool HeatmapCanvas::cellAt(const QPointF& pos, int* channel, int* column) const {
  const HeatmapData& d = *shown_;
  if (!source_ || d.columns == 0 || !plotRect_.contains(pos)) return false;
  const auto [c0, c1] = visibleChannels();
  *column = std::clamp(static_cast<int>((pos.x() - plotRect_.left()) / plotRect_.width() * d.columns), 0,
                       d.columns - 1);
  *channel = std::clamp(c0 + static_cast<int>((pos.y() - plotRect_.top()) / plotRect_.height() * (c1 - c0)), 0,
                        d.channels - 1);
  return true;
}

QString HeatmapCanvas::describeAt(const QPointF& pos) const {
  int channel = 0, column = 0;
  if (!cellAt(pos, &channel, &column)) return {};
  const HeatmapData& d = *shown_;
  const int offset = shown_ == &window_ ? windowLo_ : 0;  // the window's bins count from its first token
  const size_t i = static_cast<size_t>(channel) * static_cast<size_t>(d.columns) + static_cast<size_t>(column);
  const int token = d.cellToken[i];
  QString text = tr("token %1").arg(token);
  if (token < tokenText_.size()) text += QStringLiteral(" \u201c%1\u201d").arg(tokenText_[token]);
  if (d.binStart(column + 1) - d.binStart(column) > 1) {
    text += tr(" (max of tokens %1–%2)").arg(offset + d.binStart(column)).arg(offset + d.binStart(column + 1) - 1);
  }
  text += tr("\nchannel %1\n%2 = %3")
              .arg(channel)
              .arg(difference_ ? kDifferenceLabel : valueLabel(value_))
              .arg(formatNumber(d.cells[i]));
  text += tr("\nx = %1").arg(formatNumber(source_->at(sourceHead_, token, channel)));
  const int64_t hatHead = layer_->hatHead(kvHead_);
  if (const Tensor3* hat = layer_->reconstruction(tensor_); hat && hatHead >= 0) {
    text += (difference_ ? tr(", x′B = %1") : tr(", x′ = %1")).arg(formatNumber(hat->at(hatHead, token, channel)));
  }
  int64_t aHead = -1;
  if (const Tensor3* aHat = compareHat(&aHead); aHat && difference_) {
    text += tr(", x′A = %1").arg(formatNumber(aHat->at(aHead, token, channel)));
  }
  return text;
}

void HeatmapCanvas::updateReadout(const QPointF& pos, const QPoint& globalPos) {
  readout_ = describeAt(pos);
  if (readout_.isEmpty()) {
    QToolTip::hideText();
  } else {
    QToolTip::showText(globalPos,
                       readout_ + QStringLiteral("\n\n") +
                           tr("wheel: zoom tokens (Shift: channels, Ctrl: both) · drag: box zoom · right drag: pan · "
                              "double-click: reset\nclick: select for the histogram"),
                       this);
  }
}

void HeatmapCanvas::mouseMoveEvent(QMouseEvent* event) {
  const QPointF pos = event->position();
  if (drag_ != PointerDrag::None && (pos - pressPos_).manhattanLength() > kClickSlop) moved_ = true;
  if (drag_ == PointerDrag::Pan && moved_) {
    panBy(pos - lastPos_);
  } else if (drag_ == PointerDrag::Band && moved_) {
    if (!band_) band_ = new QRubberBand(QRubberBand::Rectangle, this);
    band_->setGeometry(QRectF(pressPos_, pos).normalized().toRect());
    band_->show();
  }
  lastPos_ = pos;
  updateReadout(pos, event->globalPosition().toPoint());
}

void HeatmapCanvas::mousePressEvent(QMouseEvent* event) {
  pressPos_ = lastPos_ = event->position();
  moved_ = false;
  drag_ = pointerDragFor(*event);
  if (drag_ == PointerDrag::Pan) setCursor(Qt::ClosedHandCursor);
  event->accept();
}

void HeatmapCanvas::mouseReleaseEvent(QMouseEvent* event) {
  const QPointF pos = event->position();
  if (drag_ == PointerDrag::Band) {
    if (band_) band_->hide();
    int channel = 0, column = 0;
    if (moved_) {
      zoomToRect(pressPos_, pos);
    } else if (cellAt(pos, &channel, &column)) {
      const HeatmapData& d = *shown_;
      emit cellClicked(channel, d.cellToken[static_cast<size_t>(channel) * static_cast<size_t>(d.columns) +
                                            static_cast<size_t>(column)]);
    }
  }
  if (drag_ == PointerDrag::Pan) unsetCursor();
  drag_ = PointerDrag::None;
  event->accept();
}

void HeatmapCanvas::mouseDoubleClickEvent(QMouseEvent* event) {
  resetZoom();
  event->accept();
}

void HeatmapCanvas::wheelEvent(QWheelEvent* event) {
  const double steps = event->angleDelta().y() / 120.0;
  if (steps == 0) return;
  const Qt::KeyboardModifiers m = event->modifiers();
  const bool channelsOnly = m & Qt::ShiftModifier, both = m & Qt::ControlModifier;
  zoomAt(event->position(), std::pow(1.25, steps), !channelsOnly || both, channelsOnly || both);
  event->accept();
}

void HeatmapCanvas::keyPressEvent(QKeyEvent* event) {
  if (event->key() == Qt::Key_Escape && zoomed()) {
    resetZoom();
    event->accept();
    return;
  }
  QWidget::keyPressEvent(event);
}

void HeatmapCanvas::leaveEvent(QEvent* event) {
  readout_.clear();
  QToolTip::hideText();
  QWidget::leaveEvent(event);
}

HeatmapView::HeatmapView(QWidget* parent) : QWidget(parent) {
  canvas_ = new HeatmapCanvas(this);
  tensor_ = new QComboBox(this);
  addNamedItem(tensor_, QStringLiteral("key"), tr("K"), static_cast<int>(ViewTensor::Key));
  addNamedItem(tensor_, QStringLiteral("key_prerope"), tr("pre-RoPE K"), static_cast<int>(ViewTensor::KeyPreRope));
  addNamedItem(tensor_, QStringLiteral("value"), tr("V"), static_cast<int>(ViewTensor::Value));
  tensor_->setToolTip(tr("Which tensor of the layer to show: keys after RoPE, keys before RoPE, or values."));
  value_ = new QComboBox(this);
  addNamedItem(value_, QStringLiteral("magnitude"), tr("|x|"), static_cast<int>(HeatmapValue::Magnitude));
  addNamedItem(value_, QStringLiteral("normalized"), tr("|x| / σ per channel"), static_cast<int>(HeatmapValue::Normalized));
  addNamedItem(value_, QStringLiteral("error"), tr("error |x′ − x|"), static_cast<int>(HeatmapValue::Error));
  addNamedItem(value_, QStringLiteral("error_change"), tr("error change B − A"), static_cast<int>(HeatmapValue::Error));
  if (auto* model = qobject_cast<QStandardItemModel*>(value_->model())) {
    if (QStandardItem* item = model->item(kDifferenceIndex)) {
      item->setEnabled(false);  // until a setting is pinned as A
      item->setToolTip(tr("A/B comparison: |x′B − x| − |x′A − x| per cell, red where B's error is larger, blue where "
                          "it is smaller (each cell: the token of its column with the largest change)."));
    }
  }
  value_->setToolTip(tr("Colour by magnitude, by magnitude relative to the channel's spread, or by the reconstruction "
                        "error (x′ is the value after quantizing and dequantizing)."));
  scale_ = new QComboBox(this);
  addNamedItem(scale_, QStringLiteral("linear"), tr("linear"));
  addNamedItem(scale_, QStringLiteral("log"), tr("log"));
  scale_->setToolTip(tr("Linear or logarithmic colour scale; log reveals structure below the largest outliers."));

  auto* controls = new QHBoxLayout;
  controls->addWidget(new QLabel(tr("Tensor"), this));
  controls->addWidget(tensor_);
  controls->addWidget(new QLabel(tr("Colour by"), this));
  controls->addWidget(value_);
  controls->addWidget(new QLabel(tr("Scale"), this));
  controls->addWidget(scale_);
  // The hint wraps: on one line it made the heat map the widest page and squeezed the docks.
  auto* hint = new QLabel(this);
  hint->setObjectName(QStringLiteral("heatmapHint"));
  hint->setWordWrap(true);
  hint->setText(tr("Hover a cell for its token, channel, x and x′; click it to select them for the histogram.") +
                tr(" Wheel or drag a box to zoom, right drag to pan, double-click or Esc to reset."));
  controls->addWidget(hint, 1);
  profile_ = new QLabel(this);
  profile_->setWordWrap(true);
  profile_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  profile_->setToolTip(tr("Outlier channels (max |x| over the median channel's, above 6), how often each is among a "
                          "token's top 1% of channels, the tokens with the largest norms, and the kurtosis."));
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  layout->addLayout(controls);
  layout->addWidget(canvas_, 1);
  layout->addWidget(profile_);

  for (QComboBox* box : {tensor_, value_, scale_}) {
    connect(box, &QComboBox::currentIndexChanged, this, &HeatmapView::refresh);
  }
  connect(tensor_, &QComboBox::currentIndexChanged, this, [this] { needsChanged(); });
  // A click selects that channel and token everywhere (the histogram's group and scope).
  connect(canvas_, &HeatmapCanvas::cellClicked, this, [this](int channel, int token) {
    if (!session()) return;
    session()->selectPoint(channel, token);
    session()->reportStatus(tr("Selected channel %1, token %2 for the histogram.").arg(channel).arg(token));
  });
}

void HeatmapView::takeDump(const std::shared_ptr<const Dump>& dump, const ViewContext& context) {
  layer_.reset();
  compare_.reset();
  kvHead_ = context.selection.kvHead;
  tokenText_ = context.tokenText;
  profileFor_.reset();
  {
    const QSignalBlocker block(tensor_);
    setHasPreRope(dump && dump->info().hasKeyPreRope);
  }
  canvas_->resetZoom();  // another dump: another shape
  refresh();
}

void HeatmapView::clearResults(const QString& reason) {
  layer_.reset();
  compare_.reset();
  refresh();
  profile_->setText(reason);
}

void HeatmapView::takeFocus(const Evidence& e, bool hasKeyPreRope) {
  int tensor = -1;
  if (e.tensor == "key") tensor = static_cast<int>(ViewTensor::Key);
  else if (e.tensor == "key_pre_rope" && hasKeyPreRope) tensor = static_cast<int>(ViewTensor::KeyPreRope);
  else if (e.tensor == "value") tensor = static_cast<int>(ViewTensor::Value);
  if (const int i = tensor_->findData(tensor); tensor >= 0 && i >= 0) tensor_->setCurrentIndex(i);
}

void HeatmapView::setHasPreRope(bool has) {
  // Disabled, not hidden: the option exists, this dump just lacks the tensor.
  if (auto* model = qobject_cast<QStandardItemModel*>(tensor_->model())) {
    if (QStandardItem* item = model->item(1)) item->setEnabled(has);
  }
  if (!has && tensor_->currentIndex() == 1) tensor_->setCurrentIndex(0);
}

ViewTensor HeatmapView::tensor() const { return static_cast<ViewTensor>(tensor_->currentData().toInt()); }

bool HeatmapView::difference() const { return value_->currentIndex() == kDifferenceIndex; }

void HeatmapView::takeComparison(const ComparisonData& a) {
  // The error change is cell by cell against one dump's values; A on another dump has other
  // values in each cell, so the heat map shows B alone then (and says so).
  const bool pinned = a.pinned && a.otherDump == nullptr;
  otherDumpNote_ = a.pinned && a.otherDump ? tr(" A is on another dump (%1): this map shows B's dump only.")
                                                  .arg(QFileInfo(QString::fromStdString(a.otherDump->path)).fileName())
                                            : QString();
  compare_ = pinned ? a.layer : nullptr;
  if (pinned != pinned_) {
    pinned_ = pinned;
    if (auto* model = qobject_cast<QStandardItemModel*>(value_->model())) {
      if (QStandardItem* item = model->item(kDifferenceIndex)) item->setEnabled(pinned);
    }
    const QSignalBlocker block(value_);
    if (pinned) {
      // Pinning shows what changed: the error difference, until the user picks another colouring.
      valueBeforePin_ = value_->currentIndex();
      value_->setCurrentIndex(kDifferenceIndex);
    } else if (difference()) {
      value_->setCurrentIndex(valueBeforePin_ == kDifferenceIndex ? 2 : valueBeforePin_);
    }
  }
  refresh();
}

void HeatmapView::fillRequest(ViewRequest& request) const {
  request.heatmapTensor = tensorKindOf(tensor());
  request.heatmapValue = static_cast<HeatmapValue>(value_->currentData().toInt());
  // The change in error is binned here, from A's and B's reconstructions.
  request.heatmapColumns = difference() ? 0 : canvas_->plotColumns();
  if (tensor() == ViewTensor::KeyPreRope) request.keyPreRopeHat = true;
}

void HeatmapView::setLayer(LayerQuantPtr layer, int kvHead, QStringList tokenText) {
  layer_ = std::move(layer);
  kvHead_ = kvHead;
  tokenText_ = std::move(tokenText);
  refresh();
}

void HeatmapView::refresh() {
  canvas_->setComparison(compare_, difference() && pinned_);
  if (auto* hint = findChild<QLabel*>(QStringLiteral("heatmapHint"))) {
    hint->setText((difference() && pinned_
                       ? tr("Hover a cell for its token, channel, x, x′A and x′B; click it to select them for the histogram.")
                       : tr("Hover a cell for its token, channel, x and x′; click it to select them for the histogram.")) +
                  tr(" Wheel or drag a box to zoom, right drag to pan, double-click or Esc to reset.") + otherDumpNote_);
  }
  canvas_->setSource(layer_, kvHead_, static_cast<ViewTensor>(tensor_->currentData().toInt()),
                     static_cast<HeatmapValue>(value_->currentData().toInt()), scale_->currentIndex() == 1,
                     tokenText_);
  profile_->setText(profileText());
}

QString HeatmapView::profileText() const {
  if (!layer_) return {};
  const auto tensor = static_cast<ViewTensor>(tensor_->currentData().toInt());
  const Tensor3* x = layer_->original(tensor);
  const int64_t head = layer_->originalHead(kvHead_);
  if (!x || head < 0 || head >= x->heads) return {};
  if (profileFor_ == layer_->tensors && profileHead_ == kvHead_ && profileTensor_ == static_cast<int>(tensor)) return profileCache_;
  std::vector<std::string> text;
  text.reserve(static_cast<size_t>(tokenText_.size()));
  for (const QString& t : tokenText_) text.push_back(t.toStdString());
  const OutlierOptions options;
  const TensorOutliers p = profileHead(*x, head, options, text);
  QStringList channels;
  for (const ChannelStat& c : p.outlierChannels) {
    if (channels.size() == 8) {
      channels << tr("…");
      break;
    }
    channels << tr("%1 (×%2, in top 1% of %3% of tokens)").arg(c.channel).arg(c.ratio, 0, 'f', 1).arg(c.persistence * 100, 0, 'f', 0);
  }
  QStringList tokens;
  for (const TokenStat& t : p.topTokens) {
    if (tokens.size() == 5) break;
    QString item = tr("%1 (×%2").arg(t.token).arg(t.ratio, 0, 'f', 1);
    if (!t.text.empty()) item += QStringLiteral(" \u201c%1\u201d").arg(QString::fromStdString(t.text));
    tokens << item + QLatin1Char(')');
  }
  profileCache_ =
      tr("<b>Outlier channels</b> (max |x| > %1× the median channel's): %2<br><b>Largest token norms</b>: %3 · "
         "kurtosis %4")
          .arg(options.threshold)
          .arg(channels.isEmpty() ? tr("none") : channels.join(QStringLiteral(", ")).toHtmlEscaped())
          .arg(tokens.join(QStringLiteral(", ")).toHtmlEscaped())
          .arg(p.kurtosis, 0, 'f', 2);
  profileFor_ = layer_->tensors;
  profileHead_ = kvHead_;
  profileTensor_ = static_cast<int>(tensor);
  return profileCache_;
}

void HeatmapView::renderTo(QPainter& painter, const QRectF& target) {
  canvas_->paintFigure(painter, target);
  // The export binned to its own width; bin again to the screen on the next paint.
  canvas_->update();
}

QString HeatmapView::toCsv() const {
  // The full-resolution grid (one column per token), whatever the screen binning.
  if (!layer_) return {};
  const auto tensor = static_cast<ViewTensor>(tensor_->currentData().toInt());
  const Tensor3* x = layer_->original(tensor);
  const int64_t head = layer_->originalHead(kvHead_);
  if (!x || head < 0) return {};
  const auto value = static_cast<HeatmapValue>(value_->currentData().toInt());
  const int64_t hatHead = layer_->hatHead(kvHead_);
  HeatmapData full;
  if (canvas_->showsDifference()) {
    const Tensor3* aHat = compare_ && compare_->tensors == layer_->tensors ? compare_->reconstruction(tensor) : nullptr;
    const int64_t aHead = compare_ ? compare_->hatHead(kvHead_) : -1;
    const Tensor3* bHat = layer_->reconstruction(tensor);
    if (!aHat || aHead < 0 || !bHat || hatHead < 0) return {};
    computeErrorDifferenceInto(*x, head, *aHat, aHead, *bHat, hatHead, static_cast<int>(x->tokens), full);
  } else {
    computeHeatmapInto(*x, head, hatHead >= 0 ? layer_->reconstruction(tensor) : nullptr, hatHead, value,
                       static_cast<int>(x->tokens), full);
  }
  QString out = canvas_->showsDifference() ? QStringLiteral("channel,token,error_b_minus_error_a\n")
                                           : QStringLiteral("channel,token,value\n");
  for (int c = 0; c < full.channels; ++c) {
    for (int t = 0; t < full.columns; ++t) {
      out += QStringLiteral("%1,%2,%3\n").arg(c).arg(t).arg(static_cast<double>(full.cell(c, t)), 0, 'g', 9);
    }
  }
  return out;
}

QString HeatmapView::tabTitle() const { return tr("Outlier heat map"); }

nlohmann::json HeatmapView::saveState() const {
  return {{"tensor", currentItemName(tensor_).toStdString()},
          {"value", currentItemName(value_).toStdString()},
          {"scale", currentItemName(scale_).toStdString()}};
}

void HeatmapView::loadState(const nlohmann::json& state) {
  // Indexes (sessions written before names) through the entries' order then.
  loadNamedChoice(tensor_, state, "tensor", {"key", "key_prerope", "value"}, QStringLiteral("key"));
  loadNamedChoice(value_, state, "value", {"magnitude", "normalized", "error", "error_change"},
                  QStringLiteral("magnitude"));
  loadNamedChoice(scale_, state, "scale", {"linear", "log"}, QStringLiteral("linear"));
}

void HeatmapView::fillRequest(ViewRequest& request, const ViewContext& context) const {
  (void)context;
  fillRequest(request);
}

void HeatmapView::takeLayer(const LayerQuantPtr& layer, const ViewContext& context) {
  setLayer(layer, context.selection.kvHead, context.tokenText);
}

}  // namespace kvscope::ui
