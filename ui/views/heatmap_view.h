// SPDX-License-Identifier: GPL-3.0-or-later
// Outlier heat map: channel × token magnitude of one kv head, with a colour bar and a side bar
// chart of per-channel maxima. Drawn from a QImage so that thousands of tokens stay cheap.
// Zoom and pan as every chart does (ui/widgets/chart_view.h): wheel, rubber band, drag, reset.
#pragma once

#include <QImage>
#include <QStringList>
#include <QWidget>

#include <utility>

#include "core/inspect/view_data.h"
#include "ui/views/view.h"
#include "core/inspect/layer_data.h"
#include "ui/widgets/pointer_drag.h"

class QComboBox;
class QLabel;
class QRubberBand;

namespace kvscope::ui {

/// The drawing surface; paints the same picture on screen and into exports.
class HeatmapCanvas : public QWidget {
  Q_OBJECT

 public:
  explicit HeatmapCanvas(QWidget* parent = nullptr);

  /// Shows kv head `kvHead` of `layer`; takes the heat map the layer worker computed when it is
  /// for the same head, tensor, value and width, else bins it when painted.
  void setSource(LayerQuantPtr layer, int kvHead, ViewTensor tensor, HeatmapValue value,
                 bool logScale, QStringList tokenText);
  /// A/B comparison: A's reconstruction of the same layer, and whether the cells show the change
  /// in error |x′B − x| − |x′A − x| (B is the source's layer) on a diverging scale centred at 0.
  void setComparison(LayerQuantPtr a, bool difference);
  [[nodiscard]] bool showsDifference() const { return difference_; }
  /// Token columns the plot has at the widget's current size (what the worker should bin to).
  [[nodiscard]] int plotColumns() const;
  /// Draws the whole figure into `target`, binning tokens to its plot width.
  void paintFigure(QPainter& painter, const QRectF& target);
  /// The data drawn last (for tests and CSV).
  [[nodiscard]] const HeatmapData& data() const { return data_; }
  /// The heat map image drawn last (one pixel per cell).
  [[nodiscard]] const QImage& image() const { return image_; }
  [[nodiscard]] bool hasContent() const { return source_ != nullptr; }
  /// Text for a cell under a plot-relative point (used by the tooltip).
  [[nodiscard]] QString describeAt(const QPointF& pos) const;
  [[nodiscard]] QString title() const;
  /// The readout shown for the cursor's cell (empty outside the cells).
  [[nodiscard]] const QString& readout() const { return readout_; }

  // Zoom, as InteractiveChartView: tokens along x, channels along y. Positions are widget pixels.
  /// The tokens shown, [first, end).
  [[nodiscard]] std::pair<int, int> visibleTokens() const;
  /// The channels shown, [first, end).
  [[nodiscard]] std::pair<int, int> visibleChannels() const;
  [[nodiscard]] bool zoomed() const;
  /// Zooms by `factor` (> 1 magnifies) about `pos`: tokens, channels, or both.
  void zoomAt(const QPointF& pos, double factor, bool tokens = true, bool channels = false);
  /// Zooms to the cells between two positions.
  void zoomToRect(const QPointF& a, const QPointF& b);
  /// Moves the shown window by a pixel offset (a drag).
  void panBy(const QPointF& pixels);
  /// Shows every token and channel again.
  void resetZoom();
  /// The plot rectangle of the last on-screen paint.
  [[nodiscard]] const QRectF& plotRect() const { return plotRect_; }

 signals:
  /// The user clicked a cell: select this channel and token elsewhere.
  void cellClicked(int channel, int token);

 protected:
  void paintEvent(QPaintEvent* event) override;
  void mouseMoveEvent(QMouseEvent* event) override;
  void mousePressEvent(QMouseEvent* event) override;
  void mouseReleaseEvent(QMouseEvent* event) override;
  void mouseDoubleClickEvent(QMouseEvent* event) override;
  void wheelEvent(QWheelEvent* event) override;
  void keyPressEvent(QKeyEvent* event) override;
  void leaveEvent(QEvent* event) override;

 private:
  const Tensor3* sourceTensor() const;
  void rebuild(int columns);
  void buildImage(const HeatmapData& data, QImage& image) const;
  /// The binned data of the shown token window (data_ itself when every token is shown).
  const HeatmapData& shownData(int columns);
  bool cellAt(const QPointF& pos, int* channel, int* column) const;
  /// Clamps the window to the data and keeps at least one token and channel.
  void clampWindow();
  void updateReadout(const QPointF& pos, const QPoint& globalPos);

