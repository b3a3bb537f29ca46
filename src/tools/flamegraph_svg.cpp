// SPDX-License-Identifier: MIT
#include "flamegraph_svg.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <charconv>
#include <concepts>
#include <cstring>
#include <cmath>
#include <cstdint>
#include <string_view>
#include <vector>

namespace sframe::tools::profile {
namespace {

// The name of a frame without one ("[unknown]") in the name tree.
constexpr std::uint32_t kUnknown = Profile::kNone;

// Appends `s` (UTF-8: valid_utf8()) as XML character data or attribute
// text, at most `max_chars` characters: the five special characters as
// entities, the control characters XML 1.0 does not allow as U+FFFD.
void put_escaped(std::string& out, std::string_view s, std::size_t max_chars = std::string_view::npos) {
  std::size_t chars = 0, i = 0;
  std::size_t plain = 0;  // where the bytes not yet appended begin: appended in runs
  for (; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    // A character ends where the next begins (continuation bytes go with
    // their lead byte).
    if ((c & 0xc0) != 0x80 && chars++ == max_chars) break;
    std::string_view entity;
    switch (c) {
      case '&': entity = "&amp;"; break;
      case '<': entity = "&lt;"; break;
      case '>': entity = "&gt;"; break;
      case '"': entity = "&quot;"; break;
      case '\'': entity = "&#39;"; break;
      default:
        if (c < 0x20 && c != '\t') entity = "\xef\xbf\xbd";
    }
    if (entity.empty()) continue;
    out.append(s.substr(plain, i - plain));
    out.append(entity);
    plain = i + 1;
  }
  out.append(s.substr(plain, i - plain));
}

// A warm colour from the name (flamegraph.pl's default palette), the same
// for the same name in every graph.

// Writes text and unsigned integers (in decimal, as fmt writes them) at
// `p`, which has room for them (see room()): the frames' markup, written
// through fmt (run-time or compiled format strings) or appended to a
// std::string piece by piece, was most of the writer's time.
template <std::size_t N>
void put(char*& p, const char (&s)[N]) {
  std::memcpy(p, s, N - 1);
  p += N - 1;
}
void put(char*& p, std::string_view s) {
  std::memcpy(p, s.data(), s.size());
  p += s.size();
}
constexpr std::size_t kDigits = 20;  // of 2^64 - 1
template <std::unsigned_integral U>
void put(char*& p, U v) {
  p = std::to_chars(p, p + kDigits, v).ptr;
}
template <std::size_t N>
constexpr std::size_t room(const char (&)[N]) {
  return N - 1;
}
inline std::size_t room(std::string_view s) { return s.size(); }
template <std::unsigned_integral U>
constexpr std::size_t room(U) {
  return kDigits;
}
// Appends the parts to `out`.
template <class... Parts>
void append(std::string& out, const Parts&... parts) {
  const std::size_t at = out.size();
  out.resize(at + (room(parts) + ...));
  char* p = out.data() + at;
  (put(p, parts), ...);
  out.resize(static_cast<std::size_t>(p - out.data()));
}

struct Colour {
  unsigned r, g, b;
};
Colour colour(std::string_view name) {
  std::uint32_t h = 2166136261u;  // FNV-1a
  for (char c : name) h = (h ^ static_cast<unsigned char>(c)) * 16777619u;
  return {205 + (h % 50), (h >> 8) % 230, (h >> 16) % 55};
}

// The viewer's script: zoom (click, #zoom=ID, #zoom-name=NAME), search (the
// box, #search=REGEX), the details line. Frames carry their sample offset
// and count, so zooming is arithmetic on those, no layout kept in script.
constexpr std::string_view kScript = R"JS(
"use strict";
(function () {
  var svg = document.documentElement;
  var total = +svg.getAttribute("data-total");
  var px = +svg.getAttribute("data-plot-x"), pw = +svg.getAttribute("data-plot-width");
  var frames = Array.prototype.slice.call(document.querySelectorAll("g.f"));
  var details = document.getElementById("details");
  var matched = document.getElementById("matched");
  var reset = document.getElementById("unzoom");
  function nameOf(g) { var t = g.querySelector("title").textContent; return t.slice(0, t.lastIndexOf(" (")); }
  function place(g, x0, n0) {
    var x = +g.getAttribute("data-x"), n = +g.getAttribute("data-n");
    var r = g.querySelector("rect"), t = g.querySelector("text");
    var lo = Math.max(x, x0), hi = Math.min(x + n, x0 + n0);
    if (hi <= lo) { g.style.display = "none"; return; }
    g.style.display = "";
    var rx = px + (lo - x0) / n0 * pw, w = (hi - lo) / n0 * pw;
    r.setAttribute("x", rx.toFixed(2));
    r.setAttribute("width", w.toFixed(2));
    t.setAttribute("x", (rx + 3).toFixed(2));
    var name = nameOf(g), fit = Math.floor((w - 6) / 7);
    t.textContent = fit < 3 ? "" : name.length <= fit ? name : name.slice(0, fit - 2) + "..";
  }
  function zoom(g) {
    var x = +g.getAttribute("data-x"), n = +g.getAttribute("data-n"), d = +g.getAttribute("data-d");
    frames.forEach(function (f) {
      var fd = +f.getAttribute("data-d"), fx = +f.getAttribute("data-x"), fn = +f.getAttribute("data-n");
      if (fd < d) { if (fx <= x && fx + fn >= x + n) place(f, fx, fn); else f.style.display = "none"; }
      else place(f, x, n);
    });
    reset.style.opacity = d === 0 ? "0" : "1";
  }
  function search(re) {
    var hit = [], sum = 0, marks = [];
    frames.forEach(function (f) {
      var r = f.querySelector("rect");
      if (!r.hasAttribute("data-fill")) r.setAttribute("data-fill", r.getAttribute("fill"));
      var on = re !== null && re.test(nameOf(f));
      r.setAttribute("fill", on ? "rgb(230,0,230)" : r.getAttribute("data-fill"));
      if (on) hit.push(f);
    });
    // Matched share: the samples of the outermost matching frames.
    hit.forEach(function (f) {
      var x = +f.getAttribute("data-x"), n = +f.getAttribute("data-n");
      if (!marks.some(function (m) { return x >= m[0] && x + n <= m[1]; })) { marks.push([x, x + n]); sum += n; }
    });
    matched.textContent = re === null ? "" : "Matched: " + (total ? (100 * sum / total).toFixed(2) : "0.00") + "%";
  }
  function regex(s) { try { return s ? new RegExp(s) : null; } catch (e) { return null; } }
  frames.forEach(function (g) {
    g.addEventListener("click", function () { zoom(g); });
    g.addEventListener("mouseover", function () { details.textContent = g.querySelector("title").textContent; });
    g.addEventListener("mouseout", function () { details.textContent = " "; });
  });
  reset.addEventListener("click", function () { zoom(document.getElementById("f0")); });
  var box = document.getElementById("search");
  if (box) box.addEventListener("input", function () { search(regex(box.value)); });
  function fromHash() {
    var h = decodeURIComponent(location.hash.slice(1)), m;
    if ((m = /^zoom=(.*)$/.exec(h)) && document.getElementById(m[1])) zoom(document.getElementById(m[1]));
    else if ((m = /^zoom-name=([\s\S]*)$/.exec(h))) {
      var best = null;
      frames.forEach(function (f) { if (nameOf(f) === m[1] && (!best || +f.getAttribute("data-n") > +best.getAttribute("data-n"))) best = f; });
      if (best) zoom(best);
    } else if ((m = /^search=([\s\S]*)$/.exec(h))) { if (box) box.value = m[1]; search(regex(m[1])); }
  }
  window.addEventListener("hashchange", fromHash);
  fromHash();
})();
)JS";

}  // namespace

