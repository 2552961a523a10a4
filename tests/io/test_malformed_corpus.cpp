// The malformed-file corpus (tests/data/malformed/, README.md there): every broken file is refused with
// specdec::error — never another exception, never a crash — whose message names the file, the field and
// the value; and no file makes the reader allocate what it declares before checking it.
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <new>
#include <string>
#include <typeinfo>
#include <vector>

#include <unistd.h>

#include "catch.hpp"
#include "source_dir.hpp"
#include "helpers.hpp"

// ---- the largest single allocation, counted by replacing the global operator new of this test binary
// (delete is replaced too, to pair with it). Not under ASan, which intercepts operator new itself (a
// replacement here meets its allocations in delete: alloc-dealloc-mismatch) and whose allocation limit
// makes the same check there.

namespace {
std::atomic<std::size_t> g_largest_allocation{0};
}  // namespace

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kCountsAllocations = false;
#else
constexpr bool kCountsAllocations = true;

// GCC pairs the replaced new and delete after inlining and would warn that free() meets operator new.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void* operator new(std::size_t n) {
    std::size_t seen = g_largest_allocation.load(std::memory_order_relaxed);
    while (n > seen && !g_largest_allocation.compare_exchange_weak(seen, n, std::memory_order_relaxed)) {
    }
    if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
    throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
#pragma GCC diagnostic pop
#endif