  LayerQuantPtr layer_;
  LayerQuantPtr compare_;
  bool difference_ = false;
  /// A's reconstruction of the shown tensor and its head index, when A applies to what is shown.
  [[nodiscard]] const Tensor3* compareHat(int64_t* head) const;
  const Tensor3* source_ = nullptr;
  int kvHead_ = 0;
  int64_t sourceHead_ = 0;  ///< kvHead_'s index in source_ (LayerQuant::originalHead)
  ViewTensor tensor_ = ViewTensor::Key;
  HeatmapValue value_ = HeatmapValue::Magnitude;
  bool logScale_ = false;
  QStringList tokenText_;
  HeatmapData data_;
  QImage image_;
  int builtColumns_ = -1;
  bool imagePending_ = false;  ///< data_ is newer than image_
  QRectF plotRect_;  ///< where the last on-screen paint put the cells
  // The shown window in token and channel units (continuous, so that small drags add up);
  // empty (hi <= lo) = everything.
  double tokenLo_ = 0, tokenHi_ = 0, channelLo_ = 0, channelHi_ = 0;
  HeatmapData window_;  ///< binned data of the token window when zoomed along tokens
  QImage windowImage_;
  int windowColumns_ = -1, windowLo_ = -1, windowHi_ = -1;  ///< what window_ was built for
  const HeatmapData* shown_ = &data_;  ///< what the last paint drew
  QString readout_;
  PointerDrag drag_ = PointerDrag::None;
  QPointF pressPos_, lastPos_;
  bool moved_ = false;
  QRubberBand* band_ = nullptr;
};

/// The heat map with its controls (tensor, value, colour scale).
class HeatmapView : public QWidget, public View {
  Q_OBJECT

 public:
  explicit HeatmapView(QWidget* parent = nullptr);

  void setLayer(LayerQuantPtr layer, int kvHead, QStringList tokenText);
  /// Asks the layer worker for the heat map this view shows, at the canvas's width.
  void fillRequest(ViewRequest& request) const;
  /// The tensor shown.
  [[nodiscard]] ViewTensor tensor() const;
  HeatmapCanvas* canvas() { return canvas_; }
  QComboBox* tensorBox() { return tensor_; }
  QComboBox* valueBox() { return value_; }
  QComboBox* scaleBox() { return scale_; }
  /// The value box's entry for the change in error |x′B − x| − |x′A − x|.
  static constexpr int kDifferenceIndex = 3;
  /// The outlier profile line under the map (core's profileHead on the shown tensor).
  [[nodiscard]] QString profileText() const;

  static constexpr const char* kName = "heatmap";
  [[nodiscard]] QString exportName() const override { return QString::fromLatin1(kName); }
  QWidget* widget() override { return this; }
  [[nodiscard]] QString tabTitle() const override;
  [[nodiscard]] nlohmann::json saveState() const override;
  void loadState(const nlohmann::json& state) override;
  void takeDump(const std::shared_ptr<const Dump>& dump, const ViewContext& context) override;
  void clearResults(const QString& reason) override;
  void fillRequest(ViewRequest& request, const ViewContext& context) const override;
  [[nodiscard]] bool showsPreRope() const override { return tensor() == ViewTensor::KeyPreRope; }
  void takeLayer(const LayerQuantPtr& layer, const ViewContext& context) override;
  /// A/B comparison: pinning turns the "error change" colouring on (and unpinning off again);
  /// A's reconstruction of the layer in view is null while it is computed.
  void takeComparison(const ComparisonData& a) override;
  /// Switches to the evidence's tensor.
  void takeFocus(const Evidence& evidence, bool hasKeyPreRope) override;
  void renderTo(QPainter& painter, const QRectF& target) override;
  [[nodiscard]] QString toCsv() const override;
  [[nodiscard]] bool hasContent() const override { return canvas_->hasContent(); }

 private:
  void refresh();
  void setHasPreRope(bool has);

  HeatmapCanvas* canvas_;
  QComboBox* tensor_;
  QComboBox* value_;
  QComboBox* scale_;
  QLabel* profile_;
  LayerQuantPtr layer_;
  QString otherDumpNote_;  ///< said in the hint while A is on another dump
  LayerQuantPtr compare_;
  bool pinned_ = false;
  int valueBeforePin_ = 2;
  [[nodiscard]] bool difference() const;
  int kvHead_ = 0;
  QStringList tokenText_;
  /// The profile depends on the original tensor only: kept until the layer, head or tensor change.
  mutable LayerTensorsPtr profileFor_;
  mutable int profileHead_ = -1;
  mutable int profileTensor_ = -1;
  mutable QString profileCache_;
};

}  // namespace kvscope::ui
