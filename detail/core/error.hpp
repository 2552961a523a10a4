// specdec/detail/core/error.hpp — the one exception type of the library.
// SPDX-License-Identifier: MIT
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace specdec {

/// Thrown for bad user input and broken preconditions. The message starts with a stable prefix
/// in brackets ("[specdec.tree]", "[specdec.safetensors]") and names the file, field and value,
/// with a hint where one exists. Library code never prints and never exits.
class error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

namespace detail {

/// Throws `specdec::error` with "[specdec.<where>] <what>".
[[noreturn]] inline void fail(std::string_view where, const std::string& what) {
    throw error("[specdec." + std::string(where) + "] " + what);
}

/// Throws unless `ok`; the message is built only on failure.
template <class MakeMessage>
inline void require(bool ok, std::string_view where, MakeMessage&& make_message) {
    if (!ok) fail(where, make_message());
}

}  // namespace detail

// For policy authors: the same helpers under public names. A policy reports a broken precondition with
// `specdec::require(cond, "acceptor", [&] { return message; })` (docs/writing_a_policy.md).
using detail::fail;
using detail::require;

}  // namespace specdec
