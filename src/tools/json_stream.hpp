// SPDX-License-Identifier: MIT
// One JSON document written as it is produced, for outputs that grow with
// the input (`dump --json` of a large library): memory stays bounded by the
// largest single value, not by the document.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdio>
#include <type_traits>
#include <string>
#include <string_view>
#include <vector>

#include "render.hpp"

namespace sframe::tools {

/// Writes one JSON document to a stdio stream as it goes, laid out as
/// nlohmann's dump(indent) lays out the whole document (two-space indent
/// unless given), so a streamed document reads byte for byte as the same
/// document built in memory. Containers are opened and closed in order; members and array
/// elements are written whole from a Json value. Output is buffered and
/// written when the buffer passes 256 KiB and by finish().
///
/// Usage errors (a key outside an object, an end() with nothing open) are
/// programming errors and throw std::logic_error.
class JsonStream {
 public:
  /// `indent`: spaces per level (`gen` with several files writes 1).
  explicit JsonStream(std::FILE* out = stdout, unsigned indent = 2);
  JsonStream(const JsonStream&) = delete;
  JsonStream& operator=(const JsonStream&) = delete;
  /// Writes what is buffered; does not close open containers (finish()
  /// does).
  ~JsonStream();

  /// Opens an object or an array: as the document itself, an element of
  /// the enclosing array, or the value of the key given last.
  void begin_object();
  void begin_array();
  /// Names the next value of the enclosing object.
  void key(std::string_view k);
  /// Writes a whole value (as the document, an element, or after key()).
  void value(const Json& v);
  /// Scalars, written directly (no Json built), as dump(2) writes them.
  void value(std::string_view v);
  void value(const std::string& v) { value(std::string_view(v)); }
  void value(const char* v) { value(std::string_view(v)); }
  void value(bool v);
  void value(std::nullptr_t);
  template <std::integral T>
    requires(!std::same_as<T, bool>)
  void value(T v) {
    before_value();
    if constexpr (std::is_signed_v<T>) {
      append_signed(static_cast<long long>(v));
    } else {
      append_unsigned(static_cast<unsigned long long>(v));
    }
  }
  /// key(k) then value(v).
  template <class T>
  void member(std::string_view k, const T& v) {
    key(k);
    value(v);
  }
  /// Closes the innermost open container.
  void end();
  /// Containers open (0: the document is complete or not begun).
  std::size_t depth() const { return levels_.size(); }
  /// Whether the innermost open container is an object.
  bool in_object() const { return !levels_.empty() && levels_.back().object; }
  /// Closes every open container, ends the document with a newline and
  /// writes everything out. After an error mid-document the caller adds
  /// its `error` member to the top object first (see close_with_error()).
  void finish();
  /// Closes every container but the top-level object, adds `"error": why`
  /// to it as its last member, and finish()es: a document cut by a failure
  /// stays one valid document with the error last (docs/json.md).
  void close_with_error(const std::string& why);

 private:
  struct Level {
    bool object = false;
    bool empty = true;
  };
  void before_value();
  void indent(std::size_t depth);
  void append_string(std::string_view v);
  void append_signed(long long v);
  void append_unsigned(unsigned long long v);
  void flush_if_full();
  void flush();

  std::FILE* out_;
  unsigned indent_;
  std::string buf_;
  std::vector<Level> levels_;
  bool keyed_ = false;  // key() written, its value not yet
};

/// The same calls as JsonStream, building a Json in memory instead: one
/// writer function, templated on its output, describes a JSON object for
/// both the streamed documents and the ones built whole (render.cpp).
class JsonBuilder {
 public:
  void begin_object() { open(Json::object()); }
  void begin_array() { open(Json::array()); }
  void key(std::string_view k) { key_ = std::string(k); }
  template <class T>
  void value(const T& v) {
    place(Json(v));
  }
  void value(std::string_view v) { place(Json(std::string(v))); }
  template <class T>
  void member(std::string_view k, const T& v) {
    key(k);
    value(v);
  }
  void end() { path_.pop_back(); }
  /// The value built (the outermost one).
  Json take() { return std::move(root_); }

 private:
  Json& place(Json v);
  void open(Json v) { path_.push_back(&place(std::move(v))); }

  Json root_;
  std::vector<Json*> path_;  // the open containers, outermost first
  std::string key_;
};

}  // namespace sframe::tools