namespace test_malformed_corpus {  // a unity build compiles several test files as one

using namespace specdec;
namespace fs = std::filesystem;

namespace {

enum class Loader { kJson, kCheckpoint, kSafetensors, kTokenizer, kTokenFile, kGlide, kEdd, kEagle, kLlama2c, kLlama2cTokenizer, kGguf };

struct Case {
    const char* path;                    // under tests/data/malformed/
    Loader loader;
    std::vector<const char*> expected;   // substrings of the message: the field and the value
};

// What each file must give (README.md says the same in words). Every message also names the file,
// except a drafter that disagrees with its target: that is found beside the target, by the proposer.
const std::vector<Case> kCorpus = {
    {"json/bom.json", Loader::kJson, {"[specdec.json]", ":1:1: the text starts with a UTF-8 byte order mark"}},
    {"json/nan.json", Loader::kJson, {"[specdec.json]", ":9:17: NaN is not a JSON number"}},
    {"json/infinity.json", Loader::kJson, {"[specdec.json]", ":9:17: -Infinity is not a JSON number"}},
    {"json/number_overflow.json", Loader::kJson, {"[specdec.json]", "1e400", "out of range"}},
    {"json/invalid_utf8_key.json", Loader::kJson, {"[specdec.json]", "invalid UTF-8 byte 0xFF"}},
    {"json/invalid_utf8_string.json", Loader::kJson, {"[specdec.json]", "invalid UTF-8 byte 0xC0"}},
    {"json/lone_high_surrogate.json", Loader::kJson, {"[specdec.json]", "high surrogate without a low surrogate"}},
    {"json/lone_low_surrogate.json", Loader::kJson, {"[specdec.json]", "lone low surrogate"}},
    {"json/truncated.json", Loader::kJson, {"[specdec.json]", "end of input"}},
    {"json/trailing_comma.json", Loader::kJson, {"[specdec.json]", "expected a string key in object, found '}'"}},
    {"json/duplicate_key.json", Loader::kJson, {"[specdec.json]", "duplicate key 'hidden_size'"}},
    {"json/empty.json", Loader::kJson, {"[specdec.json]", "expected a value, found end of input"}},
    {"json/not_an_object.json", Loader::kJson, {"[specdec.checkpoint]", "expected a JSON object"}},

    {"checkpoint/hidden_1e308", Loader::kCheckpoint, {"[specdec.checkpoint]", "field 'hidden_size': expected an integer, found number 1e+308 (at 2:18)"}},
    {"checkpoint/hidden_beyond_int64", Loader::kCheckpoint, {"[specdec.checkpoint]", "field 'hidden_size': expected an integer, found number"}},
    {"checkpoint/hidden_as_string", Loader::kCheckpoint, {"[specdec.checkpoint]", "field 'hidden_size': expected an integer, found string \"32\""}},
    {"checkpoint/negative_heads", Loader::kCheckpoint, {"field 'num_attention_heads' = -4 is out of range"}},
    {"checkpoint/heads_not_dividing_hidden", Loader::kCheckpoint,
     {"hidden_size 30 is not a multiple of num_attention_heads 4"}},
    {"checkpoint/vocab_zero", Loader::kCheckpoint, {"field 'vocab_size' = 0 is out of range"}},
    {"checkpoint/absurd_size", Loader::kCheckpoint, {"vocab_size 2000000000", "(1 TiB)"}},
    {"checkpoint/rms_norm_eps_underflow", Loader::kCheckpoint, {"rms_norm_eps must be > 0, got 0"}},
    {"checkpoint/rope_theta_beyond_float", Loader::kCheckpoint, {"rope_theta must be > 0, got inf"}},
    {"checkpoint/tie_not_bool", Loader::kCheckpoint, {"[specdec.checkpoint]", "field 'tie_word_embeddings': expected a bool, found string \"yes\""}},
    {"checkpoint/missing_vocab_size", Loader::kCheckpoint, {"missing field 'vocab_size'"}},
    {"checkpoint/config_is_a_directory", Loader::kCheckpoint, {"config.json: is a directory, not a file"}},
    {"checkpoint/pytorch_model_bin", Loader::kCheckpoint,
     {"[specdec.checkpoint]", "pytorch_model.bin: PyTorch weights (a pickle)", "no model.safetensors", "save_pretrained"}},
    {"checkpoint/layers_mismatch", Loader::kCheckpoint, {"num_hidden_layers = 2", "tensors for 1 layers"}},
    {"checkpoint/one_tensor_claims_2e31_layers", Loader::kCheckpoint,
     {"num_hidden_layers = 2147483647", "tensors for 1 layers with indices up to 2147483646"}},
    {"checkpoint/shape_mismatch", Loader::kCheckpoint,
     {"tensor 'model.embed_tokens.weight' has shape [20, 8], the config implies [16, 8]"}},
    {"checkpoint/rope_scaling_yarn", Loader::kCheckpoint, {"field 'rope_scaling.factor' is missing (rope_type 'yarn' needs it)"}},
    {"checkpoint/rope_scaling_no_factor", Loader::kCheckpoint, {"field 'rope_scaling.factor' is missing (rope_type 'linear' needs it)"}},
    {"checkpoint/rope_scaling_not_object", Loader::kCheckpoint, {"field 'rope_scaling' is string \"llama3\", expected an object or null"}},
    {"checkpoint/sliding_window_zero", Loader::kCheckpoint, {"field 'sliding_window' = 0 must be a positive integer"}},
    {"checkpoint/sliding_window_llama", Loader::kCheckpoint, {"sliding_window = 4096 is not supported for model_type 'llama'"}},
    {"checkpoint/mixture_of_experts", Loader::kCheckpoint, {"num_local_experts = 8 is not supported"}},
    {"checkpoint/qwen2_sliding_window", Loader::kCheckpoint, {"use_sliding_window = true is not supported"}},
    {"checkpoint/head_dim_odd", Loader::kCheckpoint, {"head_dim 7 must be even for RoPE"}},
    {"checkpoint/unknown_key", Loader::kCheckpoint,
     {"field 'quantization_config' (object of 2) is not read by this Llama", "refused rather than ignored"}},
    {"checkpoint/rope_spellings_disagree", Loader::kCheckpoint,
     {"fields 'rope_theta' = 10000.0 and 'rope_parameters.rope_theta' = 5e+05 disagree"}},

    {"sharded/missing_shard", Loader::kCheckpoint,
     {"[specdec.checkpoint]", "model.safetensors.index.json: weight_map names shard 'model-00099-of-", "does not exist"}},
    {"sharded/tensor_twice_in_index", Loader::kCheckpoint, {"model.safetensors.index.json:", "duplicate key 'model.norm.weight'"}},
    {"sharded/path_traversal", Loader::kCheckpoint, {"= '../model-00002-of-", "is not a file name in the model's folder"}},
    {"sharded/bad_json", Loader::kCheckpoint, {"[specdec.json]", "model.safetensors.index.json:", "end of input"}},
    {"sharded/weight_map_not_object", Loader::kCheckpoint, {"field 'weight_map' is array of 1, expected an object"}},
    {"sharded/weight_map_value_not_string", Loader::kCheckpoint, {"weight_map['lm_head.weight'] is integer 1, expected a shard file name"}},
    {"sharded/tensor_in_wrong_shard", Loader::kCheckpoint,
     {"weight_map puts tensor 'model.norm.weight' in shard 'model-00001-of-", "which has no such tensor"}},
    {"sharded/tensor_in_two_shards", Loader::kCheckpoint, {"tensor 'model.norm.weight' is in two shards"}},
    {"sharded/tensor_missing_from_shard", Loader::kCheckpoint,
     {"weight_map puts tensor 'model.embed_tokens.weight' in shard 'model-00001-of-", "which has no such tensor"}},
    {"sharded/unlisted_tensor", Loader::kCheckpoint, {"holds tensor 'model.extra.weight', which weight_map does not list"}},

    {"safetensors/shape_overflow.safetensors", Loader::kSafetensors,
     {"tensor 'w': shape [1099511627776, 1099511627776] has too many elements"}},
    {"safetensors/offsets_reversed.safetensors", Loader::kSafetensors, {"tensor 'w': data_offsets [8, 4] have begin > end"}},
    {"safetensors/offsets_overlap.safetensors", Loader::kSafetensors, {"tensors 'a' [0, 8] and 'b' [4, 12] overlap"}},
    {"safetensors/offsets_past_end.safetensors", Loader::kSafetensors,
     {"tensor 'w': data_offsets [0, 16] run past the end of the data (8 bytes)"}},
    {"safetensors/offsets_negative.safetensors", Loader::kSafetensors, {"tensor 'w': data_offsets [-4, 0] are negative"}},
    {"safetensors/size_mismatch.safetensors", Loader::kSafetensors, {"tensor 'w': expected 3 elements", "hold 8"}},
    {"safetensors/duplicate_name.safetensors", Loader::kSafetensors, {"malformed header JSON", "duplicate key 'w'"}},
    {"safetensors/unknown_dtype.safetensors", Loader::kSafetensors, {"tensor 'w': unknown dtype 'F33'"}},
    {"safetensors/negative_dim.safetensors", Loader::kSafetensors, {"tensor 'w': shape[0] is -1"}},
    {"safetensors/header_past_end.safetensors", Loader::kSafetensors,
     {"header length 1000 runs past the end of the file (10 bytes)"}},
    {"safetensors/header_length_huge.safetensors", Loader::kSafetensors, {"header length 18446744073709551600 runs past"}},
    {"safetensors/shorter_than_length.safetensors", Loader::kSafetensors, {"file is 3 bytes, shorter than the 8-byte"}},
    {"safetensors/header_not_json.safetensors", Loader::kSafetensors, {"malformed header JSON", "found 't'"}},
    {"safetensors/header_bom.safetensors", Loader::kSafetensors, {"malformed header JSON", "byte order mark"}},
    {"safetensors/header_not_object.safetensors", Loader::kSafetensors, {"header is not a JSON object"}},
    {"safetensors/metadata_not_string.safetensors", Loader::kSafetensors,
     {"__metadata__ 'format' is integer 1, expected a string"}},

    {"tokenizer/merge_unknown_token.json", Loader::kTokenizer, {"model.merges[1]: 'x' is not in model.vocab"}},
    {"tokenizer/duplicate_vocab_id.json", Loader::kTokenizer, {"model.vocab: id 3 is used by both 'l' and 'o'"}},
    {"tokenizer/empty_vocab.json", Loader::kTokenizer, {"model.vocab is empty"}},
    {"tokenizer/duplicate_added_token.json", Loader::kTokenizer,
     {"added_tokens[1]: content '<|endoftext|>' is already added token 0"}},
    {"tokenizer/duplicate_added_id.json", Loader::kTokenizer, {"added_tokens[1]: id 0 is used by an earlier added token"}},
    {"tokenizer/merge_makes_added_token.json", Loader::kTokenizer,
     {"model.merges[0]: merged token 'he' is the added token 5"}},
    {"tokenizer/merge_takes_added_token.json", Loader::kTokenizer,
     {"model.merges[0]: 'Ġ' is the added token 0; a merge cannot take an added token"}},
    {"tokenizer/vocab_id_huge.json", Loader::kTokenizer, {"model.vocab: id 4294967296 is too large"}},
    {"tokenizer/vocab_id_negative.json", Loader::kTokenizer, {"model.vocab: token 'l' has negative id -3"}},
    {"tokenizer/vocab_hole.json", Loader::kTokenizer, {"model.vocab: no token has id 5 (ids must be 0..V-1)"}},
    {"tokenizer/not_bpe.json", Loader::kTokenizer, {"model.type is \"WordPiece\"; only \"BPE\" is supported"}},
    {"tokenizer/is_a_directory", Loader::kTokenizer, {"[specdec.tokenizer]", "is a directory"}},
    {"tokenizer/byte_fallback_missing_bytes.json", Loader::kTokenizer,
     {"model.byte_fallback is true but model.vocab has no token '<0x41>'"}},
    {"tokenizer/unknown_normalizer.json", Loader::kTokenizer, {"normalizer is {\"type\":\"NFKC\"}; only null, NFC (before a byte-level pre-tokenizer), Prepend"}},
    {"tokenizer/unknown_pre_tokenizer.json", Loader::kTokenizer,
     {"pre_tokenizer is {\"type\":\"Whitespace\"}; only ByteLevel, Sequence [Split, ByteLevel] or Metaspace is supported"}},
    {"tokenizer/unknown_split_pattern.json", Loader::kTokenizer,
     {"pre_tokenizer.pretokenizers[0].pattern is {\"Regex\":\"\\\\w+|[^\\\\w\\\\s]+\"}; only the GPT-2, Llama-3 or Qwen2 regex"}},
    {"tokenizer/unknown_decoder_step.json", Loader::kTokenizer, {"decoder.decoders[1] is {\"type\":\"CTC\"}; only Replace"}},

    {"token_file/short_header.tokens", Loader::kTokenFile, {"is truncated: 10 bytes, the header alone is 32"}},
    {"token_file/count_past_end.tokens", Loader::kTokenFile, {"the header counts 100 tokens of 2 bytes"}},
    {"token_file/count_huge.tokens", Loader::kTokenFile, {"the header counts 4611686018427387904 tokens"}},
    {"token_file/id_2pow31.tokens", Loader::kTokenFile, {"token 2147483648 at index 1 is outside the model's vocabulary of 64"}},
    {"token_file/id_past_vocab.tokens", Loader::kTokenFile, {"token 64 at index 1 is outside the model's vocabulary of 64"}},
    {"token_file/bad_magic.tokens", Loader::kTokenFile, {"bad magic number"}},
    {"token_file/bad_version.tokens", Loader::kTokenFile, {"has version 2"}},
    {"token_file/bad_width.tokens", Loader::kTokenFile, {"has 3 bytes per token"}},

    {"glide/vocab_mismatch", Loader::kGlide, {"[specdec.glide]", "vocab_size is 72, but the target has vocab_size 64"}},
    {"glide/head_dim_mismatch", Loader::kGlide, {"glide_cross_head_dim is 4, but the target has head_dim 8"}},
    {"glide/target_layers_mismatch", Loader::kGlide, {"glide_target_layers is 3, but the target has num_hidden_layers 2"}},
    {"glide/cross_heads_zero", Loader::kGlide, {"field 'glide_cross_heads' = 0 is out of range"}},
    {"glide/cross_attention_not_bool", Loader::kGlide, {"[specdec.glide]", "field 'glide_cross_attention': expected a bool, found integer 1"}},
    {"glide/one_tensor_claims_2e31_layers", Loader::kGlide,
     {"[specdec.glide]", "num_hidden_layers = 2147483647", "tensors for 1 layers with indices up to 2147483646"}},

    {"edd/vocab_mismatch", Loader::kEdd, {"[specdec.edd]", "the drafter's vocabulary of 72 differs from the target's 64"}},
    {"edd/hidden_mismatch", Loader::kEdd, {"the drafter's hidden_size 16 differs from the target's 32"}},
    {"edd/layer_past_target", Loader::kEdd, {"edd_target_layer 5 is not a hidden state of the target"}},
    {"edd/not_edd", Loader::kEdd, {"model_type is not \"edd\""}},
    {"edd/layer_as_string", Loader::kEdd, {"[specdec.edd]", "field 'edd_target_layer': expected an integer, found string \"0\""}},
    {"edd/one_tensor_claims_2e31_layers", Loader::kEdd,
     {"num_hidden_layers = 2147483647", "tensors for 1 layers with indices up to 2147483646"}},
    {"eagle/hidden_mismatch", Loader::kEagle, {"[specdec.eagle]", "hidden_size 16 differs from the target's 32"}},
    {"eagle/pytorch_model_bin", Loader::kEagle, {"[specdec.eagle]", "pytorch_model.bin: a PyTorch pickle", "convert it to safetensors"}},
    {"eagle/input_layernorm", Loader::kEagle,
     {"[specdec.eagle]", "tensor 'layers.0.input_layernorm.weight' is not part of EAGLE-1/2's drafter"}},
    {"llama2c/truncated_header.bin", Loader::kLlama2c, {"[specdec.llama2c]", "is 20 bytes, shorter than the 28-byte header of a legacy (version 0) llama2.c file"}},
    {"llama2c/truncated_v1_header.bin", Loader::kLlama2c, {"is 100 bytes, shorter than the 256-byte header of export.py's versions 1 and 2"}},
    {"llama2c/data_past_end.bin", Loader::kLlama2c, {"is 1534 bytes, but its version 0 header (dim 8, hidden_dim 16, n_layers 1", "implies 3068 (tensor data runs past the end of the file)"}},
    {"llama2c/trailing_bytes.bin", Loader::kLlama2c, {"is 3172 bytes, but its version 1 header", "implies 3168 (trailing bytes)"}},
    {"llama2c/negative_dim.bin", Loader::kLlama2c, {"header field 'dim' = -8 must be > 0"}},
    {"llama2c/zero_layers.bin", Loader::kLlama2c, {"header field 'n_layers' = 0 must be > 0"}},
    {"llama2c/heads_not_dividing_dim.bin", Loader::kLlama2c, {"header field 'n_heads' = 3 does not divide dim 8"}},
    {"llama2c/kv_heads_not_dividing_heads.bin", Loader::kLlama2c, {"header field 'n_kv_heads' = 3 does not divide n_heads 2"}},
    {"llama2c/vocab_int_min.bin", Loader::kLlama2c, {"header field 'vocab_size' = -2147483648 is out of range"}},
    {"llama2c/absurd_size.bin", Loader::kLlama2c, {"num_hidden_layers 2147483647", "(1 TiB)"}},
    {"llama2c/bad_version.bin", Loader::kLlama2c, {"header version 3 is not supported"}},
    {"llama2c/bad_magic.bin", Loader::kLlama2c, {"does not divide dim 1634415667", "does not start with the magic 0x616b3432"}},
    {"llama2c/shared_flag_not_bool.bin", Loader::kLlama2c, {"header byte shared_classifier is 7 (must be 0 or 1)"}},
    {"llama2c/q8_group_zero.bin", Loader::kLlama2c, {"header group_size = 0 must be > 0"}},
    {"llama2c/q8_group_not_dividing.bin", Loader::kLlama2c, {"header group_size = 3 does not divide the 128 values of tensor 'token_embedding'"}},
    {"llama2c/nan_weight.bin", Loader::kLlama2c, {"tensor 'wq[0]' holds NaN at element 5"}},
    {"llama2c/tokenizer_empty.bin", Loader::kLlama2cTokenizer, {"[specdec.llama2c]", "is 0 bytes, shorter than the 4-byte max_token_length"}},
    {"llama2c/tokenizer_no_tokens.bin", Loader::kLlama2cTokenizer, {"holds no tokens"}},
    {"llama2c/tokenizer_negative_max_length.bin", Loader::kLlama2cTokenizer, {"max_token_length is -1 (negative)"}},
    {"llama2c/tokenizer_negative_length.bin", Loader::kLlama2cTokenizer, {"token 1: length -5 is negative"}},
    {"llama2c/tokenizer_length_past_end.bin", Loader::kLlama2cTokenizer, {"token 1: length 50 runs past the end of the file (2 bytes left)"}},
    {"llama2c/tokenizer_length_2e31.bin", Loader::kLlama2cTokenizer, {"token 0: length 2147483647 runs past the end of the file (1 bytes left)"}},
    {"llama2c/tokenizer_longer_than_max.bin", Loader::kLlama2cTokenizer, {"token 1: length 3 exceeds max_token_length 2"}},
    {"llama2c/tokenizer_truncated_record.bin", Loader::kLlama2cTokenizer, {"token 1: the file ends 3 bytes after the last token"}},
    {"llama2c/tokenizer_nan_score.bin", Loader::kLlama2cTokenizer, {"token 2 has score NaN"}},
    {"gguf/truncated.gguf", Loader::kGguf, {"[specdec.gguf]", "tensor 'token_embd.weight' n_dims needs 4 bytes at offset 598, the file has 2 left (truncated?)"}},
    {"gguf/bad_magic.gguf", Loader::kGguf, {"[specdec.gguf]", "magic is 'GGML', not 'GGUF'"}},
    {"gguf/bad_version.gguf", Loader::kGguf, {"[specdec.gguf]", "version 1 is not supported"}},
    {"gguf/data_past_end.gguf", Loader::kGguf, {"[specdec.gguf]", "tensor 'output_norm.weight': data [33024, +128) runs past the end of the data section"}},
    {"gguf/unknown_type.gguf", Loader::kGguf, {"[specdec.gguf]", "tensor 'blk.0.ffn_up.weight': ggml type 99 is unknown"}},
    {"gguf/unsupported_quant.gguf", Loader::kGguf, {"[specdec.gguf]", "tensor 'token_embd.weight' has type Q8_1 (ggml type 9), which specdec cannot dequantize"}},
    {"gguf/n_dims_5.gguf", Loader::kGguf, {"[specdec.gguf]", "tensor 'blk.0.attn_v.weight': n_dims 5 is outside 1..4"}},
    {"gguf/misaligned_offset.gguf", Loader::kGguf, {"[specdec.gguf]", "tensor 'blk.0.attn_v.weight': offset 8324 is not a multiple of the alignment 32"}},
    {"gguf/duplicate_tensor.gguf", Loader::kGguf, {"[specdec.gguf]", "tensor 'blk.0.attn_q.weight' appears twice"}},
    {"gguf/dims_overflow.gguf", Loader::kGguf, {"[specdec.gguf]", "tensor 'blk.0.attn_q.weight': ne[1] = 1099511627776 makes the element count overflow 64 bits"}},
    {"gguf/string_length_2e64.gguf", Loader::kGguf, {"[specdec.gguf]", "metadata entry 0 key (a string of 18446744073709551600 bytes) needs 18446744073709551600 bytes"}},
    {"gguf/array_count_huge.gguf", Loader::kGguf, {"[specdec.gguf]", "metadata key 'general.huge': array of 4611686018427387904 elements needs at least 2^64 bytes"}},
    {"gguf/nested_array.gguf", Loader::kGguf, {"[specdec.gguf]", "metadata key 'general.nested': an array of arrays"}},
    {"gguf/tensor_count_huge.gguf", Loader::kGguf, {"[specdec.gguf]", "tensor count 1152921504606846976 cannot fit"}},
    {"gguf/architecture_bloom.gguf", Loader::kGguf, {"[specdec.gguf]", "metadata key 'general.architecture' is 'bloom'"}},
    {"gguf/rope_scaling.gguf", Loader::kGguf, {"[specdec.gguf]", "metadata key 'llama.rope.scaling.type' is 'longrope'; specdec reads 'none', 'linear' and 'yarn'"}},
    {"gguf/rope_yarn_ext_factor.gguf", Loader::kGguf, {"[specdec.gguf]", "metadata key 'llama.rope.scaling.yarn_ext_factor' is 0.500000; specdec mixes YaRN's frequencies as transformers does (1)"}},
    {"gguf/rope_yarn_keys_linear.gguf", Loader::kGguf, {"[specdec.gguf]", "metadata key 'llama.rope.scaling.yarn_beta_fast' is set while llama.rope.scaling.type is 'linear', not 'yarn'"}},
    {"gguf/value_length.gguf", Loader::kGguf, {"[specdec.gguf]", "metadata key 'llama.attention.value_length' is 8, llama.attention.key_length 16"}},
    {"gguf/rope_factor_negative.gguf", Loader::kGguf, {"[specdec.gguf]", "metadata key 'llama.rope.scaling.factor' is -2.000000, not a finite factor >= 0"}},
    {"gguf/rope_none_with_factor.gguf", Loader::kGguf, {"[specdec.gguf]", "metadata key 'llama.rope.scaling.factor' is 2.000000 while llama.rope.scaling.type is 'none'"}},
    {"gguf/partial_rotary.gguf", Loader::kGguf, {"[specdec.gguf]", "metadata key 'llama.rope.dimension_count' is 8; specdec rotates the whole head of 16"}},
    {"gguf/embedding_length_40.gguf", Loader::kGguf, {"[specdec.gguf]", "metadata key 'llama.embedding_length' is 40; tensor 'token_embd.weight' has rows of 32 values"}},
    {"gguf/block_count_3.gguf", Loader::kGguf, {"[specdec.gguf]", "holds 11 tensors; llama.block_count 3 needs 29"}},
    {"gguf/nan_weight.gguf", Loader::kGguf, {"[specdec.gguf]", "tensor 'blk.0.ffn_down.weight' holds NaN at element 1420"}},
    {"gguf/rope_freqs_f16.gguf", Loader::kGguf, {"[specdec.gguf]", "tensor 'rope_freqs.weight' has type F16; llama.cpp reads RoPE factors only as F32"}},
    {"gguf/rope_freqs_length.gguf", Loader::kGguf, {"[specdec.gguf]", "tensor 'rope_freqs.weight' has ne [4]; head_dim 16 needs one factor per rotary pair, [8]"}},
    {"gguf/rope_freqs_zero.gguf", Loader::kGguf, {"[specdec.gguf]", "tensor 'rope_freqs.weight' element 3 is 0.000000; a RoPE factor must be finite and > 0"}},
    {"gguf/rope_freqs_nan.gguf", Loader::kGguf, {"[specdec.gguf]", "tensor 'rope_freqs.weight' element 5 is nan; a RoPE factor must be finite and > 0"}},
    {"gguf/rope_freqs_with_linear.gguf", Loader::kGguf, {"[specdec.gguf]", "metadata key 'llama.rope.scaling.factor' is 2.000000 and the file also holds tensor 'rope_freqs.weight'"}},
    {"gguf/qwen2_with_llama_keys.gguf", Loader::kGguf, {"[specdec.gguf]", "metadata key 'qwen2.embedding_length' is missing"}},
    {"gguf/qwen2_unknown_tensor.gguf", Loader::kGguf,
     {"[specdec.gguf]", "tensor 'blk.0.attn_k.bixs' is not one of a qwen2 block that specdec runs", "attn_q.bias,attn_k.bias,attn_v.bias"}},
};

const fs::path kCorpusDir = fs::path(SPECDEC_SOURCE_DIR) / "tests/data/malformed";

/// The target the glide/ and edd/ drafters are checked against (tests/data/malformed/README.md).
struct Target {
    Config cfg = test::tiny_config();
    CpuModel model{cfg, random_weights(cfg, 5, 0.3f)};
};

void load(const fs::path& path, Loader loader, Target& target) {
    switch (loader) {
        case Loader::kJson: (void)load_config(path); return;
        case Loader::kCheckpoint: (void)load_checkpoint(path); return;
        case Loader::kSafetensors: (void)SafetensorsFile::open(path); return;
        case Loader::kTokenizer: (void)Tokenizer::load(path); return;
        case Loader::kTokenFile: train::TokenFile(path.string()).check_vocab(target.cfg.vocab_size); return;
        case Loader::kGlide: {
            GlideCheckpoint ck = load_glide_checkpoint(path);
            GlideModel<CpuModel> glide(ck.config, std::move(ck.weights), target.model);
            return;
        }
        case Loader::kEagle: {
            FeatureDrafter drafter(load_feature_drafter(path, target.cfg, target.model.weights()));
            return;
        }
        case Loader::kLlama2c: (void)load_llama2c(path); return;
        case Loader::kLlama2cTokenizer: (void)Llama2cTokenizer::load(path); return;
        case Loader::kGguf: (void)load_gguf(path); return;
        case Loader::kEdd: {
            EddCheckpoint ck = load_edd_checkpoint(path);
            CpuModel drafter(ck.config, std::move(ck.weights));
            EddProposer<CpuModel> proposer(target.model, drafter, ck.target_layer);
            return;
        }
    }
}

/// The message of the specdec::error that loading throws; fails the test on anything else.
std::string error_of(const fs::path& path, Loader loader, Target& target) {
    try {
        load(path, loader, target);
    } catch (const specdec::error& e) {
        return e.what();
    } catch (const std::exception& e) {
        FAIL("threw " << typeid(e).name() << " instead of specdec::error: " << e.what());
    } catch (...) {
        FAIL("threw something that is not a std::exception");
    }
    FAIL("loaded without an error");
    return {};
}

constexpr std::size_t kAllocationLimit = std::size_t{64} << 20;  // far above any file here, far below what they declare

}  // namespace

TEST_CASE("every file of the malformed corpus is refused naming the file, field and value", "[io][malformed]") {
    Target target;
    for (const Case& c : kCorpus) {
        const fs::path path = kCorpusDir / c.path;
        CAPTURE(c.path);
        REQUIRE(fs::exists(path));
        g_largest_allocation = 0;
        const std::string message = error_of(path, c.loader, target);
        CAPTURE(message);
        CHECK(message.rfind("[specdec.", 0) == 0);
        for (const char* part : c.expected) CHECK_THAT(message, Catch::Contains(part));
        if (c.loader != Loader::kGlide && c.loader != Loader::kEdd) CHECK_THAT(message, Catch::Contains(path.filename().string()));
        if (kCountsAllocations) CHECK(g_largest_allocation.load() < kAllocationLimit);  // refused before allocating it
    }
}

TEST_CASE("the corpus README lists every case of the test's table", "[io][malformed]") {
    std::ifstream in(kCorpusDir / "README.md");
    REQUIRE(in);
    const std::string readme((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (const Case& c : kCorpus) {
        CAPTURE(c.path);
        CHECK_THAT(readme, Catch::Contains(std::string("`") + c.path + "`"));
    }
}

TEST_CASE("JSON nested 200,000 deep is refused at the depth limit, without exhausting the stack", "[io][malformed]") {
    // Built at run time: the file is 400 kB of brackets, too big to commit for one case.
    const fs::path dir = fs::temp_directory_path() / ("specdec_malformed_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    for (const char* open_close : {"[]", "{}"}) {
        const fs::path path = dir / "config.json";
        {
            std::ofstream out(path, std::ios::binary);
            if (open_close[0] == '[') {
                out << std::string(200000, '[') << std::string(200000, ']');
            } else {
                std::string s;
                for (int i = 0; i < 200000; ++i) s += "{\"a\":";
                out << s << "1" << std::string(200000, '}');
            }
        }
        Target target;
        const std::string message = error_of(path, Loader::kJson, target);
        CHECK_THAT(message, Catch::Contains("config.json:1:") && Catch::Contains("nesting deeper than 512 levels"));
    }
    fs::remove_all(dir);
}

}  // namespace test_malformed_corpus
