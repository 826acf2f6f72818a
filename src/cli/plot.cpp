// `rnntrain plot RUN_DIR [-o curves.svg|png]`: a run's history.json as a picture, one panel per
// quantity (the loss, each metric, the learning rate) with its training and validation curves over
// the epochs. Drawn with cairo (SVG or PNG surface) and written whole: a temporary file, renamed.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>

#include "cli/commands.h"
#include "core/error.h"
#include "core/files.h"
#include "core/log.h"
#include "train/callbacks.h"

#ifdef RNNTRAIN_HAVE_CAIRO
#include <cairo-svg.h>
#include <cairo.h>
#endif

namespace rnntrain {

namespace fs = std::filesystem;

namespace {

struct Series {
  std::string name;
  std::vector<double> x, y;  // epochs from 1, finite values only
};
struct Panel {
  std::string title;
  std::vector<Series> lines;  // training, then validation when there is one
};

// The loss first, then the metrics by name, then the learning rate; each with its val_ twin.
std::vector<Panel> panels_of(const History& h) {
  std::set<std::string> keys;
  for (const Logs& l : h.epochs)
    for (const auto& [k, v] : l) keys.insert(k);
  std::vector<std::string> order;
  if (keys.count("loss")) order.push_back("loss");
  for (const std::string& k : keys)
    if (k != "loss" && k != "learning_rate" && !k.starts_with("val_")) order.push_back(k);
  if (keys.count("learning_rate")) order.push_back("learning_rate");
  std::vector<Panel> out;
  for (const std::string& k : order) {
    Panel p{k, {}};
    for (const std::string& name : {k, "val_" + k}) {
      Series s{name, {}, {}};
      for (size_t e = 0; e < h.epochs.size(); ++e)
        if (auto it = h.epochs[e].find(name); it != h.epochs[e].end() && std::isfinite(it->second))
          s.x.push_back(static_cast<double>(e + 1)), s.y.push_back(it->second);
      if (!s.x.empty()) p.lines.push_back(std::move(s));
    }
    if (!p.lines.empty()) out.push_back(std::move(p));
  }
  return out;
}

// About n round steps (1, 2 or 5 times a power of ten) covering [lo, hi].
std::vector<double> ticks(double lo, double hi, int n, double* step_out) {
  const double raw = (hi - lo) / n, mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double step = raw / mag < 1.5 ? mag : raw / mag < 3.5 ? 2 * mag : raw / mag < 7.5 ? 5 * mag : 10 * mag;
  std::vector<double> out;
  for (double v = std::ceil(lo / step - 1e-9) * step; v <= hi + step * 1e-9; v += step) out.push_back(v);
  *step_out = step;
  return out;
}

std::string tick_label(double v, double step) {
  if (std::fabs(v) < step * 1e-6) return "0";
  const int decimals = std::max(0, static_cast<int>(-std::floor(std::log10(step) + 1e-9)));
  if (std::fabs(v) >= 1e5 || decimals > 5) return fmt::format("{:.2g}", v);
  return fmt::format("{:.{}f}", v, decimals);
}

#ifdef RNNTRAIN_HAVE_CAIRO
constexpr int kPanelW = 460, kPanelH = 300, kColumns = 2;
constexpr double kTrain[3] = {0.122, 0.467, 0.706}, kVal[3] = {1.0, 0.498, 0.055};  // matplotlib's C0, C1

void text(cairo_t* cr, double x, double y, const std::string& s, double size, bool bold, double align) {
  cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size(cr, size);
  cairo_text_extents_t ext;
  cairo_text_extents(cr, s.c_str(), &ext);
  cairo_move_to(cr, x - align * ext.x_advance, y);
  cairo_show_text(cr, s.c_str());
}

void draw_panel(cairo_t* cr, const Panel& p, double x0, double y0, int64_t epochs) {
  const double left = x0 + 62, right = x0 + kPanelW - 16, top = y0 + 34, bottom = y0 + kPanelH - 38;
  double lo = INFINITY, hi = -INFINITY;
  for (const Series& s : p.lines)
    for (double v : s.y) lo = std::min(lo, v), hi = std::max(hi, v);
  if (hi - lo < 1e-12 * std::max(1.0, std::fabs(hi))) {
    const double pad = std::fabs(hi) > 0 ? std::fabs(hi) * 0.05 : 1.0;
    lo -= pad, hi += pad;
  }
  const double first = 1, last = static_cast<double>(std::max<int64_t>(epochs, 2));
  auto px = [&](double e) { return left + (e - first) / (last - first) * (right - left); };
  auto py = [&](double v) { return bottom - (v - lo) / (hi - lo) * (bottom - top); };

  cairo_set_source_rgb(cr, 0, 0, 0);
  text(cr, x0 + 12, y0 + 22, p.title, 14, true, 0);
  cairo_set_line_width(cr, 1);
  double step = 0;
  for (double v : ticks(lo, hi, 5, &step)) {  // value grid and labels
    cairo_set_source_rgb(cr, 0.88, 0.88, 0.88);
    cairo_move_to(cr, left, py(v)), cairo_line_to(cr, right, py(v)), cairo_stroke(cr);
    cairo_set_source_rgb(cr, 0.25, 0.25, 0.25);
    text(cr, left - 6, py(v) + 4, tick_label(v, step), 11, false, 1);
  }
  double estep = 0;
  std::vector<double> es = ticks(first, last, 6, &estep);
  if (estep < 1) {  // a few epochs: each one
    es.clear();
    for (double e = first; e <= last; ++e) es.push_back(e);
  }
  for (double e : es) {  // whole epochs
    if (e != std::floor(e)) continue;
    text(cr, px(e), bottom + 16, fmt::format("{}", static_cast<int64_t>(e)), 11, false, 0.5);
  }
  text(cr, (left + right) / 2, bottom + 32, "epoch", 11, false, 0.5);
  cairo_set_source_rgb(cr, 0.3, 0.3, 0.3);
  cairo_rectangle(cr, left, top, right - left, bottom - top);
  cairo_stroke(cr);

  for (size_t i = 0; i < p.lines.size(); ++i) {
    const Series& s = p.lines[i];
    const double* c = s.name.starts_with("val_") ? kVal : kTrain;
    cairo_set_source_rgb(cr, c[0], c[1], c[2]);
    cairo_set_line_width(cr, 2);
    for (size_t j = 0; j < s.x.size(); ++j) (j ? cairo_line_to : cairo_move_to)(cr, px(s.x[j]), py(s.y[j]));
    cairo_stroke(cr);
    for (size_t j = 0; s.x.size() <= 30 && j < s.x.size(); ++j) {  // points, while they are few
      cairo_arc(cr, px(s.x[j]), py(s.y[j]), 2.5, 0, 2 * M_PI);
      cairo_fill(cr);
    }
    const double ly = top + 14 + 16 * static_cast<double>(i);  // legend, top right
    cairo_move_to(cr, right - 118, ly - 4), cairo_line_to(cr, right - 96, ly - 4), cairo_stroke(cr);
    cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
    const char* label = s.name == "learning_rate" ? "learning rate" : s.name.starts_with("val_") ? "validation" : "training";
    text(cr, right - 90, ly, label, 11, false, 0);
  }
}

void draw(const std::vector<Panel>& panels, int64_t epochs, const std::string& title, const std::string& path,
          bool png) {
  const int rows = static_cast<int>((panels.size() + kColumns - 1) / kColumns);
  const int w = kPanelW * kColumns, h = kPanelH * rows + 40;
  cairo_surface_t* surface = png ? cairo_image_surface_create(CAIRO_FORMAT_RGB24, w, h)
                                 : cairo_svg_surface_create(path.c_str(), w, h);
  cairo_t* cr = cairo_create(surface);
  cairo_set_source_rgb(cr, 1, 1, 1);
  cairo_paint(cr);
  cairo_set_source_rgb(cr, 0, 0, 0);
  text(cr, 12, 26, title, 15, true, 0);
  for (size_t i = 0; i < panels.size(); ++i)
    draw_panel(cr, panels[i], static_cast<double>(kPanelW * (i % kColumns)), 40.0 + kPanelH * (i / kColumns), epochs);
  cairo_destroy(cr);
  cairo_status_t st = cairo_surface_status(surface);
  if (png && st == CAIRO_STATUS_SUCCESS) st = cairo_surface_write_to_png(surface, path.c_str());
  cairo_surface_finish(surface);  // an SVG is written out here
  if (st == CAIRO_STATUS_SUCCESS) st = cairo_surface_status(surface);
  cairo_surface_destroy(surface);
  if (st != CAIRO_STATUS_SUCCESS)
    throw RuntimeError(fmt::format("{}: cannot write the picture ({})", path, cairo_status_to_string(st)));
}
#endif

}  // namespace

int cmd_plot(const CommandArgs& a) {
  if (a.args.size() != 1) throw UsageError("plot takes one run directory: rnntrain plot RUN_DIR [-o curves.svg]");
  const std::string run = a.args[0], history = (fs::path(run) / "history.json").string();
  const std::string out = a.output.empty() ? (fs::path(run) / "curves.svg").string() : a.output;
  const std::string ext = fs::path(out).extension().string();
  if (ext != ".svg" && ext != ".png")
    throw UsageError(fmt::format("-o {}: the picture is an .svg or a .png file", out));
  const std::string text = read_text(history);
  if (text.empty())
    throw DataError(fmt::format("{}: no training history here; `rnntrain train` writes it after each epoch (is {} a run "
                                "directory?)", history, run));
  History h;
  try {
    h = History::from_json(text);
  } catch (const DataError&) {
    throw DataError(fmt::format("{}: damaged (not Keras' history: a JSON object with a list of epochs)", history));
  }
  const std::vector<Panel> panels = panels_of(h);
  if (panels.empty()) throw DataError(fmt::format("{}: no epoch has finished yet: nothing to plot", history));
#ifdef RNNTRAIN_HAVE_CAIRO
  write_atomically(out, [&](const std::string& tmp) {
    draw(panels, static_cast<int64_t>(h.epochs.size()), fmt::format("{} ({} epochs)", run, h.epochs.size()), tmp,
         ext == ".png");
  });
  log_info("plot: {} panels of {} epochs in {}", panels.size(), h.epochs.size(), out);
  return 0;
#else
  throw UsageError("this rnntrain was built without cairo, which draws the plot: install libcairo2-dev "
                   "(scripts/setup.sh) and rebuild; history.csv holds the same numbers");
#endif
}

}  // namespace rnntrain
