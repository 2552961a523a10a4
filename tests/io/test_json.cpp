// Tests for detail/io/json.hpp: round trips, escapes, exact integers and every error class.
#include <cmath>

#include "catch.hpp"

#include <string>

#include "detail/io/json.hpp"

namespace test_json {  // a unity build compiles several test files as one

using namespace specdec;
using Catch::Contains;

TEST_CASE("json parses every value kind and keeps object order", "[json]") {
    const json::Value v = json::parse(R"({"z": null, "b": true, "f": false, "i": -42, "d": 2.5, "s": "hi",
                                         "a": [1, [2], {}], "o": {"x": 1}})",
                                      "t.json");
    REQUIRE(v.is_object());
    CHECK(v.at("z").is_null());
    CHECK(v.at("b").as_bool());
    CHECK_FALSE(v.at("f").as_bool());
    CHECK(v.at("i").is_integer());
    CHECK(v.at("i").as_int() == -42);
    CHECK(v.at("d").as_double() == 2.5);
    CHECK(v.at("s").as_string() == "hi");
    CHECK(v.at("a").as_array().size() == 3);
    CHECK(v.at("o").at("x").as_int() == 1);
    CHECK(v.find("missing") == nullptr);

    std::string keys;
    for (const json::Member& m : v.as_object()) keys += m.key;
    CHECK(keys == "zbfidsao");
}

TEST_CASE("json dump then parse gives back the same document", "[json]") {
    const std::string text =
        R"({"name":"tiny","n":[0,-1,9223372036854775807,-9223372036854775808],"x":[0.1,1e-300,1.7976931348623157e+308,-0.0,3.0],)"
        R"("nested":{"a":[[],{}],"t":true,"f":false,"z":null},"esc":"q\"b\\s\/\b\f\n\r\t\u0001\u001f\u00e9\u20ac\ud83d\ude00"})";
    const json::Value v = json::parse(text, "t.json");

    SECTION("compact") {
        const std::string once = json::dump(v);
        CHECK(json::dump(json::parse(once, "once")) == once);
    }
    SECTION("indented") {
        const std::string pretty = json::dump(v, 2);
        CHECK(pretty.find("\n  \"name\": \"tiny\"") != std::string::npos);
        CHECK(json::dump(json::parse(pretty, "pretty")) == json::dump(v));
    }
    SECTION("numbers keep their kind and value") {
        const json::Value back = json::parse(json::dump(v), "back");
        const json::Array& n = back.at("n").as_array();
        CHECK(n[2].as_int() == 9223372036854775807LL);
        CHECK(n[3].as_int() == (-9223372036854775807LL - 1));
        const json::Array& x = back.at("x").as_array();
        CHECK(x[0].as_double() == 0.1);
        CHECK(x[1].as_double() == 1e-300);
        CHECK(x[2].as_double() == 1.7976931348623157e308);
        CHECK(std::signbit(x[3].as_double()));
        CHECK(x[4].kind() == json::Kind::kDouble);
        CHECK(json::dump(x[4]) == "3.0");
    }
}

TEST_CASE("json string escapes decode to UTF-8 and encode back", "[json]") {
    SECTION("\\u escapes, including a surrogate pair") {
        const json::Value v = json::parse(R"("\u0041\u00e9\u20ac\ud83d\ude00\u0000")", "s");
        CHECK(v.as_string() == std::string("A\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80", 10) + std::string(1, '\0'));
    }
    SECTION("raw UTF-8 passes through") {
        CHECK(json::parse("\"Ġthe 日本\"", "s").as_string() == "Ġthe 日本");
    }
    SECTION("control characters are escaped when written") {
        CHECK(json::dump(json::Value(std::string("a\x01\n\"\\\x7f", 6))) == "\"a\\u0001\\n\\\"\\\\\x7f\"");
    }
    SECTION("writing invalid UTF-8 is refused") {
        CHECK_THROWS_WITH(json::dump(json::Value(std::string("ab\xff"))), Contains("invalid UTF-8 byte 0xFF at offset 2"));
    }
}

