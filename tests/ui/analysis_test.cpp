// SPDX-License-Identifier: GPL-3.0-or-later
// The analysis interactions driven as a user drives them, on the built-in sample: hovering and
// clicking Pareto candidates, the search's progress and Cancel, zooming the heat map, and
// publication export (physical sizes, captions, CSV metadata, the headless flags).
#include <QtTest>

#include <QApplication>
#include <QDialogButtonBox>
#include <QLabel>
#include <QLineEdit>
#include <QProcess>
#include <QProgressBar>
#include <QPushButton>
#include <QRegularExpression>
#include <QSpinBox>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QUndoStack>
#include <QValueAxis>
#include <QWheelEvent>

#include <cmath>

#include "core/io/dump.h"
#include "core/search/search.h"
#include "core/synth/synth.h"
#include "ui/export/exporter.h"
#include "ui/main_window.h"
#include "tests/ui/ui_test_support.h"
#include "ui/views/budget_view.h"
#include "ui/views/heatmap_view.h"
#include "ui/views/histogram_view.h"
#include "ui/widgets/chart_view.h"
#include "ui/widgets/export_dialog.h"
#include "ui/widgets/spec_panel.h"
#include "ui/workers/job_runner.h"

using namespace kvscope;
using namespace kvscope::ui;

namespace {

constexpr int kWaitMs = 30000;

void wheel(QWidget* w, const QPointF& pos, int notches, Qt::KeyboardModifiers modifiers = {}) {
  QWheelEvent e(pos, w->mapToGlobal(pos), QPoint(), QPoint(0, 120 * notches), Qt::NoButton, modifiers,
                Qt::NoScrollPhase, false);
  QApplication::sendEvent(w, &e);
}

// The first "NAME=\"<number>mm\"" attribute of an SVG file.
double svgMillimetres(const QByteArray& svg, const char* name) {
  const QRegularExpression re(QStringLiteral("%1=\"([0-9.]+)mm\"").arg(QString::fromLatin1(name)));
  const auto m = re.match(QString::fromUtf8(svg));
  return m.hasMatch() ? m.captured(1).toDouble() : -1;
}

QStringList lines(const QString& path) {
  QFile f(path);
  if (!f.open(QIODevice::ReadOnly)) return {};
  return QString::fromUtf8(f.readAll()).split(QLatin1Char('\n'), Qt::SkipEmptyParts);
}

}  // namespace

