// SPDX-License-Identifier: GPL-3.0-or-later
// SteadyTabWidget: a page's layout request that changes none of the tab widget's size hints no
// longer repaints the whole tab widget, while real layout changes are still laid out.
#include <QtTest>

#include <QLabel>
#include <QTabBar>
#include <QTabWidget>
#include <QVBoxLayout>

#include "ui/widgets/steady_tab_widget.h"

using namespace kvscope::ui;

namespace {

// Counts the paint events of one widget that cover all of it.
class WholePaints : public QObject {
 public:
  explicit WholePaints(QWidget* w) : widget_(w) { w->installEventFilter(this); }
  int count = 0;

 protected:
  bool eventFilter(QObject* o, QEvent* e) override {
    // (QRegion::contains(QRect) only asks for an overlap.)
    if (o == widget_ && e->type() == QEvent::Paint &&
        (QRegion(widget_->rect()) - static_cast<QPaintEvent*>(e)->region()).isEmpty()) {
      ++count;
    }
    return false;
  }

 private:
  QWidget* widget_;
};

// A window holding `tabs` (laid out), whose one page has a fixed-width label and a filler that
// sets the page's size; returns the label.
QLabel* fillWindow(QWidget& window, QTabWidget* tabs, QWidget** filler = nullptr) {
  auto* page = new QWidget;
  auto* layout = new QVBoxLayout(page);
  auto* label = new QLabel(QStringLiteral("1 bit"));
  label->setFixedWidth(200);
  auto* fill = new QWidget;
  fill->setMinimumSize(300, 200);
  layout->addWidget(label);
  layout->addWidget(fill);
  tabs->addTab(page, QStringLiteral("Key"));
  auto* outer = new QVBoxLayout(&window);
  outer->addWidget(tabs);
  if (filler != nullptr) *filler = fill;
  window.resize(500, 400);
  window.show();
  return label;
}

}  // namespace

class SteadyTabWidgetTest : public QObject {
  Q_OBJECT

 private slots:
  void textChangeInAPageDoesNotRepaintTheWholeTabWidget() {
    // The control: a plain QTabWidget repaints whole for the same change, so the count below
    // can see a whole repaint.
    for (const bool steady : {false, true}) {
      QWidget window;
      QTabWidget* tabs = steady ? new SteadyTabWidget : new QTabWidget;
      QLabel* label = fillWindow(window, tabs);
      QVERIFY(QTest::qWaitForWindowExposed(&window));
      QTest::qWait(50);
      WholePaints paints(tabs);
      const int skipped = steady ? static_cast<SteadyTabWidget*>(tabs)->layoutsSkipped() : 0;
      for (int bits = 2; bits <= 8; ++bits) {
        label->setText(QStringLiteral("%1 bit").arg(bits));
        QTest::qWait(20);
      }
      if (steady) {
        QCOMPARE(paints.count, 0);
        QVERIFY(static_cast<SteadyTabWidget*>(tabs)->layoutsSkipped() > skipped);
      } else {
        QVERIFY2(paints.count >= 1, "a plain QTabWidget no longer repaints whole on a page's layout request");
      }
    }
  }

  void pageThatGrowsIsStillLaidOut() {
    QWidget window;
    auto* tabs = new SteadyTabWidget;
    QWidget* filler = nullptr;
    fillWindow(window, tabs, &filler);
    QVERIFY(QTest::qWaitForWindowExposed(&window));
    QTest::qWait(50);
    filler->setMinimumSize(700, 600);
    QTest::qWait(50);
    QVERIFY(tabs->minimumSizeHint().width() >= 700);
    // The window's layout grew the tab widget, and the tab widget its page.
    QVERIFY(tabs->width() >= 700);
    QVERIFY(tabs->currentWidget()->width() >= 700);
    QVERIFY(tabs->currentWidget()->height() >= 600);
  }

  void largerTabBarFontIsStillLaidOut() {
    // (QTabWidget::setTabText lays out directly; a font set on the tab bar alone reaches the
    // tab widget only as a layout request.)
    QWidget window;
    auto* tabs = new SteadyTabWidget;
    fillWindow(window, tabs);
    QVERIFY(QTest::qWaitForWindowExposed(&window));
    QTest::qWait(50);
    const QSize before = tabs->tabBar()->size();
    QFont font = tabs->tabBar()->font();
    font.setPointSizeF(font.pointSizeF() * 3);
    tabs->tabBar()->setFont(font);
    QTest::qWait(50);
    QVERIFY(tabs->tabBar()->height() > before.height());
    QCOMPARE(tabs->tabBar()->size(), tabs->tabBar()->sizeHint());
    // The page moved down below the taller tab bar.
    QVERIFY(tabs->currentWidget()->mapTo(tabs, QPoint(0, 0)).y() >= tabs->tabBar()->geometry().bottom());
  }
};

QTEST_MAIN(SteadyTabWidgetTest)
#include "steady_tab_widget_test.moc"
