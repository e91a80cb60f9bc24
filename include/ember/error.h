// ember::Error: the one exception type Ember throws. Messages name the op, the values involved
// and, where known, the user's source line that created the failing op.
#pragma once

#include <stdexcept>
#include <string>

namespace ember {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// The place in the user's code that called an op. Like std::source_location, but built on the
// compiler builtins that both g++ 12 and clang 14 provide (clang 14 cannot use libstdc++'s
// <source_location>). Taken as a defaulted last parameter, it records the caller's line.
struct Loc {
  const char* file = "";
  unsigned line_ = 0;
  static constexpr Loc current(const char* file = __builtin_FILE(), unsigned line = __builtin_LINE()) noexcept {
    return Loc{file, line};
  }
  constexpr const char* file_name() const noexcept { return file; }
  constexpr unsigned line() const noexcept { return line_; }
};

// "file.cpp:12" for a source location (file name without directories).
std::string format_location(const Loc& loc);

// A layer (or other library function) running on behalf of the user's call at `loc`. While one is
// open on this thread, the ops that Ember's own source files make record the user's line instead
// of a line inside Ember, and their errors name the layer:
//   "Conv2d: conv2d: kernel (5, 5) is larger than the padded input (4, 4) (at model.cpp:42)".
// Ops written in the user's files (a user module inside a Sequential) keep their own lines. A
// scope opened from inside Ember (the Linear layers of a MultiheadAttention) keeps the outer
// user line and layer name, so the error names the line and the layer the user actually called.
class UserCall {
 public:
  UserCall(const char* layer, Loc loc) noexcept;
  ~UserCall();
  UserCall(const UserCall&) = delete;
  UserCall& operator=(const UserCall&) = delete;

  Loc loc() const noexcept { return loc_; }                       // the user's line
  const char* called_layer() const noexcept { return outer_; }  // the layer the user called
  // "Linear: expected input [..., 9216], got [2, 10816] (at model.cpp:42)"; a nested layer's
  // error is prefixed by the layer the user called ("TransformerEncoderLayer: MultiheadAttention: ...").
  [[nodiscard]] Error error(const std::string& message) const;

 private:
  const char* layer_;
  const char* outer_;  // the layer the user called (this one unless opened from inside Ember)
  Loc loc_;
  const UserCall* previous_;
};

// Where an op made at `loc` is reported: inside an open UserCall and in Ember's own files, the
// user's line; otherwise `loc` itself. attributed_layer() is that UserCall's layer, or null.
Loc attributed_location(Loc loc) noexcept;
const char* attributed_layer(Loc loc) noexcept;
// An error message completed with its place: "<message> (at file:line)", or with the layer
// prefixed when the op runs inside a layer the user called ("Conv2d: <message> (at model.cpp:42)").
std::string with_location(const std::string& message, Loc loc);

}  // namespace ember