class AnalysisTest : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir dir_;
  QString sample_;

  void openSample(MainWindow& w) { test::openAndWaitForViews(w, sample_, kWaitMs); }

 private slots:
  void initTestCase() {
    QStandardPaths::setTestModeEnabled(true);
    QVERIFY(dir_.isValid());
    auto path = ensureSampleDump(dir_.filePath(QStringLiteral("sample")).toStdString());
    QVERIFY2(path.hasValue(), path.status().message().c_str());
    sample_ = QString::fromStdString(*path);
  }

  void timeLeftIsElapsedTimesUndoneOverDone() {
    // 10 s for a quarter: three quarters left take 30 s.
    QCOMPARE(timeLeftText(10, 0.25), QStringLiteral("about 30 s left"));
    QCOMPARE(timeLeftText(60, 0.5), QStringLiteral("about 1 min left"));
    QCOMPARE(timeLeftText(3600, 0.5), QStringLiteral("about 1.0 h left"));
    // Nothing to say before a few percent are done, or when done.
    QVERIFY(timeLeftText(3, 0.01).isEmpty());
    QVERIFY(timeLeftText(3, 1.0).isEmpty());
  }

  void paretoHoverReadsTheCandidateAndClickAppliesIt() {
    MainWindow w(false);
    w.resize(1600, 1000);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    openSample(w);
    w.showTab(4);
    BudgetView* budget = viewOf<BudgetView>(w);
    SearchOptions options = budget->searchOptions();
    options.candidates = {"int2", "int4", "int8,axis=channel"};
    QSignalSpy done(viewOf<BudgetView>(w), &BudgetView::searchFinished);
    viewOf<BudgetView>(w)->runSearch(options);
    QVERIFY(done.wait(kWaitMs));
    const SearchResult* result = budget->searchResult();
    QVERIFY(result);
    QCoreApplication::processEvents();  // the charts lay out on posted events

    // K chart: hovering a candidate's marker shows its spec, bits per element and metric.
    int key8 = -1;
    for (size_t i = 0; i < result->key.candidates.size(); ++i) {
      if (result->key.candidates[i].spec.rfind("int8", 0) == 0) key8 = static_cast<int>(i);
    }
    QVERIFY(key8 >= 0);
    const CandidateResult& c = result->key.candidates[static_cast<size_t>(key8)];
    InteractiveChartView* keyView = budget->keyChartView();
    const QPoint at = budget->candidatePosition(true, key8);
    QVERIFY2(keyView->viewport()->rect().contains(at), qPrintable(QStringLiteral("%1,%2").arg(at.x()).arg(at.y())));
    QTest::mouseMove(keyView->viewport(), at);
    const QString readout = budget->paretoReadout()->text();
    QVERIFY2(readout.contains(QStringLiteral("K ") + QString::fromStdString(c.spec)), qPrintable(readout));
    QVERIFY2(readout.contains(QString::number(c.bitsPerElement, 'f', 3) + QStringLiteral(" bits/element")), qPrintable(readout));
    QVERIFY2(readout.contains(QStringLiteral("output_rel_error ") + QString::number(c.worst, 'g', 4)), qPrintable(readout));
    // Away from every marker the readout says how to use the chart again.
    QTest::mouseMove(keyView->viewport(), at + QPoint(0, -60));
    QVERIFY2(!budget->paretoReadout()->text().contains(QString::fromStdString(c.spec)), qPrintable(budget->paretoReadout()->text()));

    // Clicking it puts that spec on the K panel (and its spec field); V stays.
    const QuantSpec valueBefore = w.valuePanel()->spec();
    QVERIFY(w.keyPanel()->spec() != *parseSpec(c.spec));
    QTest::mouseClick(keyView->viewport(), Qt::LeftButton, {}, at);
    QVERIFY(w.keyPanel()->spec() == *parseSpec(c.spec));
    QCOMPARE(w.keyPanel()->specEdit()->text(), QString::fromStdString(c.spec));
    QVERIFY(w.valuePanel()->spec() == valueBefore);
    QCOMPARE(w.undoStack()->undoText(), QStringLiteral("key from the Pareto chart"));

    // V chart: the int2 candidate goes to the V panel.
    int value2 = -1;
    for (size_t i = 0; i < result->value.candidates.size(); ++i) {
      if (result->value.candidates[i].spec == "int2") value2 = static_cast<int>(i);
    }
    QVERIFY(value2 >= 0);
    const QPoint vat = budget->candidatePosition(false, value2);
    QTest::mouseMove(budget->valueChartView()->viewport(), vat);
    QVERIFY2(budget->paretoReadout()->text().startsWith(QStringLiteral("V int2 · ")), qPrintable(budget->paretoReadout()->text()));
    QTest::mouseClick(budget->valueChartView()->viewport(), Qt::LeftButton, {}, vat);
    QCOMPARE(w.valuePanel()->specEdit()->text(), QStringLiteral("int2"));
    QVERIFY(w.keyPanel()->spec() == *parseSpec(c.spec));
  }

  void searchShowsProgressAndCancelStopsIt() {
    MainWindow w(false);
    openSample(w);
    BudgetView* budget = viewOf<BudgetView>(w);
    QSignalSpy done(viewOf<BudgetView>(w), &BudgetView::searchFinished);
    budget->searchButton()->click();  // the default candidates: many seconds of work
    QVERIFY(viewOf<BudgetView>(w)->searchRunner()->busy());
    QVERIFY(!budget->cancelSearchButton()->isHidden());
    QVERIFY(!budget->searchProgressBar()->isHidden());
    QVERIFY(!budget->searchButton()->isEnabled());
    budget->cancelSearchButton()->click();
    QVERIFY(!viewOf<BudgetView>(w)->searchRunner()->busy());
    viewOf<BudgetView>(w)->searchRunner()->waitForIdle();  // returns: the worker saw the cancel and stopped
    QCoreApplication::processEvents();
    QCOMPARE(done.count(), 0);
    QVERIFY(!budget->searchResult());
    QVERIFY(budget->cancelSearchButton()->isHidden());
    QVERIFY(budget->searchProgressBar()->isHidden());
    QVERIFY(budget->searchButton()->isEnabled());
  }

  void coreSearchStopsAtTheFirstRefusedProgress() {
    // Cancel is prompt when the search asks nothing more once its callback said stop.
    auto dump = Dump::open(sample_.toStdString());
    QVERIFY(dump.hasValue());
    int calls = 0, afterStop = 0;
    bool stopped = false;
    const Progress progress = [&](double, std::string_view) {
      ++calls;
      if (stopped) ++afterStop;
      if (calls == 3) stopped = true;
      return !stopped;
    };
    SearchOptions options;
    options.keyBudget = Budget{AttentionField::OutputRelError, 0.05};
    options.valueBudget = Budget{AttentionField::OutputRelError, 0.05};
    auto r = searchBudgets(**dump, options, progress);
    QVERIFY(!r.hasValue());
    QVERIFY2(r.status().code() == StatusCode::Cancelled, r.status().message().c_str());
    QCOMPARE(r.status().code(), StatusCode::Cancelled);
    QCOMPARE(afterStop, 0);
  }

  void heatmapZoomsPansAndKeepsTheReadout() {
    MainWindow w(false);
    w.resize(1600, 1000);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    openSample(w);
    w.showTab(1);
    HeatmapCanvas* canvas = viewOf<HeatmapView>(w)->canvas();
    canvas->repaint();
    const int tokens = static_cast<int>(w.dump()->info().tokens);
    const int dim = static_cast<int>(w.dump()->info().headDim);
    QCOMPARE(canvas->visibleTokens(), std::make_pair(0, tokens));
    QVERIFY(!canvas->zoomed());
    const QRectF plot = canvas->plotRect();
    QVERIFY(plot.width() > 100);

    // Wheel up over the middle: fewer tokens, around the cursor; the channels stay.
    const QPointF middle = plot.center();
    const int underCursor = static_cast<int>((middle.x() - plot.left()) / plot.width() * tokens);
    wheel(canvas, middle, 3);
    canvas->repaint();
    auto [t0, t1] = canvas->visibleTokens();
    QVERIFY2(t1 - t0 < tokens * 0.6 && t1 - t0 > tokens * 0.4, qPrintable(QStringLiteral("%1–%2").arg(t0).arg(t1)));
    QVERIFY(t0 <= underCursor && underCursor < t1);
    QCOMPARE(canvas->visibleChannels(), std::make_pair(0, dim));
    QVERIFY(canvas->zoomed());

    // A box drawn with the mouse: tokens and channels of that box.
    const QPointF a(plot.left() + plot.width() * 0.25, plot.top() + plot.height() * 0.5);
    const QPointF b(plot.left() + plot.width() * 0.30, plot.top() + plot.height() * 0.75);
    QTest::mousePress(canvas, Qt::LeftButton, {}, a.toPoint());
    QTest::mouseMove(canvas, b.toPoint());
    QTest::mouseRelease(canvas, Qt::LeftButton, {}, b.toPoint());
    canvas->repaint();
    const auto boxTokens = canvas->visibleTokens();
    const auto boxChannels = canvas->visibleChannels();
    const int span = t1 - t0;
    QVERIFY2(std::abs(boxTokens.first - (t0 + span / 4)) <= 1, qPrintable(QString::number(boxTokens.first)));
    QVERIFY2(boxTokens.second - boxTokens.first <= span / 20 + 2, qPrintable(QString::number(boxTokens.second)));
    QVERIFY2(std::abs(boxChannels.first - dim / 2) <= 1 && std::abs(boxChannels.second - dim * 3 / 4) <= 1,
             qPrintable(QStringLiteral("%1–%2").arg(boxChannels.first).arg(boxChannels.second)));

    // The readout names the cell under the cursor in the zoomed window: its first token and
    // channel at the plot's top-left corner, with core's value there.
    const QPointF corner = canvas->plotRect().topLeft() + QPointF(2, 2);
    QTest::mouseMove(canvas, corner.toPoint());
    const QString readout = canvas->readout();
    QVERIFY2(readout.startsWith(QStringLiteral("token %1").arg(boxTokens.first)), qPrintable(readout));
    QVERIFY2(readout.contains(QStringLiteral("channel %1\n").arg(boxChannels.first)), qPrintable(readout));
    const Tensor3* k = w.layerQuant()->original(ViewTensor::Key);
    const double x = k->at(w.selection().kvHead, boxTokens.first, boxChannels.first);
    QVERIFY2(readout.contains(QStringLiteral("x = ") + QString::number(x, 'g', 4)), qPrintable(readout));

    // Dragging right with the right button shows earlier tokens; double-click shows everything.
    QTest::mousePress(canvas, Qt::RightButton, {}, middle.toPoint());
    QTest::mouseMove(canvas, (middle + QPointF(plot.width() / 2, 0)).toPoint());
    QTest::mouseRelease(canvas, Qt::RightButton, {}, (middle + QPointF(plot.width() / 2, 0)).toPoint());
    QVERIFY2(canvas->visibleTokens().first < boxTokens.first, qPrintable(QString::number(canvas->visibleTokens().first)));
    // The same number of tokens (± one where the window's edges fall inside tokens).
    QVERIFY(std::abs((canvas->visibleTokens().second - canvas->visibleTokens().first) -
                     (boxTokens.second - boxTokens.first)) <= 1);
    QTest::mouseDClick(canvas, Qt::LeftButton, {}, middle.toPoint());
    QCOMPARE(canvas->visibleTokens(), std::make_pair(0, tokens));
    QCOMPARE(canvas->visibleChannels(), std::make_pair(0, dim));

    // Esc resets too; a spec change keeps the zoom (the same tokens, recomputed).
    wheel(canvas, middle, 2, Qt::ControlModifier);
    QVERIFY(canvas->visibleChannels().second - canvas->visibleChannels().first < dim);
    const auto zoomedTokens = canvas->visibleTokens();
    QSignalSpy layer(&w, &MainWindow::layerReady);
    w.setSpecs(*parseSpec("int2"), *parseSpec("int2"));
    QVERIFY(layer.wait(kWaitMs));
    QCOMPARE(canvas->visibleTokens(), zoomedTokens);
    canvas->setFocus();
    QTest::keyClick(canvas, Qt::Key_Escape);
    QVERIFY(!canvas->zoomed());
  }

  void exportSizeParsesUnitsAndNamesTheFlag() {
    auto s = parseExportSize(QStringLiteral("3.5inx2.4in"));
    QVERIFY(s.hasValue());
    QVERIFY(s->physical());
    QCOMPARE(s->inches, QSizeF(3.5, 2.4));
    s->dpi = 300;
    QCOMPARE(s->pngPixels(), QSize(1050, 720));
    s = parseExportSize(QStringLiteral("89mm"));  // a column in mm; the height 3/4 of it
    QVERIFY(s.hasValue());
    QVERIFY(std::abs(s->inches.width() - 89 / 25.4) < 1e-12);
    QVERIFY(std::abs(s->inches.height() - 89 / 25.4 * 0.75) < 1e-12);
    s = parseExportSize(QStringLiteral("7x4.5in"));
    QVERIFY(s.hasValue());
    QCOMPARE(s->inches, QSizeF(7, 4.5));
    s = parseExportSize(QStringLiteral("17.8cmx216pt"));
    QVERIFY(s.hasValue());
    QVERIFY(std::abs(s->inches.width() - 7.007874015748) < 1e-9 && s->inches.height() == 3.0);
    s = parseExportSize(QStringLiteral("1600x1000"));
    QVERIFY(s.hasValue());
    QVERIFY(!s->physical());
    QCOMPARE(s->pngPixels(), QSize(1600, 1000));
    for (const char* bad : {"3.5", "3.5 furlongs", "0.2in", "41in", "3.5inx600px", "15x15", "big"}) {
      const auto r = parseExportSize(QString::fromLatin1(bad));
      QVERIFY2(!r.hasValue(), bad);
      const std::string m = r.status().message();
      QVERIFY2(m.rfind("--export-size", 0) == 0 && m.find("3.5inx2.4in") != std::string::npos &&
                   m.find(bad) != std::string::npos,
               m.c_str());
    }
    QCOMPARE(*parseExportDpi(QStringLiteral("600")), 600.0);
    for (const char* bad : {"10", "5000", "high"}) {
      const auto r = parseExportDpi(QString::fromLatin1(bad));
      QVERIFY2(!r.hasValue(), bad);
      QVERIFY2(r.status().message().rfind("--export-dpi", 0) == 0 && r.status().message().find("36 to 2400") != std::string::npos,
               r.status().message().c_str());
    }
    // The dialog checks the same way: OK is off for a bad size, and says why.
    ExportSizeDialog dialog(QStringLiteral("Export"));
    dialog.sizeEdit()->setText(QStringLiteral("3.5inx2.4in"));
    dialog.dpiBox()->setValue(600);
    QVERIFY(dialog.buttons()->button(QDialogButtonBox::Ok)->isEnabled());
    QVERIFY2(dialog.messageLabel()->text().contains(QStringLiteral("2100 × 1440")), qPrintable(dialog.messageLabel()->text()));
    QCOMPARE(dialog.exportSize()->pngPixels(), QSize(2100, 1440));
    dialog.sizeEdit()->setText(QStringLiteral("3.5 furlongs"));
    QVERIFY(!dialog.buttons()->button(QDialogButtonBox::Ok)->isEnabled());
    QVERIFY(dialog.messageLabel()->text().contains(QStringLiteral("units in, mm, cm, pt")));
  }

  void physicalExportHasItsSizeCaptionAndCsvMetadata() {
    MainWindow w(false);
    QSignalSpy summary(&w, &MainWindow::summaryFinished);
    openSample(w);
    if (!w.summaryComplete()) QVERIFY(summary.wait(kWaitMs));
    // What the export changes for a small figure (margins, fewer ticks) it puts back.
    QChart* histogram = viewOf<HistogramView>(w)->chart();
    auto* yAxis = qobject_cast<QValueAxis*>(histogram->axes(Qt::Vertical).value(0));
    QVERIFY(yAxis);
    const QMargins marginsBefore = histogram->margins();
    const double intervalBefore = yAxis->tickInterval(), yMinBefore = yAxis->min(), yMaxBefore = yAxis->max();
    const QString out = dir_.filePath(QStringLiteral("paper"));
    ExportSize size = *parseExportSize(QStringLiteral("3.5inx2.4in"));
    size.dpi = 300;
    const Status s = w.exportAll(out, {QStringLiteral("heatmap"), QStringLiteral("drift"), QStringLiteral("histogram")}, size);
    QVERIFY2(s.isOk(), s.message().c_str());
    QCOMPARE(histogram->margins(), marginsBefore);
    QCOMPARE(yAxis->tickInterval(), intervalBefore);
    QCOMPARE(yAxis->min(), yMinBefore);
    QCOMPARE(yAxis->max(), yMaxBefore);
    const QDir d(out);
    // PNG: size × DPI pixels, and the DPI in the file.
    const QImage png(d.filePath(QStringLiteral("heatmap.png")));
    QCOMPARE(png.size(), QSize(1050, 720));
    QCOMPARE(png.dotsPerMeterX(), static_cast<int>(std::lround(300 / 0.0254)));
    // SVG: the physical size, 3.5 in = 88.9 mm by 2.4 in = 60.96 mm.
    QFile svg(d.filePath(QStringLiteral("heatmap.svg")));
    QVERIFY(svg.open(QIODevice::ReadOnly));
    const QByteArray svgText = svg.readAll();
    QVERIFY2(std::abs(svgMillimetres(svgText, "width") - 88.9) < 0.3, svgText.left(400).constData());
    QVERIFY2(std::abs(svgMillimetres(svgText, "height") - 60.96) < 0.3, svgText.left(400).constData());
    // The caption (dump, layer, head, specs) is in the figure.
    const QString caption = w.exportCaption();
    QVERIFY(caption.contains(QFileInfo(sample_).fileName()));
    QVERIFY(caption.contains(QStringLiteral("layer %1 · kv head %2").arg(w.selection().layer).arg(w.selection().kvHead)));
    QVERIFY(caption.contains(QStringLiteral("K ") + QString::fromStdString(toString(w.keyPlan()))));
    QVERIFY(svgText.contains(caption.toHtmlEscaped().toUtf8().left(20)));
    // The caption band at the bottom of the PNG holds text: dark pixels on white.
    int dark = 0;
    for (int y = png.height() - 40; y < png.height(); ++y) {
      for (int x = 0; x < png.width() / 2; ++x) dark += qGray(png.pixel(x, y)) < 100;
    }
    QVERIFY2(dark > 50, qPrintable(QString::number(dark)));
    // Text is drawn at 8 pt on the page: the layout is that many pixels per inch.
    const double basePoints = QGuiApplication::font().pointSizeF();
    QVERIFY(std::abs(layoutPixelsPerInch() - basePoints * QImage(1, 1, QImage::Format_ARGB32).logicalDpiY() / kBodyPoints) < 1e-9);

    // CSVs: the metadata as comments, then one table.
    const QStringList heat = lines(d.filePath(QStringLiteral("heatmap.csv")));
    QVERIFY(heat.size() > 10);
    QCOMPARE(heat[0], QStringLiteral("# dump: ") + QString::fromStdString(w.dump()->info().path));
    QVERIFY(heat.contains(QStringLiteral("# layer: %1").arg(w.selection().layer)));
    QVERIFY(heat.contains(QStringLiteral("# kv head: %1").arg(w.selection().kvHead)));
    QVERIFY(heat.contains(QStringLiteral("# key: ") + QString::fromStdString(toString(w.keyPlan()))));
    QVERIFY(heat.contains(QStringLiteral("# value: ") + QString::fromStdString(toString(w.valuePlan()))));
    int firstData = 0;
    while (heat[firstData].startsWith(QLatin1Char('#'))) ++firstData;
    QCOMPARE(heat[firstData], QStringLiteral("channel,token,value"));
    const DumpInfo& info = w.dump()->info();
    QCOMPARE(heat.size() - firstData - 1, static_cast<int>(info.headDim * info.tokens));
    // The drift view's two tables are two files, each with one header line.
    const QStringList row = lines(d.filePath(QStringLiteral("drift.csv")));
    const QStringList queries = lines(d.filePath(QStringLiteral("drift-queries.csv")));
    QVERIFY(queries.contains(QStringLiteral("# table: queries")));
    QCOMPARE(queries.filter(QRegularExpression(QStringLiteral("^query_position,"))).size(), 1);
    QCOMPARE(row.filter(QRegularExpression(QStringLiteral("^query_position,"))).size(), 0);
    QCOMPARE(row.filter(QRegularExpression(QStringLiteral("^key_position,"))).size(), 1);
    QVERIFY(!row.isEmpty() && row[0].startsWith(QStringLiteral("# dump: ")));
    // The report too: the metadata, then kvscope-cli eval's table.
    const QStringList report = lines(d.filePath(QStringLiteral("report.csv")));
    QVERIFY(!report.isEmpty() && report[0].startsWith(QStringLiteral("# dump: ")));
    QCOMPARE(report.filter(QRegularExpression(QStringLiteral("^layer,kv_head,"))).size(), 1);
    QCOMPARE(report.size() - report.filter(QRegularExpression(QStringLiteral("^#"))).size(), 1 + info.layers * info.kvHeads);
  }

  void headlessExportSizeFlags() {
    const QString out = dir_.filePath(QStringLiteral("headless-paper"));
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert(QStringLiteral("QT_QPA_PLATFORM"), QStringLiteral("offscreen"));
    QProcess p;
    p.setProcessEnvironment(env);
    p.start(QStringLiteral(KVSCOPE_GUI_PATH),
            {sample_, QStringLiteral("--preset"), QStringLiteral("kivi-4"), QStringLiteral("--export-dir"), out,
             QStringLiteral("--views"), QStringLiteral("heatmap"), QStringLiteral("--export-size"),
             QStringLiteral("3.5inx2.4in"), QStringLiteral("--export-dpi"), QStringLiteral("200")});
    QVERIFY(p.waitForFinished(kWaitMs * 2));
    QVERIFY2(p.exitCode() == 0, p.readAllStandardError().constData());
    QCOMPARE(QImage(QDir(out).filePath(QStringLiteral("heatmap.png"))).size(), QSize(700, 480));
    QVERIFY(lines(QDir(out).filePath(QStringLiteral("heatmap.csv"))).value(0).startsWith(QStringLiteral("# dump: ")));

    const auto refused = [&](const QStringList& extra, const QByteArray& expected) {
      QProcess bad;
      bad.setProcessEnvironment(env);
      bad.start(QStringLiteral(KVSCOPE_GUI_PATH),
                QStringList{sample_, QStringLiteral("--preset"), QStringLiteral("kivi-4"), QStringLiteral("--export-dir"),
                            dir_.filePath(QStringLiteral("never"))} + extra);
      QVERIFY(bad.waitForFinished(kWaitMs));
      QCOMPARE(bad.exitCode(), 2);
      const QByteArray err = bad.readAllStandardError();
      QVERIFY2(err.contains(expected), err.constData());
    };
    refused({QStringLiteral("--export-size"), QStringLiteral("3.5 furlongs")}, "--export-size: expected a width such as 3.5in");
    refused({QStringLiteral("--export-size"), QStringLiteral("3.5in"), QStringLiteral("--export-dpi"), QStringLiteral("9")},
            "--export-dpi: expected dots per inch from 36 to 2400");
    refused({QStringLiteral("--export-size"), QStringLiteral("800x600"), QStringLiteral("--export-dpi"), QStringLiteral("300")},
            "--export-dpi: applies to a physical --export-size");
    QVERIFY(!QFileInfo::exists(dir_.filePath(QStringLiteral("never"))));
  }
};

QTEST_MAIN(AnalysisTest)
#include "analysis_test.moc"
