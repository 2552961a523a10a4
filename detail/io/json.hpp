// specdec/detail/io/json.hpp — a small strict JSON reader and writer (config.json, tokenizer.json, safetensors headers).
// SPDX-License-Identifier: MIT
#pragma once

#include <charconv>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "../core/compiled.hpp"
#include "../core/error.hpp"

// Strict RFC 8259: no comments, no trailing commas, no NaN/Infinity, strings must be valid UTF-8
// and duplicate keys are rejected (for a safetensors header a duplicate tensor name is a broken
// file, not a "last one wins"). Every parsed value remembers the origin (a file name) and its
// line:column, so a typed accessor that fails can say where the offending value is.

namespace specdec::json {

enum class Kind { kNull, kBool, kInteger, kDouble, kString, kArray, kObject };

class Value;
struct Member;

using Array = std::vector<Value>;

// ---------------------------------------------------------------------------------------------
// Object: members in insertion order, plus a hash index once it is big enough to matter

/// An object keeps its members in insertion order (tokenizer.json's vocab is written in id
/// order and reads best that way); lookups go through a hash index once there are more than
/// kLinearScanMax members, so a 50k-entry vocab is not scanned per lookup.
class Object {
public:
    Object() = default;

    // Defined below Member: std::vector needs the element type complete when it is used.
    std::size_t size() const;
    bool empty() const;
    const Member* begin() const;
    const Member* end() const;
    Member* begin();
    Member* end();

    /// The member's value, or nullptr when the key is absent.
    const Value* find(std::string_view key) const;
    Value* find(std::string_view key);
    bool contains(std::string_view key) const { return find(key) != nullptr; }

    /// Appends (key, value) unless the key exists; returns whether it was inserted.
    bool insert(std::string key, Value value);
    /// Sets key to value: replaces an existing member in place, otherwise appends.
    void set(std::string key, Value value);

private:
    static constexpr std::size_t kLinearScanMax = 8;

    struct StringHash {
        using is_transparent = void;
        std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
    };

    std::ptrdiff_t index_of(std::string_view key) const;

    std::vector<Member> members_;
    std::unordered_map<std::string, std::size_t, StringHash, std::equal_to<>> index_;  // empty while small
};

// ---------------------------------------------------------------------------------------------
// Value

/// Where a parsed value came from: shared by every value of one document.
struct Location {
    std::shared_ptr<const std::string> origin;  // null for values built in code
    std::uint32_t line = 0;                     // 1-based; 0 when unknown
    std::uint32_t column = 0;                   // 1-based, in bytes
};

class Value {
public:
    // Constructors are defined below Member: building the variant needs every alternative's
    // destructor, and Object's needs Member complete (clang enforces this, gcc is lenient).
    Value();
    Value(std::nullptr_t);
    Value(bool b);
    /// Any integer type except bool; values beyond int64 are refused rather than rounded.
    template <std::integral T>
        requires(!std::same_as<T, bool>)
    Value(T i);
    Value(double d);
    Value(std::string s);
    Value(std::string_view s);
    Value(const char* s);
    Value(Array a);
    Value(Object o);

    Kind kind() const { return static_cast<Kind>(data_.index()); }
    bool is_null() const { return kind() == Kind::kNull; }
    bool is_bool() const { return kind() == Kind::kBool; }
    /// True when the literal was an integer that fits int64 (safetensors offsets are int64).
    bool is_integer() const { return kind() == Kind::kInteger; }
    bool is_number() const { return kind() == Kind::kInteger || kind() == Kind::kDouble; }
    bool is_string() const { return kind() == Kind::kString; }
    bool is_array() const { return kind() == Kind::kArray; }
    bool is_object() const { return kind() == Kind::kObject; }

    bool as_bool() const;
    /// Integers exactly; a double only when it holds an integral value that fits int64.
    std::int64_t as_int() const;
    /// Any number; integers beyond 2^53 round to the nearest double.
    double as_double() const;
    const std::string& as_string() const;
    const Array& as_array() const;
    Array& as_array();
    const Object& as_object() const;
    Object& as_object();

    /// Object member or nullptr when absent (for optional fields); throws if this is not an object.
    const Value* find(std::string_view key) const;
    /// Object member; throws "<origin>: missing field 'key'" when absent.
    const Value& at(std::string_view key) const;

