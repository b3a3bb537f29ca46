// SPDX-License-Identifier: MIT
#include "json_stream.hpp"

#include <array>
#include <charconv>
#include <stdexcept>

namespace sframe::tools {

JsonStream::JsonStream(std::FILE* out, unsigned indent) : out_(out), indent_(indent) {}

JsonStream::~JsonStream() { flush(); }

void JsonStream::indent(std::size_t depth) {
  static constexpr std::string_view kPad =
      "\n                                                                ";
  const std::size_t n = 1 + indent_ * depth;
  if (n <= kPad.size()) {
    buf_.append(kPad.data(), n);
  } else {
    buf_ += '\n';
    buf_.append(indent_ * depth, ' ');
  }
}

// Before a value or a key: the separator and indent dump(2) puts there.
void JsonStream::before_value() {
  if (keyed_) {
    keyed_ = false;
    return;
  }
  if (levels_.empty()) return;
  Level& l = levels_.back();
  if (l.object) throw std::logic_error("JsonStream: a value in an object needs a key");
  if (!l.empty) buf_ += ',';
  l.empty = false;
  indent(levels_.size());
}

void JsonStream::key(std::string_view k) {
  if (!in_object() || keyed_) throw std::logic_error("JsonStream: a key outside an object");
  Level& l = levels_.back();
  if (!l.empty) buf_ += ',';
  l.empty = false;
  indent(levels_.size());
  append_string(k);
  buf_ += ": ";
  keyed_ = true;
}

void JsonStream::begin_object() {
  before_value();
  buf_ += '{';
  levels_.push_back({true, true});
}

void JsonStream::begin_array() {
  before_value();
  buf_ += '[';
  levels_.push_back({false, true});
}

void JsonStream::value(const Json& v) {
  // dump() indents from column 0; nested here, every line after the first
  // moves right by this depth (JSON strings hold no raw newline).
  const std::string text = json_text(v, static_cast<int>(indent_));
  before_value();
  if (levels_.empty()) {
    buf_ += text;
  } else {
    const std::string pad(indent_ * levels_.size(), ' ');
    std::size_t from = 0;
    for (std::size_t nl; (nl = text.find('\n', from)) != std::string::npos; from = nl + 1) {
      buf_.append(text, from, nl + 1 - from);
      buf_ += pad;
    }
    buf_.append(text, from, std::string::npos);
  }
  flush_if_full();
}

namespace {

// Bytes dump() writes otherwise than as themselves: controls, '"', '\\',
// and (to let nlohmann check the UTF-8) everything past ASCII.
constexpr std::array<bool, 256> kEscaped = [] {
  std::array<bool, 256> t{};
  for (unsigned c = 0; c < 256; ++c) t[c] = c < 0x20 || c >= 0x7f || c == '"' || c == '\\';
  return t;
}();

}  // namespace

void JsonStream::append_string(std::string_view v) {
  for (const char c : v) {
    if (kEscaped[static_cast<unsigned char>(c)]) {
      buf_ += Json(std::string(v)).dump(-1, ' ', false, Json::error_handler_t::replace);
      return;
    }
  }
  buf_ += '"';
  buf_.append(v);
  buf_ += '"';
}

void JsonStream::value(std::string_view v) {
  before_value();
  append_string(v);
  flush_if_full();
}

void JsonStream::value(bool v) {
  before_value();
  buf_ += v ? "true" : "false";
}

void JsonStream::value(std::nullptr_t) {
  before_value();
  buf_ += "null";
}

void JsonStream::append_signed(long long v) {
  char tmp[24];
  const auto r = std::to_chars(tmp, tmp + sizeof tmp, v);
  buf_.append(tmp, r.ptr);
}

void JsonStream::append_unsigned(unsigned long long v) {
  char tmp[24];
  const auto r = std::to_chars(tmp, tmp + sizeof tmp, v);
  buf_.append(tmp, r.ptr);
}

void JsonStream::end() {
  if (levels_.empty() || keyed_) throw std::logic_error("JsonStream: end() with nothing to close");
  const Level l = levels_.back();
  levels_.pop_back();
  if (!l.empty) indent(levels_.size());
  buf_ += l.object ? '}' : ']';
  flush_if_full();
}

void JsonStream::finish() {
  if (keyed_) value(nullptr);
  while (!levels_.empty()) end();
  buf_ += '\n';
  flush();
}

void JsonStream::close_with_error(const std::string& why) {
  if (keyed_) value(nullptr);
  while (levels_.size() > 1) end();
  if (in_object()) member("error", why);
  finish();
}

void JsonStream::flush_if_full() {
  if (buf_.size() >= (256u << 10)) flush();
}

void JsonStream::flush() {
  if (!buf_.empty()) std::fwrite(buf_.data(), 1, buf_.size(), out_);
  buf_.clear();
}

Json& JsonBuilder::place(Json v) {
  if (path_.empty()) {
    root_ = std::move(v);
    return root_;
  }
  Json& top = *path_.back();
  if (top.is_object()) {
    Json& slot = top[key_];
    slot = std::move(v);
    return slot;
  }
  top.push_back(std::move(v));
  return top.back();
}

}  // namespace sframe::tools