TEST_CASE("json integers are exact up to int64 and bigger ones become doubles", "[json]") {
    CHECK(json::parse("9007199254740993", "n").as_int() == 9007199254740993LL);  // 2^53 + 1
    CHECK(json::dump(json::parse("9007199254740993", "n")) == "9007199254740993");
    const json::Value big = json::parse("18446744073709551616", "n");
    CHECK(big.kind() == json::Kind::kDouble);
    CHECK(big.as_double() == 18446744073709551616.0);
    CHECK(json::parse("1e3", "n").as_int() == 1000);
    CHECK(json::parse("1e-400", "n").as_double() == 0.0);
    // Underflow is zero however the literal is spelled; overflow is an error that does not print a
    // thousand-digit literal whole.
    CHECK(json::parse("0." + std::string(400, '0') + "1", "n").as_double() == 0.0);
    CHECK(std::signbit(json::parse("-0." + std::string(400, '0') + "1", "n").as_double()));
    CHECK(json::parse("0.0001e-400", "n").as_double() == 0.0);
    CHECK(json::parse("100000e-405", "n").as_double() == 0.0);
    CHECK_THROWS_WITH(json::parse("1e400", "n"), Contains("number 1e400 is out of range for a double"));
    CHECK_THROWS_WITH(json::parse("0.001e500", "n"), Contains("out of range for a double"));
    CHECK_THROWS_WITH(json::parse(std::string(1000, '9'), "n"),
                      Contains("number 999999999999999999999999... (1000 characters) is out of range"));
    CHECK(json::Value(std::uint64_t{7}).as_int() == 7);
    CHECK_THROWS_WITH(json::Value(std::uint64_t{1} << 63), Contains("does not fit int64"));
}

TEST_CASE("json objects look keys up through an index when large", "[json]") {
    json::Object o;
    for (int i = 0; i < 5000; ++i) {
        std::string key = std::to_string(i);  // not "k" + to_string(i): GCC 12 -O3 misreports -Wrestrict (PR 105329)
        key.insert(key.begin(), 'k');
        CHECK(o.insert(key, i));
    }
    CHECK_FALSE(o.insert("k17", 0));
    o.set("k17", -1);
    o.set("new", 99);
    REQUIRE(o.size() == 5001);
    CHECK(o.find("k4999")->as_int() == 4999);
    CHECK(o.find("k17")->as_int() == -1);
    CHECK(o.find("new")->as_int() == 99);
    CHECK(o.find("nope") == nullptr);
    const json::Value v(std::move(o));
    CHECK(json::parse(json::dump(v), "big").at("k2500").as_int() == 2500);
}