    const Location& location() const { return location_; }
    void set_location(Location location) { location_ = std::move(location); }

    /// "origin:line:col" or "origin" or "json value", for messages.
    std::string where() const;

private:
    template <std::integral T>
    static std::int64_t checked_int64(T i) {
        if constexpr (std::is_unsigned_v<T> && sizeof(T) >= sizeof(std::int64_t)) {
            if (i > static_cast<T>(std::numeric_limits<std::int64_t>::max()))
                detail::fail("json", "integer " + std::to_string(i) + " does not fit int64");
        }
        return static_cast<std::int64_t>(i);
    }

    [[noreturn]] void type_error(std::string_view expected) const;

    // Order matches Kind.
    std::variant<std::nullptr_t, bool, std::int64_t, double, std::string, Array, Object> data_;
    Location location_;
};

struct Member {
    std::string key;
    Value value;
};

inline Value::Value() = default;
inline Value::Value(std::nullptr_t) {}
inline Value::Value(bool b) : data_(b) {}
template <std::integral T>
    requires(!std::same_as<T, bool>)
inline Value::Value(T i) : data_(checked_int64(i)) {}
inline Value::Value(double d) : data_(d) {}
inline Value::Value(std::string s) : data_(std::move(s)) {}
inline Value::Value(std::string_view s) : data_(std::string(s)) {}
inline Value::Value(const char* s) : data_(std::string(s)) {}
inline Value::Value(Array a) : data_(std::move(a)) {}
inline Value::Value(Object o) : data_(std::move(o)) {}

inline const char* kind_name(Kind k) {
    switch (k) {
        case Kind::kNull: return "null";
        case Kind::kBool: return "bool";
        case Kind::kInteger: return "integer";
        case Kind::kDouble: return "number";
        case Kind::kString: return "string";
        case Kind::kArray: return "array";
        case Kind::kObject: return "object";
    }
    return "?";
}

SPECDEC_INLINE std::string dump(const Value& value, int indent = -1);

// ---------------------------------------------------------------------------------------------
// Object and Value members

inline std::size_t Object::size() const { return members_.size(); }
inline bool Object::empty() const { return members_.empty(); }
inline const Member* Object::begin() const { return members_.data(); }
inline const Member* Object::end() const { return members_.data() + members_.size(); }
inline Member* Object::begin() { return members_.data(); }
inline Member* Object::end() { return members_.data() + members_.size(); }

inline std::ptrdiff_t Object::index_of(std::string_view key) const {
    if (index_.empty()) {
        for (std::size_t i = 0; i < members_.size(); ++i)
            if (members_[i].key == key) return static_cast<std::ptrdiff_t>(i);
        return -1;
    }
    auto it = index_.find(key);
    return it == index_.end() ? -1 : static_cast<std::ptrdiff_t>(it->second);
}

inline const Value* Object::find(std::string_view key) const {
    std::ptrdiff_t i = index_of(key);
    return i < 0 ? nullptr : &members_[static_cast<std::size_t>(i)].value;
}

inline Value* Object::find(std::string_view key) {
    std::ptrdiff_t i = index_of(key);
    return i < 0 ? nullptr : &members_[static_cast<std::size_t>(i)].value;
}

inline bool Object::insert(std::string key, Value value) {
    if (index_of(key) >= 0) return false;
    members_.push_back(Member{std::move(key), std::move(value)});
    if (!index_.empty()) {
        index_.emplace(members_.back().key, members_.size() - 1);
    } else if (members_.size() > kLinearScanMax) {
        index_.reserve(members_.size() * 2);
        for (std::size_t i = 0; i < members_.size(); ++i) index_.emplace(members_[i].key, i);
    }
    return true;
}

inline void Object::set(std::string key, Value value) {
    if (Value* existing = find(key)) {
        *existing = std::move(value);
        return;
    }
    insert(std::move(key), std::move(value));
}

}  // namespace specdec::json

namespace specdec::detail {

/// A short rendering of a value for error messages: long strings and containers are cut.
inline std::string json_preview(const json::Value& v) {
    constexpr std::size_t kMax = 40;
    std::string s;
    if (v.is_array())
        s = "array of " + std::to_string(v.as_array().size());
    else if (v.is_object())
        s = "object of " + std::to_string(v.as_object().size());
    else
        s = std::string(json::kind_name(v.kind())) + " " + json::dump(v);
    if (s.size() > kMax) s = s.substr(0, kMax) + "...";
    return s;
}

}  // namespace specdec::detail

