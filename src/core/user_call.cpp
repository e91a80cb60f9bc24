// UserCall (include/ember/error.h): the user's line for the ops a layer makes inside Ember.
//
// A layer's forward runs in Ember's files, so the ops it makes would record lines there
// ("conv2d (at conv.cpp:29)"). The layer's call operator takes the caller's Loc and opens a
// UserCall; make_array and the op front ends ask attributed_location() for the line to record.
// Whether a Loc is "inside Ember" is decided by its file: Ember's src/ folder (known from this
// file's own path) or a public header under include/ember/ (in the tree or installed).
#include "ember/error.h"

#include <fmt/format.h>

#include <cstring>
#include <string_view>

namespace ember {

namespace {

thread_local const UserCall* t_user_call = nullptr;

// This file's path up to and including "src/", as the compiler spelled it (absolute, or relative
// to the build folder: user files compiled in the same build are spelled the same way).
std::string_view library_source_prefix() {
  static const std::string_view prefix = [] {
    std::string_view self = __FILE__;
    size_t at = self.rfind("src/core/user_call.cpp");
    return at == std::string_view::npos ? std::string_view{} : self.substr(0, at + 4);
  }();
  return prefix;
}

bool uncached_is_library_file(const char* file) {
  std::string_view f = file;
  std::string_view src = library_source_prefix();
  if (!src.empty() && f.starts_with(src)) return true;
  return f.starts_with("include/ember/") || f.find("/include/ember/") != std::string_view::npos;
}

// File names are string literals, so one pointer remembers the answer for a whole layer's ops.
bool is_library_file(const char* file) {
  thread_local const char* last_file = nullptr;
  thread_local bool last_answer = false;
  if (file != last_file) {
    last_answer = file != nullptr && uncached_is_library_file(file);
    last_file = file;
  }
  return last_answer;
}

}  // namespace

UserCall::UserCall(const char* layer, Loc loc) noexcept
    : layer_(layer), outer_(layer), loc_(loc), previous_(t_user_call) {
  if (previous_ && is_library_file(loc.file_name())) {
    outer_ = previous_->outer_;
    loc_ = previous_->loc_;
  }
  t_user_call = this;
}

UserCall::~UserCall() { t_user_call = previous_; }

Error UserCall::error(const std::string& message) const {
  if (outer_ != layer_)
    return Error(fmt::format("{}: {}: {} (at {})", outer_, layer_, message, format_location(loc_)));
  return Error(fmt::format("{}: {} (at {})", layer_, message, format_location(loc_)));
}

Loc attributed_location(Loc loc) noexcept {
  const UserCall* call = t_user_call;
  if (call == nullptr || !is_library_file(loc.file_name())) return loc;
  return call->loc();
}

const char* attributed_layer(Loc loc) noexcept {
  const UserCall* call = t_user_call;
  if (call == nullptr || !is_library_file(loc.file_name())) return nullptr;
  return call->called_layer();
}

std::string with_location(const std::string& message, Loc loc) {
  if (const char* layer = attributed_layer(loc)) {
    // A message that already starts with the layer's name ("Linear: input dtype ...") keeps it once.
    std::string_view m = message, l = layer;
    bool named = m.size() > l.size() + 1 && m.starts_with(l) && m[l.size()] == ':';
    return fmt::format("{}{}{} (at {})", named ? "" : layer, named ? "" : ": ", message,
                       format_location(attributed_location(loc)));
  }
  return fmt::format("{} (at {})", message, format_location(loc));
}

}  // namespace ember
