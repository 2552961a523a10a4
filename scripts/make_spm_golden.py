#!/usr/bin/env python3
"""Writes tests/data/tokenizers/sp_bpe.tokenizer.model and sp_bpe.ids.json: a small SentencePiece BPE
model in Llama-2's configuration (byte fallback, identity normalizer, a dummy "▁" prefix, whitespace kept,
<unk> <s> </s> at ids 0 1 2), trained by the sentencepiece library on the first lines of the demo corpus,
and that library's ids for every string of mistral.ids.json. Run once where `sentencepiece` is installed
(Debian: python3-sentencepiece); CI reads the committed files.

    python3 scripts/make_spm_golden.py
"""
import io
import json
import pathlib

import sentencepiece as spm

root = pathlib.Path(__file__).resolve().parent.parent
out = root / "tests/data/tokenizers"
lines = (root / "data/corpus/train.txt").read_text(encoding="utf-8").splitlines()[:4000]

model = io.BytesIO()
spm.SentencePieceTrainer.train(
    sentence_iterator=iter(lines), model_writer=model, model_type="bpe", vocab_size=600,
    byte_fallback=True, normalization_rule_name="identity", add_dummy_prefix=True,
    remove_extra_whitespaces=False, split_digits=True, allow_whitespace_only_pieces=True,
    character_coverage=1.0, unk_id=0, bos_id=1, eos_id=2, pad_id=-1, num_threads=1, minloglevel=2)
(out / "sp_bpe.tokenizer.model").write_bytes(model.getvalue())

sp = spm.SentencePieceProcessor(model_proto=model.getvalue())
texts = [c["text"] for c in json.loads((out / "mistral.ids.json").read_text(encoding="utf-8"))["cases"]]
cases = []
for text in texts:
    ids = sp.encode(text)
    cases.append({"text": text, "ids": ids, "ids_special": [sp.bos_id()] + ids, "decoded": sp.decode(ids)})
meta = {"tokenizer": "sp_bpe.tokenizer.model", "generator": f"scripts/make_spm_golden.py, sentencepiece {spm.__version__}"}
with open(out / "sp_bpe.ids.json", "w", encoding="utf-8") as f:
    f.write(json.dumps(meta, ensure_ascii=False)[:-1] + ',"cases":[\n')
    f.write(",\n".join(json.dumps(c, ensure_ascii=False) for c in cases))
    f.write("]}\n")
print(f"{len(cases)} cases, vocab {sp.get_piece_size()}, model {len(model.getvalue())} bytes")