namespace specdec::json {

inline std::string Value::where() const {
    if (!location_.origin) return "json value";
    std::string s = *location_.origin;
    if (location_.line > 0) {  // appended piecewise: GCC 12's -Wrestrict misfires on "x" + std::string&& (PR 105651)
        s += ':';
        s += std::to_string(location_.line);
        s += ':';
        s += std::to_string(location_.column);
    }
    return s;
}

inline void Value::type_error(std::string_view expected) const {
    detail::fail("json", where() + ": expected " + std::string(expected) + ", found " + detail::json_preview(*this));
}

inline bool Value::as_bool() const {
    if (!is_bool()) type_error("a bool");
    return std::get<bool>(data_);
}

inline std::int64_t Value::as_int() const {
    if (is_integer()) return std::get<std::int64_t>(data_);
    if (kind() == Kind::kDouble) {
        double d = std::get<double>(data_);
        // 2^63 is exactly representable; anything below it with no fraction converts exactly.
        if (d == std::trunc(d) && d >= -9223372036854775808.0 && d < 9223372036854775808.0)
            return static_cast<std::int64_t>(d);
    }
    type_error("an integer");
}

inline double Value::as_double() const {
    if (is_integer()) return static_cast<double>(std::get<std::int64_t>(data_));
    if (kind() == Kind::kDouble) return std::get<double>(data_);
    type_error("a number");
}

inline const std::string& Value::as_string() const {
    if (!is_string()) type_error("a string");
    return std::get<std::string>(data_);
}

inline const Array& Value::as_array() const {
    if (!is_array()) type_error("an array");
    return std::get<Array>(data_);
}

inline Array& Value::as_array() {
    if (!is_array()) type_error("an array");
    return std::get<Array>(data_);
}

inline const Object& Value::as_object() const {
    if (!is_object()) type_error("an object");
    return std::get<Object>(data_);
}

inline Object& Value::as_object() {
    if (!is_object()) type_error("an object");
    return std::get<Object>(data_);
}

inline const Value* Value::find(std::string_view key) const { return as_object().find(key); }

inline const Value& Value::at(std::string_view key) const {
    if (const Value* v = find(key)) return *v;
    std::string origin = location_.origin ? *location_.origin : std::string("json value");
    std::string object_at;
    if (location_.line > 0)
        object_at = " (object at " + std::to_string(location_.line) + ":" + std::to_string(location_.column) + ")";
    detail::fail("json", origin + ": missing field '" + std::string(key) + "'" + object_at);
}

}  // namespace specdec::json

// ---------------------------------------------------------------------------------------------
// UTF-8 helpers (shared with the tokenizer)