std::string flamegraph_svg(const Profile& p, const FlameGraphOptions& opt) {
  // The call paths by name: comm, then function names outermost first;
  // node 0 the root.
  std::vector<std::uint32_t> root_name(p.roots().size()), frame_name(p.frames().size());
  for (std::size_t i = 0; i < root_name.size(); ++i) root_name[i] = p.roots()[i].comm;
  for (std::size_t i = 0; i < frame_name.size(); ++i)
    frame_name[i] = p.frames()[i].function == 0 ? kUnknown : p.frames()[i].function;
  std::vector<NameNode> tree = name_tree(p, root_name, frame_name);
  // From here on, a node's count is its total: its own samples and its
  // callees' (children come after their parents).
  for (std::size_t i = tree.size(); i-- > 1;) tree[tree[i].parent].count += tree[i].count;
  const auto name_of = [&](const NameNode& n) -> std::string_view {
    return &n == &tree[0] ? std::string_view("all") : n.name == kUnknown ? std::string_view("[unknown]")
                                                                          : std::string_view(p.strings()[n.name]);
  };
  // A frame's callees by name (flamegraph.pl's order), sorted when drawn.
  std::vector<std::uint32_t> kids;
  const auto children_of = [&](const NameNode& n) {
    kids.clear();
    for (std::uint32_t c = n.first_child; c != Profile::kNone; c = tree[c].next_sibling) kids.push_back(c);
    std::sort(kids.begin(), kids.end(),
              [&](std::uint32_t a, std::uint32_t b) { return name_of(tree[a]) < name_of(tree[b]); });
    return kids;
  };

  const unsigned width = std::max(opt.width, 200u);
  const double pad = 10, plot = width - 2 * pad;
  const std::uint64_t total = tree[0].count;
  const auto px_of = [&](std::uint64_t n) { return total ? double(n) / double(total) * plot : plot; };

  // The frames drawn at threshold `t`, in preorder, with their sample
  // offsets; and the bytes they will take, roughly.
  struct Drawn {
    std::uint32_t node;
    std::uint32_t depth;  // root 0
    std::uint64_t x;
  };
  std::vector<Drawn> drawn;
  std::vector<Drawn> stack;
  double min_width = opt.min_width;
  std::uint32_t depth = 0;
  for (;;) {
    drawn.clear();
    depth = 0;
    std::size_t bytes = 0;
    stack.push_back({0, 0, 0});
    while (!stack.empty()) {
      const Drawn d = stack.back();
      stack.pop_back();
      const NameNode& n = tree[d.node];
      if (d.node != 0 && px_of(n.count) < min_width) continue;
      drawn.push_back(d);
      depth = std::max(depth, d.depth);
      const std::size_t name_size = name_of(n).size();
      bytes += 230 + name_size + std::min(name_size, static_cast<std::size_t>(px_of(n.count) / 7));
      // Children side by side from the frame's start (its own samples to
      // their right), pushed last first so that they come out in order.
      const std::vector<std::uint32_t>& sorted = children_of(n);
      std::uint64_t x = d.x;
      for (std::uint32_t c : sorted) x += tree[c].count;
      for (auto c = sorted.rbegin(); c != sorted.rend(); ++c) {
        x -= tree[*c].count;
        stack.push_back({*c, d.depth + 1, x});
      }
    }
    if (bytes <= opt.max_bytes || drawn.size() <= 1) break;
    min_width *= 2;
  }
  const double frame_h = 16;
  const double top = 60;  // title, search box
  const double height = top + (depth + 1) * frame_h + 40;
  std::string out;
  out.reserve(drawn.size() * 200 + 8192);
  fmt::format_to(std::back_inserter(out),
                 "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n"
                 "<svg version=\"1.1\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" "
                 "viewBox=\"0 0 {} {}\" data-total=\"{}\" data-min-width=\"{}\" data-plot-x=\"{}\" "
                 "data-plot-width=\"{}\">\n",
                 width, height, width, height, total, min_width, pad, plot);
  out +=
      "<style>text{font-family:Verdana,sans-serif;font-size:12px;fill:#000}g.f{cursor:pointer}"
      "g.f:hover rect{stroke:#000;stroke-width:0.5}#title{font-size:17px;text-anchor:middle}"
      "#unzoom{cursor:pointer;opacity:0}</style>\n";
  fmt::format_to(std::back_inserter(out), "<rect width=\"100%\" height=\"100%\" fill=\"rgb(250,250,238)\"/>\n");
  out += "<text id=\"title\" x=\"";
  fmt::format_to(std::back_inserter(out), "{}\" y=\"24\">", width / 2.0);
  put_escaped(out, valid_utf8(opt.title));
  fmt::format_to(std::back_inserter(out), " ({} samples)</text>\n", total);
  fmt::format_to(std::back_inserter(out),
                 "<text id=\"unzoom\" x=\"{}\" y=\"48\">Reset zoom</text>\n"
                 "<text id=\"matched\" x=\"{}\" y=\"{}\" text-anchor=\"end\"> </text>\n"
                 "<text id=\"details\" x=\"{}\" y=\"{}\"> </text>\n"
                 "<foreignObject x=\"{}\" y=\"34\" width=\"260\" height=\"22\">"
                 "<input xmlns=\"http://www.w3.org/1999/xhtml\" id=\"search\" type=\"search\" "
                 "placeholder=\"Search (regular expression)\" style=\"width:250px\"/></foreignObject>\n",
                 pad, width - pad, height - 12, pad, height - 12, width - pad - 260);
  std::string name_buf;
  for (const Drawn& d : drawn) {
    const NameNode& n = tree[d.node];
    const std::string_view name = name_of(n);
    const double x = pad + px_of(d.x), w = px_of(n.count);
    // Whole pixels (top and frame_h are): written as integers, which is how
    // fmt writes a double holding one, and the label's baseline half a pixel
    // lower.
    const auto y = static_cast<std::uint64_t>(top + (depth - d.depth) * frame_h);
    name_buf.clear();
    put_escaped(name_buf, name);
    const Colour c = colour(name);
    const Fixed2 share(total ? 100.0 * double(n.count) / double(total) : 0.0), fx(x), fw(w), tx(x + 3);
    append(out, "<g class=\"f\" id=\"f", d.node, "\" data-n=\"", n.count, "\" data-x=\"", d.x, "\" data-d=\"", d.depth,
           "\"><title>", std::string_view(name_buf), " (", n.count, " samples, ", share.view(), "%)</title><rect x=\"", fx.view(),
           "\" y=\"", y, "\" width=\"", fw.view(), "\" height=\"", static_cast<unsigned>(frame_h) - 1,
           "\" fill=\"rgb(", c.r, ",", c.g, ",", c.b, ")\" rx=\"2\"/><text x=\"", tx.view(), "\" y=\"", y + 11,
           ".5\">");
    // The label: as much of the name as fits (about 7 px a character).
    const auto fit = static_cast<std::size_t>(std::max(0.0, (w - 6) / 7));
    if (fit >= 3) {
      if (name.size() <= fit) {
        out += name_buf;
      } else {
        put_escaped(out, name, fit - 2);
        out += "..";
      }
    }
    out += "</text></g>\n";
  }
  out += "<script type=\"text/ecmascript\"><![CDATA[";
  out += kScript;
  out += "]]></script>\n</svg>\n";
  return out;
}

}  // namespace sframe::tools::profile
