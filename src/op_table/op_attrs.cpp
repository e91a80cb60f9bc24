// Printing, cache keys and checked access of the typed op attributes (op_table/op_attrs.h).
#include "op_table/op_attrs.h"

#include <array>
#include <bit>
#include <utility>
#include <type_traits>

#include "ember/error.h"
#include <fmt/format.h>

#include <nlohmann/json.hpp>

namespace ember {

namespace {

// For the static_asserts of branches no alternative reaches.
template <class>
[[maybe_unused]] constexpr bool kAlwaysFalse = false;

std::string list(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

std::string pair(const IntPair& p) { return fmt::format("({}, {})", p.h, p.w); }

std::string conv_str(const Conv2dOptions& c) {
  return fmt::format("stride {}, padding (top {}, left {}, bottom {}, right {}), dilation {}, groups {}",
                     pair(c.stride), c.padding.top, c.padding.left, c.padding.bottom, c.padding.right,
                     pair(c.dilation), c.groups);
}

void conv_key(const Conv2dOptions& c, std::vector<int64_t>& k) {
  k.insert(k.end(), {c.stride.h, c.stride.w, c.padding.top, c.padding.left, c.padding.bottom, c.padding.right,
                     c.dilation.h, c.dilation.w, c.groups});
}

}  // namespace

const char* params_name(const OpParams& p) {
  return std::visit(
      [](const auto& a) -> const char* {
        using T = std::decay_t<decltype(a)>;
        if constexpr (std::is_same_v<T, std::monostate>) return "no attributes";
        else if constexpr (std::is_same_v<T, ReduceAttrs>) return "ReduceAttrs";
        else if constexpr (std::is_same_v<T, PermuteAttrs>) return "PermuteAttrs";
        else if constexpr (std::is_same_v<T, SliceAttrs>) return "SliceAttrs";
        else if constexpr (std::is_same_v<T, AxisAttrs>) return "AxisAttrs";
        else if constexpr (std::is_same_v<T, Conv2dOptions>) return "Conv2dOptions";
        else if constexpr (std::is_same_v<T, Pool2dOptions>) return "Pool2dOptions";
        else if constexpr (std::is_same_v<T, SortAttrs>) return "SortAttrs";
        else if constexpr (std::is_same_v<T, ScanAttrs>) return "ScanAttrs";
        else if constexpr (std::is_same_v<T, AttentionAttrs>) return "AttentionAttrs";
        else if constexpr (std::is_same_v<T, EpilogueAttrs>) return "EpilogueAttrs";
        else if constexpr (std::is_same_v<T, OutputAttrs>) return "OutputAttrs";
        else if constexpr (std::is_same_v<T, RecurrenceAttrs>) return "RecurrenceAttrs";
        else static_assert(kAlwaysFalse<T>, "a new params struct needs its name here");
      },
      p);
}

const char* params_name_at(size_t index) {
  static const auto names = []<size_t... I>(std::index_sequence<I...>) {
    return std::array<const char*, sizeof...(I)>{params_name(OpParams(std::in_place_index<I>))...};
  }(std::make_index_sequence<std::variant_size_v<OpParams>>{});
  return index < names.size() ? names[index] : "?";
}

std::string describe(const OpParams& p) {
  return std::visit(
      [](const auto& a) -> std::string {
        using T = std::decay_t<decltype(a)>;
        if constexpr (std::is_same_v<T, std::monostate>) {
          return "";
        } else if constexpr (std::is_same_v<T, ReduceAttrs>) {
          return "dims " + list(a.dims);
        } else if constexpr (std::is_same_v<T, PermuteAttrs>) {
          return "order " + list(a.order);
        } else if constexpr (std::is_same_v<T, SliceAttrs>) {
          return "start " + list(a.start) + ", step " + list(a.step);
        } else if constexpr (std::is_same_v<T, AxisAttrs>) {
          return fmt::format("dim {}", a.dim);
        } else if constexpr (std::is_same_v<T, Conv2dOptions>) {
          return conv_str(a);
        } else if constexpr (std::is_same_v<T, Pool2dOptions>) {
          return fmt::format("kernel {}, stride {}, padding {}, count_include_pad {}", pair(a.kernel), pair(a.stride),
                             pair(a.padding), a.count_include_pad);
        } else if constexpr (std::is_same_v<T, SortAttrs>) {
          return fmt::format("dim {}, descending {}, k {}", a.dim, a.descending, a.k);
        } else if constexpr (std::is_same_v<T, ScanAttrs>) {
          return fmt::format("dim {}, reverse {}", a.dim, a.reverse);
        } else if constexpr (std::is_same_v<T, AttentionAttrs>) {
          return fmt::format("scale {}, causal {}", a.scale, a.causal);
        } else if constexpr (std::is_same_v<T, EpilogueAttrs>) {
          std::string s = fmt::format("bias {}, {} post-ops", a.has_bias, a.ops.size());
          for (const PostOp& o : a.ops)
            s += fmt::format(" [kind {} input {} alpha {} beta {}]", o.kind, o.input, o.alpha, o.beta);
          return s + ", conv " + conv_str(a.conv) +
                 fmt::format(", pool kernel {}, stride {}, padding {}", pair(a.pool.kernel), pair(a.pool.stride),
                             pair(a.pool.padding));
        } else if constexpr (std::is_same_v<T, OutputAttrs>) {
          return fmt::format("output {}", a.index);
        } else if constexpr (std::is_same_v<T, RecurrenceAttrs>) {
          return fmt::format("reverse {}", a.reverse);
        } else {
          static_assert(kAlwaysFalse<T>, "a new params struct needs describe()");
        }
      },
      p);
}

void append_key(const OpParams& p, std::vector<int64_t>& k) {
  k.push_back(int64_t(p.index()));
  std::visit(
      [&k](const auto& a) {
        using T = std::decay_t<decltype(a)>;
        auto put_list = [&k](const std::vector<int64_t>& v) {
          k.push_back(int64_t(v.size()));
          k.insert(k.end(), v.begin(), v.end());
        };
        if constexpr (std::is_same_v<T, std::monostate>) {
        } else if constexpr (std::is_same_v<T, ReduceAttrs>) {
          put_list(a.dims);
        } else if constexpr (std::is_same_v<T, PermuteAttrs>) {
          put_list(a.order);
        } else if constexpr (std::is_same_v<T, SliceAttrs>) {
          put_list(a.start);
          put_list(a.step);
        } else if constexpr (std::is_same_v<T, AxisAttrs>) {
          k.push_back(a.dim);
        } else if constexpr (std::is_same_v<T, Conv2dOptions>) {
          conv_key(a, k);
        } else if constexpr (std::is_same_v<T, Pool2dOptions>) {
          k.insert(k.end(), {a.kernel.h, a.kernel.w, a.stride.h, a.stride.w, a.padding.h, a.padding.w,
                             int64_t(a.count_include_pad)});
        } else if constexpr (std::is_same_v<T, SortAttrs>) {
          k.insert(k.end(), {a.dim, int64_t(a.descending), a.k});
        } else if constexpr (std::is_same_v<T, ScanAttrs>) {
          k.insert(k.end(), {a.dim, int64_t(a.reverse)});
        } else if constexpr (std::is_same_v<T, AttentionAttrs>) {
          k.insert(k.end(), {std::bit_cast<int64_t>(a.scale), int64_t(a.causal)});
        } else if constexpr (std::is_same_v<T, EpilogueAttrs>) {
          k.push_back(int64_t(a.has_bias));
          conv_key(a.conv, k);
          k.push_back(int64_t(a.ops.size()));
          for (const PostOp& o : a.ops)
            k.insert(k.end(), {o.kind, o.input, std::bit_cast<int64_t>(o.alpha), std::bit_cast<int64_t>(o.beta)});
          k.insert(k.end(), {a.pool.kernel.h, a.pool.kernel.w, a.pool.stride.h, a.pool.stride.w, a.pool.padding.h,
                             a.pool.padding.w});
        } else if constexpr (std::is_same_v<T, OutputAttrs>) {
          k.push_back(a.index);
        } else if constexpr (std::is_same_v<T, RecurrenceAttrs>) {
          k.push_back(int64_t(a.reverse));
        } else {
          static_assert(kAlwaysFalse<T>, "a new params struct needs append_key()");
        }
      },
      p);
}

namespace {

using json = nlohmann::json;

json pair_json(const IntPair& p) { return json{p.h, p.w}; }
json padding_json(const Padding2d& p) { return json{{"top", p.top}, {"left", p.left}, {"bottom", p.bottom}, {"right", p.right}}; }
json pool_json(const Pool2dOptions& a) {
  return {{"kernel", pair_json(a.kernel)}, {"stride", pair_json(a.stride)}, {"padding", pair_json(a.padding)},
          {"count_include_pad", a.count_include_pad}};
}
json conv_json(const Conv2dOptions& c) {
  return json{{"stride", pair_json(c.stride)}, {"padding", padding_json(c.padding)}, {"dilation", pair_json(c.dilation)},
              {"groups", c.groups}};
}

// Reads field `key` of `j`, naming it in the error.
template <class T>
T field(const json& j, const char* key) {
  if (!j.is_object() || !j.contains(key)) throw Error(fmt::format("op attributes: missing field '{}' in {}", key, j.dump()));
  try {
    return j.at(key).get<T>();
  } catch (const json::exception& e) {
    throw Error(fmt::format("op attributes: field '{}' of {}: {}", key, j.dump(), e.what()));
  }
}
IntPair pair_field(const json& j, const char* key) {
  const auto v = field<std::vector<int64_t>>(j, key);
  if (v.size() != 2) throw Error(fmt::format("op attributes: field '{}' must hold 2 numbers, got {}", key, j.at(key).dump()));
  return {v[0], v[1]};
}
Conv2dOptions conv_from(const json& j) {
  const json& p = j.contains("padding") ? j.at("padding") : json();
  return {.stride = pair_field(j, "stride"),
          .padding = Padding2d(field<int64_t>(p, "top"), field<int64_t>(p, "bottom"), field<int64_t>(p, "left"),
                               field<int64_t>(p, "right")),
          .dilation = pair_field(j, "dilation"),
          .groups = field<int64_t>(j, "groups")};
}

Pool2dOptions pool_from(const json& j) {
  return {.kernel = pair_field(j, "kernel"), .stride = pair_field(j, "stride"), .padding = pair_field(j, "padding"),
          .count_include_pad = field<bool>(j, "count_include_pad")};
}

}  // namespace

std::string params_json(const OpParams& p) {
  json j = std::visit(
      [](const auto& a) -> json {
        using T = std::decay_t<decltype(a)>;
        if constexpr (std::is_same_v<T, std::monostate>) return json::object();
        else if constexpr (std::is_same_v<T, ReduceAttrs>) return {{"dims", a.dims}};
        else if constexpr (std::is_same_v<T, PermuteAttrs>) return {{"order", a.order}};
        else if constexpr (std::is_same_v<T, SliceAttrs>) return {{"start", a.start}, {"step", a.step}};
        else if constexpr (std::is_same_v<T, AxisAttrs>) return {{"dim", a.dim}};
        else if constexpr (std::is_same_v<T, Conv2dOptions>) return conv_json(a);
        else if constexpr (std::is_same_v<T, Pool2dOptions>) return pool_json(a);
        else if constexpr (std::is_same_v<T, SortAttrs>) return {{"dim", a.dim}, {"descending", a.descending}, {"k", a.k}};
        else if constexpr (std::is_same_v<T, ScanAttrs>) return {{"dim", a.dim}, {"reverse", a.reverse}};
        else if constexpr (std::is_same_v<T, AttentionAttrs>) return {{"scale", a.scale}, {"causal", a.causal}};
        else if constexpr (std::is_same_v<T, EpilogueAttrs>) {
          json ops = json::array();
          for (const PostOp& o : a.ops) ops.push_back({{"kind", o.kind}, {"input", o.input}, {"alpha", o.alpha}, {"beta", o.beta}});
          return {{"has_bias", a.has_bias}, {"conv", conv_json(a.conv)}, {"ops", ops}, {"pool", pool_json(a.pool)}};
        } else if constexpr (std::is_same_v<T, OutputAttrs>) {
          return {{"index", a.index}};
        } else if constexpr (std::is_same_v<T, RecurrenceAttrs>) {
          return {{"reverse", a.reverse}};
        } else {
          static_assert(kAlwaysFalse<T>, "a new params struct needs params_json()");
        }
      },
      p);
  j["type"] = params_name(p);
  return j.dump();
}

OpParams params_from_json(const std::string& text) {
  const json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) throw Error(fmt::format("op attributes: not a JSON object: {}", text));
  const std::string type = field<std::string>(j, "type");
  if (type == "no attributes") return NoAttrs{};
  if (type == "ReduceAttrs") return ReduceAttrs{field<std::vector<int64_t>>(j, "dims")};
  if (type == "PermuteAttrs") return PermuteAttrs{field<std::vector<int64_t>>(j, "order")};
  if (type == "SliceAttrs") {
    SliceAttrs s{field<std::vector<int64_t>>(j, "start"), field<std::vector<int64_t>>(j, "step")};
    if (s.start.size() != s.step.size())
      throw Error(fmt::format("op attributes: SliceAttrs has {} starts and {} steps", s.start.size(), s.step.size()));
    return s;
  }
  if (type == "AxisAttrs") return AxisAttrs{field<int64_t>(j, "dim")};
  if (type == "Conv2dOptions") return conv_from(j);
  if (type == "Pool2dOptions") return pool_from(j);
  if (type == "SortAttrs") return SortAttrs{field<int64_t>(j, "dim"), field<bool>(j, "descending"), field<int64_t>(j, "k")};
  if (type == "ScanAttrs") return ScanAttrs{field<int64_t>(j, "dim"), field<bool>(j, "reverse")};
  if (type == "AttentionAttrs") return AttentionAttrs{field<double>(j, "scale"), field<bool>(j, "causal")};
  if (type == "EpilogueAttrs") {
    EpilogueAttrs e{.has_bias = field<bool>(j, "has_bias"), .conv = conv_from(field<json>(j, "conv")),
                    .pool = pool_from(field<json>(j, "pool"))};
    for (const json& o : field<json>(j, "ops"))
      e.ops.push_back({field<int32_t>(o, "kind"), field<int32_t>(o, "input"), field<double>(o, "alpha"), field<double>(o, "beta")});
    return e;
  }
  if (type == "OutputAttrs") return OutputAttrs{field<int64_t>(j, "index")};
  if (type == "RecurrenceAttrs") return RecurrenceAttrs{field<bool>(j, "reverse")};
  throw Error(fmt::format("op attributes: unknown type '{}'", type));
}

void wrong_params(const OpParams& p, const char* expected) {
  throw Error(fmt::format("internal error: an op's attributes hold {}, its rule expects {}", params_name(p), expected));
}

}  // namespace ember