namespace specdec::detail {

/// "0x0A": how a raw byte is named in messages.
inline std::string hex_byte(unsigned char c) {
    constexpr char kDigits[] = "0123456789ABCDEF";
    return std::string("0x") + kDigits[c >> 4] + kDigits[c & 15];
}

/// Appends the UTF-8 encoding of code point cp (cp <= 0x10FFFF, not a surrogate).
inline void append_utf8(std::string& out, char32_t cp) {
    if (cp < 0x80) {
        out += static_cast<char>(cp);
    } else if (cp < 0x800) {
        out += static_cast<char>(0xC0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out += static_cast<char>(0xE0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
        out += static_cast<char>(0xF0 | (cp >> 18));
        out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    }
}

/// One decoded code point and its length in bytes; length 0 means the bytes at `pos` are not
/// well-formed UTF-8 (overlongs, surrogates and values past U+10FFFF are ill-formed too).
struct Utf8Char {
    char32_t cp = 0;
    std::size_t length = 0;
};

inline Utf8Char decode_utf8(std::string_view s, std::size_t pos) {
    auto byte = [&](std::size_t i) { return static_cast<unsigned char>(s[i]); };
    unsigned char b0 = byte(pos);
    if (b0 < 0x80) return {b0, 1};
    std::size_t n;
    char32_t cp;
    char32_t min;
    if ((b0 & 0xE0) == 0xC0) {
        n = 2, cp = b0 & 0x1F, min = 0x80;
    } else if ((b0 & 0xF0) == 0xE0) {
        n = 3, cp = b0 & 0x0F, min = 0x800;
    } else if ((b0 & 0xF8) == 0xF0) {
        n = 4, cp = b0 & 0x07, min = 0x10000;
    } else {
        return {};
    }
    if (pos + n > s.size()) return {};
    for (std::size_t i = 1; i < n; ++i) {
        unsigned char b = byte(pos + i);
        if ((b & 0xC0) != 0x80) return {};
        cp = (cp << 6) | (b & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return {};
    return {cp, n};
}

}  // namespace specdec::detail

namespace specdec::json {

/// Parses one JSON document. `origin` (usually a file name) prefixes every error together with
/// line:column, and stays attached to the values for later accessor errors.
SPECDEC_INLINE Value parse(std::string_view text, std::string_view origin = "json");

}  // namespace specdec::json

#if SPECDEC_BODIES  // the parser and the writer: compiled once where a program links specdec::compiled

// ---------------------------------------------------------------------------------------------
// Parser

namespace specdec::detail {

class JsonParser {
public:
    static constexpr int kMaxDepth = 512;  // deeper documents are refused: no stack overflow on hostile input

    JsonParser(std::string_view text, std::string_view origin)
        : text_(text), origin_(std::make_shared<const std::string>(origin)) {}

    json::Value parse_document() {
        // RFC 8259 §8.1: a JSON text MUST NOT begin with a byte order mark; HF's loaders (Python's json,
        // serde_json) refuse one too, so a file that loaded here would fail in the tools it came from.
        if (text_.starts_with("\xEF\xBB\xBF"))
            error("the text starts with a UTF-8 byte order mark (EF BB BF), which JSON does not allow (RFC 8259, "
                  "section 8.1); save the file as UTF-8 without a BOM");
        skip_whitespace();
        json::Value v = parse_value(0);
        skip_whitespace();
        if (pos_ != text_.size()) error("unexpected " + describe_here() + " after the JSON value");
        return v;
    }

private:
    [[noreturn]] void error_at(std::size_t line, std::size_t column, const std::string& what) const {
        fail("json", *origin_ + ":" + std::to_string(line) + ":" + std::to_string(column) + ": " + what);
    }
    [[noreturn]] void error(const std::string& what) const { error_at(line_, column(), what); }

    std::size_t column() const { return pos_ - line_start_ + 1; }

    /// "'x'", "end of input", or "byte 0x01" — what the parser is looking at.
    std::string describe_here() const {
        if (pos_ >= text_.size()) return "end of input";
        unsigned char c = static_cast<unsigned char>(text_[pos_]);
        if (c >= 0x20 && c < 0x7F) return std::string("'") + static_cast<char>(c) + "'";
        return "byte " + hex_byte(c);
    }

    void skip_whitespace() {
        while (pos_ < text_.size()) {
            char c = text_[pos_];
            if (c == '\n') {
                ++pos_;
                ++line_;
                line_start_ = pos_;
            } else if (c == ' ' || c == '\t' || c == '\r') {
                ++pos_;
            } else {
                break;
            }
        }
    }

    json::Location here() const {
        return json::Location{origin_, static_cast<std::uint32_t>(line_), static_cast<std::uint32_t>(column())};
    }

    bool consume_literal(std::string_view word) {
        if (text_.substr(pos_, word.size()) != word) return false;
        pos_ += word.size();
        return true;
    }

    json::Value parse_value(int depth) {
        if (pos_ >= text_.size()) error("expected a value, found end of input");
        json::Location location = here();
        json::Value v;
        switch (text_[pos_]) {
            case '{': v = parse_object(depth + 1); break;
            case '[': v = parse_array(depth + 1); break;
            case '"': v = json::Value(parse_string()); break;
            case 't':
            case 'f':
            case 'n':
                if (consume_literal("true")) v = json::Value(true);
                else if (consume_literal("false")) v = json::Value(false);
                else if (consume_literal("null")) v = json::Value(nullptr);
                else error("expected a value, found " + describe_here());
                break;
            default:
                // Python's json.dump writes these for non-finite floats; name them rather than their first byte.
                for (std::string_view word : {"NaN", "Infinity", "-Infinity"})
                    if (text_.substr(pos_, word.size()) == word)
                        error(std::string(word) + " is not a JSON number (JSON has no NaN or Infinity)");
                if (text_[pos_] == '-' || (text_[pos_] >= '0' && text_[pos_] <= '9')) v = parse_number();
                else error("expected a value, found " + describe_here());
        }
        v.set_location(std::move(location));
        return v;
    }

    void check_depth(int depth) const {
        if (depth > kMaxDepth) error("nesting deeper than " + std::to_string(kMaxDepth) + " levels");
    }

    json::Value parse_object(int depth) {
        check_depth(depth);
        ++pos_;  // '{'
        json::Object object;
        skip_whitespace();
        if (pos_ < text_.size() && text_[pos_] == '}') {
            ++pos_;
            return json::Value(std::move(object));
        }
        while (true) {
            skip_whitespace();
            if (pos_ >= text_.size() || text_[pos_] != '"')
                error("expected a string key in object, found " + describe_here());
            std::size_t key_line = line_, key_column = column();
            std::string key = parse_string();
            skip_whitespace();
            if (pos_ >= text_.size() || text_[pos_] != ':')
                error("expected ':' after object key, found " + describe_here());
            ++pos_;
            skip_whitespace();
            json::Value v = parse_value(depth);
            if (!object.insert(key, std::move(v))) error_at(key_line, key_column, "duplicate key '" + key + "'");
            skip_whitespace();
            if (pos_ < text_.size() && text_[pos_] == ',') {
                ++pos_;
                continue;
            }
            if (pos_ < text_.size() && text_[pos_] == '}') {
                ++pos_;
                return json::Value(std::move(object));
            }
            error("expected ',' or '}' after object member, found " + describe_here());
        }
    }

    json::Value parse_array(int depth) {
        check_depth(depth);
        ++pos_;  // '['
        json::Array array;
        skip_whitespace();
        if (pos_ < text_.size() && text_[pos_] == ']') {
            ++pos_;
            return json::Value(std::move(array));
        }
        while (true) {
            skip_whitespace();
            array.push_back(parse_value(depth));
            skip_whitespace();
            if (pos_ < text_.size() && text_[pos_] == ',') {
                ++pos_;
                continue;
            }
            if (pos_ < text_.size() && text_[pos_] == ']') {
                ++pos_;
                return json::Value(std::move(array));
            }
            error("expected ',' or ']' after array element, found " + describe_here());
        }
    }

    unsigned parse_hex4() {
        if (pos_ + 4 > text_.size()) error("unterminated \\u escape");
        unsigned v = 0;
        for (int i = 0; i < 4; ++i) {
            char c = text_[pos_];
            unsigned d;
            if (c >= '0' && c <= '9') d = static_cast<unsigned>(c - '0');
            else if (c >= 'a' && c <= 'f') d = static_cast<unsigned>(c - 'a' + 10);
            else if (c >= 'A' && c <= 'F') d = static_cast<unsigned>(c - 'A' + 10);
            else error("invalid hex digit in \\u escape: " + describe_here());
            v = v * 16 + d;
            ++pos_;
        }
        return v;
    }

    std::string parse_string() {
        std::size_t start_line = line_, start_column = column();
        ++pos_;  // opening quote
        std::string out;
        while (true) {
            if (pos_ >= text_.size()) error_at(start_line, start_column, "unterminated string");
            unsigned char c = static_cast<unsigned char>(text_[pos_]);
            if (c == '"') {
                ++pos_;
                return out;
            }
            if (c < 0x20) error("unescaped control character " + describe_here() + " in string");
            if (c == '\\') {
                std::size_t escape_column = column();
                ++pos_;
                if (pos_ >= text_.size()) error_at(start_line, start_column, "unterminated string");
                char e = text_[pos_++];
                switch (e) {
                    case '"': out += '"'; break;
                    case '\\': out += '\\'; break;
                    case '/': out += '/'; break;
                    case 'b': out += '\b'; break;
                    case 'f': out += '\f'; break;
                    case 'n': out += '\n'; break;
                    case 'r': out += '\r'; break;
                    case 't': out += '\t'; break;
                    case 'u': {
                        char32_t cp = parse_hex4();
                        if (cp >= 0xDC00 && cp <= 0xDFFF)
                            error_at(line_, escape_column, "invalid \\u escape: lone low surrogate");
                        if (cp >= 0xD800 && cp <= 0xDBFF) {
                            if (!consume_literal("\\u"))
                                error_at(line_, escape_column, "invalid \\u escape: high surrogate without a low surrogate");
                            char32_t low = parse_hex4();
                            if (low < 0xDC00 || low > 0xDFFF)
                                error_at(line_, escape_column, "invalid \\u escape: high surrogate without a low surrogate");
                            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
                        }
                        append_utf8(out, cp);
                        break;
                    }
                    default:
                        error_at(line_, escape_column, "invalid escape '\\" + std::string(1, e) + "' in string");
                }
                continue;
            }
            if (c < 0x80) {
                out += static_cast<char>(c);
                ++pos_;
                continue;
            }
            Utf8Char u = decode_utf8(text_, pos_);
            if (u.length == 0) error("invalid UTF-8 " + describe_here() + " in string");
            out.append(text_.substr(pos_, u.length));
            pos_ += u.length;
        }
    }

    json::Value parse_number() {
        std::size_t start = pos_;
        auto digits = [&] {
            std::size_t n = 0;
            while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') ++pos_, ++n;
            return n;
        };
        bool is_integer = true;
        if (text_[pos_] == '-') ++pos_;
        if (pos_ < text_.size() && text_[pos_] == '0') {
            ++pos_;
            if (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9')
                error("leading zero in number");
        } else if (digits() == 0) {
            error("expected a digit in number, found " + describe_here());
        }
        if (pos_ < text_.size() && text_[pos_] == '.') {
            ++pos_;
            is_integer = false;
            if (digits() == 0) error("expected a digit after '.' in number, found " + describe_here());
        }
        if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
            ++pos_;
            is_integer = false;
            if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-')) ++pos_;
            if (digits() == 0) error("expected a digit in exponent, found " + describe_here());
        }
        std::string_view literal = text_.substr(start, pos_ - start);
        const char* first = literal.data();
        const char* last = first + literal.size();
        // "-0" is kept as a double so that its sign survives a round trip.
        if (is_integer && literal != "-0") {
            std::int64_t i = 0;
            auto [end, ec] = std::from_chars(first, last, i);
            if (ec == std::errc() && end == last) return json::Value(i);
            // Beyond int64: fall through to a double.
        }
        double d = 0;
        auto [end, ec] = std::from_chars(first, last, d);
        if (ec == std::errc::result_out_of_range) {
            // Underflow is a tiny number, not an error; overflow would need Infinity, which JSON lacks.
            // Which one it is follows from the literal's magnitude however it is spelled (1e-400 or
            // 0.000...1 with 400 zeros).
            if (decimal_magnitude(literal) >= 0) {
                pos_ = start;
                error("number " + shortened(literal) + " is out of range for a double");
            }
            d = literal[0] == '-' ? -0.0 : 0.0;
        } else if (ec != std::errc() || end != last) {
            pos_ = start;
            error("invalid number " + shortened(literal));
        }
        return json::Value(d);
    }

    /// The power of ten of a valid number literal's first nonzero digit (0 for zero).
    static long decimal_magnitude(std::string_view lit) {
        std::size_t i = lit[0] == '-' ? 1 : 0;
        const auto digit = [&] { return i < lit.size() && lit[i] >= '0' && lit[i] <= '9'; };
        long int_digits = 0, frac_zeros = 0;
        bool nonzero = false;
        for (; digit(); ++i)
            if (nonzero || lit[i] != '0') nonzero = true, ++int_digits;
        if (i < lit.size() && lit[i] == '.')
            for (++i; digit(); ++i)
                if (!nonzero) {
                    if (lit[i] == '0') ++frac_zeros;
                    else nonzero = true;
                }
        long exponent = 0, sign = 1;
        if (i < lit.size() && (lit[i] == 'e' || lit[i] == 'E')) {
            ++i;
            if (i < lit.size() && (lit[i] == '+' || lit[i] == '-')) sign = lit[i++] == '-' ? -1 : 1;
            for (; digit(); ++i) exponent = std::min(exponent * 10 + (lit[i] - '0'), 1000000000L);
        }
        if (!nonzero) return 0;
        return (int_digits > 0 ? int_digits - 1 : -(frac_zeros + 1)) + sign * exponent;
    }

    /// A literal for a message: whole when short, else its start and its length.
    static std::string shortened(std::string_view lit) {
        if (lit.size() <= 40) return std::string(lit);
        return std::string(lit.substr(0, 24)) + "... (" + std::to_string(lit.size()) + " characters)";
    }

    std::string_view text_;
    std::shared_ptr<const std::string> origin_;
    std::size_t pos_ = 0;
    std::size_t line_ = 1;
    std::size_t line_start_ = 0;
};

}  // namespace specdec::detail

namespace specdec::json {

SPECDEC_INLINE Value parse(std::string_view text, std::string_view origin) {
    return detail::JsonParser(text, origin).parse_document();
}

}  // namespace specdec::json

// ---------------------------------------------------------------------------------------------
// Writer

namespace specdec::detail {

inline void json_dump_string(std::string& out, std::string_view s) {
    out += '"';
    for (std::size_t i = 0; i < s.size();) {
        unsigned char c = static_cast<unsigned char>(s[i]);
        if (c >= 0x80) {
            // JSON text must be UTF-8; a byte string that is not has no faithful JSON spelling.
            Utf8Char u = decode_utf8(s, i);
            if (u.length == 0)
                fail("json", "cannot write string: invalid UTF-8 byte " + hex_byte(c) + " at offset " + std::to_string(i));
            out.append(s.substr(i, u.length));
            i += u.length;
            continue;
        }
        switch (c) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\b': out += "\\b"; break;
            case '\f': out += "\\f"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            default:
                if (c < 0x20) {
                    out += "\\u00";
                    out += hex_byte(c).substr(2);
                } else {
                    out += static_cast<char>(c);
                }
        }
        ++i;
    }
    out += '"';
}

inline void json_dump_double(std::string& out, double d) {
    if (!std::isfinite(d)) fail("json", "cannot write " + std::to_string(d) + ": JSON has no NaN or Infinity");
    char buf[64];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, d);  // shortest form that round-trips
    std::string_view s(buf, static_cast<std::size_t>(end - buf));
    out += s;
    // Keep it a double on re-reading: "1" would come back as an integer.
    if (s.find_first_of(".e") == std::string_view::npos) out += ".0";
}

inline void json_dump_value(std::string& out, const json::Value& v, int indent, int depth) {
    auto newline = [&](int d) {
        if (indent < 0) return;
        out += '\n';
        out.append(static_cast<std::size_t>(indent) * static_cast<std::size_t>(d), ' ');
    };
    switch (v.kind()) {
        case json::Kind::kNull: out += "null"; break;
        case json::Kind::kBool: out += v.as_bool() ? "true" : "false"; break;
        case json::Kind::kInteger: out += std::to_string(v.as_int()); break;
        case json::Kind::kDouble: json_dump_double(out, v.as_double()); break;
        case json::Kind::kString: json_dump_string(out, v.as_string()); break;
        case json::Kind::kArray: {
            const json::Array& a = v.as_array();
            out += '[';
            for (std::size_t i = 0; i < a.size(); ++i) {
                if (i > 0) out += ',';
                newline(depth + 1);
                json_dump_value(out, a[i], indent, depth + 1);
            }
            if (!a.empty()) newline(depth);
            out += ']';
            break;
        }
        case json::Kind::kObject: {
            const json::Object& o = v.as_object();
            out += '{';
            bool first = true;
            for (const json::Member& m : o) {
                if (!first) out += ',';
                first = false;
                newline(depth + 1);
                json_dump_string(out, m.key);
                out += indent < 0 ? ":" : ": ";
                json_dump_value(out, m.value, indent, depth + 1);
            }
            if (!o.empty()) newline(depth);
            out += '}';
            break;
        }
    }
}

}  // namespace specdec::detail

namespace specdec::json {

/// Writes valid JSON: compact when indent < 0, else one member per line indented by `indent`.
/// Integers are exact; doubles use the shortest digits that round-trip. Throws on NaN/Infinity
/// and on strings that are not valid UTF-8.
SPECDEC_INLINE std::string dump(const Value& value, int indent) {
    std::string out;
    detail::json_dump_value(out, value, indent, 0);
    return out;
}

}  // namespace specdec::json

#endif  // SPECDEC_BODIES