TEST_CASE("json syntax errors name the origin, line and column", "[json][error]") {
    SECTION("bad separator") {
        CHECK_THROWS_WITH(json::parse("{\n  \"a\": 1,\n  \"b\": 2 x\n}", "config.json"),
                          Contains("[specdec.json] config.json:3:10: expected ',' or '}' after object member, found 'x'"));
        CHECK_THROWS_WITH(json::parse("[1 2]", "a.json"), Contains("a.json:1:4: expected ',' or ']' after array element, found '2'"));
        CHECK_THROWS_WITH(json::parse("{\"a\" 1}", "a.json"), Contains("a.json:1:6: expected ':' after object key"));
        CHECK_THROWS_WITH(json::parse("{1: 2}", "a.json"), Contains("expected a string key in object, found '1'"));
    }
    SECTION("trailing commas and garbage") {
        CHECK_THROWS_WITH(json::parse("[1,]", "a.json"), Contains("a.json:1:4: expected a value, found ']'"));
        CHECK_THROWS_WITH(json::parse("{} x", "a.json"), Contains("a.json:1:4: unexpected 'x' after the JSON value"));
        CHECK_THROWS_WITH(json::parse("", "a.json"), Contains("expected a value, found end of input"));
        CHECK_THROWS_WITH(json::parse("nul", "a.json"), Contains("expected a value, found 'n'"));
    }
    SECTION("unterminated input") {
        CHECK_THROWS_WITH(json::parse("{\"a\": [1, 2", "a.json"), Contains("found end of input"));
        CHECK_THROWS_WITH(json::parse("\n  \"abc", "a.json"), Contains("a.json:2:3: unterminated string"));
        CHECK_THROWS_WITH(json::parse("\"ab\\", "a.json"), Contains("unterminated string"));
    }
    SECTION("bad strings") {
        CHECK_THROWS_WITH(json::parse("\"a\\x\"", "a.json"), Contains("a.json:1:3: invalid escape '\\x' in string"));
        CHECK_THROWS_WITH(json::parse("\"a\tb\"", "a.json"), Contains("unescaped control character byte 0x09 in string"));
        CHECK_THROWS_WITH(json::parse("\"\\u12G4\"", "a.json"), Contains("invalid hex digit in \\u escape: 'G'"));
        CHECK_THROWS_WITH(json::parse("\"\\ud83d\"", "a.json"), Contains("high surrogate without a low surrogate"));
        CHECK_THROWS_WITH(json::parse("\"\\ud83d\\u0041\"", "a.json"), Contains("high surrogate without a low surrogate"));
        CHECK_THROWS_WITH(json::parse("\"\\ude00\"", "a.json"), Contains("lone low surrogate"));
        CHECK_THROWS_WITH(json::parse("\"\xc3\x28\"", "a.json"), Contains("invalid UTF-8 byte 0xC3 in string"));
        CHECK_THROWS_WITH(json::parse("\"\xed\xa0\x80\"", "a.json"), Contains("invalid UTF-8"));  // encoded surrogate
    }
    SECTION("bad numbers") {
        CHECK_THROWS_WITH(json::parse("01", "a.json"), Contains("leading zero in number"));
        CHECK_THROWS_WITH(json::parse("1.", "a.json"), Contains("expected a digit after '.'"));
        CHECK_THROWS_WITH(json::parse("-", "a.json"), Contains("expected a digit in number"));
        CHECK_THROWS_WITH(json::parse("1e+", "a.json"), Contains("expected a digit in exponent"));
        CHECK_THROWS_WITH(json::parse("1e999", "a.json"), Contains("a.json:1:1: number 1e999 is out of range"));
        CHECK_THROWS_WITH(json::parse("NaN", "a.json"), Contains("a.json:1:1: NaN is not a JSON number"));
    }
    SECTION("duplicate keys") {
        CHECK_THROWS_WITH(json::parse("{\"a\": 1,\n \"a\": 2}", "a.json"), Contains("a.json:2:2: duplicate key 'a'"));
    }
    SECTION("hostile nesting is refused without deep recursion") {
        CHECK_THROWS_WITH(json::parse(std::string(100000, '['), "deep.json"), Contains("deep.json:1:513: nesting deeper than 512 levels"));
        CHECK_THROWS_WITH(json::parse(std::string(100000, '{'), "deep.json"), Contains("expected a string key"));
        const std::string ok = std::string(512, '[') + std::string(512, ']');
        CHECK_NOTHROW(json::parse(ok, "ok.json"));
    }
}

TEST_CASE("json accessors name the field, the expected type and the value found", "[json][error]") {
    const json::Value v = json::parse("{\n  \"hidden_size\": \"288\",\n  \"eps\": 1.5,\n  \"list\": [1, 2]\n}", "config.json");
    CHECK_THROWS_WITH(v.at("n_layers"), Contains("[specdec.json] config.json: missing field 'n_layers'"));
    CHECK_THROWS_WITH(v.at("hidden_size").as_int(), Contains("config.json:2:18: expected an integer, found string \"288\""));
    CHECK_THROWS_WITH(v.at("eps").as_int(), Contains("config.json:3:10: expected an integer, found number 1.5"));
    CHECK_THROWS_WITH(v.at("eps").as_string(), Contains("expected a string, found number 1.5"));
    CHECK_THROWS_WITH(v.at("list").as_object(), Contains("config.json:4:11: expected an object, found array of 2"));
    CHECK_THROWS_WITH(v.at("list").at("x"), Contains("expected an object, found array of 2"));
    CHECK_THROWS_WITH(v.at("eps").as_bool(), Contains("expected a bool"));
    CHECK_THROWS_WITH(v.as_array(), Contains("config.json:1:1: expected an array, found object of 3"));
    CHECK_THROWS_WITH(json::Value("s").as_double(), Contains("json value: expected a number, found string \"s\""));
    CHECK_THROWS_WITH(json::dump(json::Value(std::nan(""))), Contains("JSON has no NaN or Infinity"));
}

}  // namespace test_json
