# tests/cli/check_command.cmake — the installed `specdec` command, run as a user would, on the shipped models.
# Run by ctest: cmake -DSPECDEC=<the built command> -DROOT=<source dir> -DWORK=<scratch dir> -DCASE=<case>
#   -P check_command.cmake. Each CASE is one ctest entry (a few seconds each). The command's stdout is a
# pipe here, so generate prints plain text (no colour codes), which is what the checks compare.

function(run_specdec out_var err_var rc_var)
    execute_process(COMMAND ${SPECDEC} ${ARGN} WORKING_DIRECTORY ${ROOT}
        OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc TIMEOUT 60)
    set(${out_var} "${out}" PARENT_SCOPE)
    set(${err_var} "${err}" PARENT_SCOPE)
    set(${rc_var} "${rc}" PARENT_SCOPE)
endfunction()

function(expect_rc want rc err what)
    if(NOT rc STREQUAL want)
        message(FATAL_ERROR "${what}: exit status ${rc}, expected ${want}; stderr:\n${err}")
    endif()
endfunction()

function(expect_match regex text what)
    if(NOT text MATCHES "${regex}")
        message(FATAL_ERROR "${what}: expected to match '${regex}', got:\n${text}")
    endif()
endfunction()

set(prompt "It was the best of times, it was the worst of times,")

if(CASE STREQUAL "generate")
    # Greedy speculative decoding prints exactly the text of plain greedy decoding.
    run_specdec(ar ar_err rc generate --target models/target --method ar --prompt "${prompt}" --max-new-tokens 40)
    expect_rc(0 "${rc}" "${ar_err}" "generate --method ar")
    foreach(method sd tree cs)
        run_specdec(out err rc generate --target models/target --draft models/small --method ${method}
            --prompt "${prompt}" --max-new-tokens 40)
        expect_rc(0 "${rc}" "${err}" "generate --method ${method}")
        if(NOT out STREQUAL ar)
            message(FATAL_ERROR "generate --method ${method} printed\n${out}\nplain decoding (--method ar) printed\n${ar}")
        endif()
        expect_match("^${method}: 40 tokens in [0-9]+ target forwards, tau [0-9.]+, [0-9.]+ tok/s; autoregressive [0-9.]+ tok/s: speedup [0-9.]+x \\(timed again without printing, one run each; .+, [0-9]+ threads?\\); identical to autoregressive greedy decoding"
            "${err}" "generate --method ${method}'s summary")
    endforeach()
    # Prompt lookup needs no drafter: the text itself drafts, and the output is still plain greedy decoding's.
    run_specdec(out err rc generate --target models/target --method lookup --prompt "${prompt}" --max-new-tokens 40)
    expect_rc(0 "${rc}" "${err}" "generate --method lookup")
    if(NOT out STREQUAL ar)
        message(FATAL_ERROR "generate --method lookup printed\n${out}\nplain decoding (--method ar) printed\n${ar}")
    endif()
    expect_match("^lookup: 40 tokens in [0-9]+ target forwards, tau [0-9.]+, [0-9.]+ tok/s; autoregressive [0-9.]+ tok/s: speedup [0-9.]+x \\(timed again without printing, one run each; .+, [0-9]+ threads?\\); identical to autoregressive greedy decoding"
        "${err}" "generate --method lookup's summary")
    string(FIND "${ar}" "${prompt}" at)
    if(NOT at EQUAL 0)
        message(FATAL_ERROR "the output does not start with the prompt:\n${ar}")
    endif()
    string(LENGTH "${prompt}" n_prompt)
    string(LENGTH "${ar}" n_out)
    math(EXPR n_min "${n_prompt} + 40")
    if(n_out LESS n_min)  # 40 tokens of a 4096-token BPE add more than 40 characters
        message(FATAL_ERROR "the continuation is too short:\n${ar}")
    endif()
    # At T > 0 one text tests no law: the summary says what was not checked and what the acceptor needs.
    run_specdec(out err rc generate --target models/target --draft models/small --prompt "${prompt}" --max-new-tokens 16
        --temperature 1 --no-baseline)
    expect_rc(0 "${rc}" "${err}" "generate --temperature 1")
    expect_match("distribution not checked in this run \\(speculative sampling: lossless when each draft is drawn from q\\)"
        "${err}" "generate --temperature 1's summary")
    # Target and drafter swapped: a warning on stderr, the text still the target's (here models/small's).
    run_specdec(out err rc generate --target models/small --draft models/target --prompt "${prompt}" --max-new-tokens 8)
    expect_rc(0 "${rc}" "${err}" "generate with the models swapped")
    expect_match("specdec: warning: the drafter models/target \\([0-9]+ matrix parameters per forward\\) is larger than the target models/small"
        "${err}" "generate with the models swapped")
    run_specdec(out err rc generate --target models/target --draft models/small --prompt "${prompt}" --max-new-tokens 8)
    string(FIND "${err}" "warning" has_warning)
    if(NOT has_warning EQUAL -1)
        message(FATAL_ERROR "a drafter smaller than its target was warned about:\n${err}")
    endif()
    string(ASCII 27 esc)
    string(FIND "${ar}" "${esc}" has_escape)
    if(NOT has_escape EQUAL -1)
        message(FATAL_ERROR "colour codes in piped output:\n${ar}")
    endif()
    run_specdec(out err rc generate --target models/target --draft models/small --prompt "${prompt}" --max-new-tokens 8
        --color always --no-baseline)
    expect_rc(0 "${rc}" "${err}" "generate --color always")
    string(FIND "${out}" "${esc}[32m" has_escape)
    if(has_escape EQUAL -1)
        message(FATAL_ERROR "--color always printed no colour:\n${out}")
    endif()
elseif(CASE STREQUAL "inspect")
    run_specdec(out err rc inspect models/target)
    expect_rc(0 "${rc}" "${err}" "inspect models/target")
    expect_match("hidden_size +384\n" "${out}" "inspect's config")
    expect_match("model\\.embed_tokens\\.weight +BF16 +\\[4096, 384\\] +3,145,728\n" "${out}" "inspect's tensor table")
    expect_match("tensors: 74, 14,162,304 parameters" "${out}" "inspect's tensor count")
    expect_match("tokenizer: byte-level BPE" "${out}" "inspect's tokenizer")
    expect_match("vocab size +4096\n" "${out}" "inspect's vocab size")
    expect_match("eos +0 \"<\\|endoftext\\|>\"" "${out}" "inspect's special tokens")
    # A Mistral with a sliding window narrower than its context: read, the context capped, both printed.
    file(REMOVE_RECURSE ${WORK}/mistral)
    file(COPY ${ROOT}/models/small/model.safetensors ${ROOT}/models/small/tokenizer.json DESTINATION ${WORK}/mistral)
    file(READ ${ROOT}/models/small/config.json config)
    string(REPLACE "\"model_type\": \"llama\"," "\"model_type\": \"mistral\", \"sliding_window\": 64," config "${config}")
    file(WRITE ${WORK}/mistral/config.json "${config}")
    run_specdec(out err rc inspect ${WORK}/mistral)
    expect_rc(0 "${rc}" "${err}" "inspect a Mistral with a sliding window")
    expect_match("sliding_window +64\n" "${out}" "inspect's sliding window")
    expect_match("read as: max_position_embeddings 64, capped at the sliding window" "${out}" "inspect's capped context")
elseif(CASE STREQUAL "convert")
    # HF -> llama2.c -> HF: the command's path through the files (tests/io checks the logits).
    file(REMOVE_RECURSE ${WORK})
    file(MAKE_DIRECTORY ${WORK})
    run_specdec(out err rc convert models/small ${WORK}/small.bin)
    expect_rc(0 "${rc}" "${err}" "convert HF -> .bin")
    run_specdec(out err rc convert ${WORK}/small.bin ${WORK}/back --dtype bf16 --tokenizer models/small/tokenizer.json)
    expect_rc(0 "${rc}" "${err}" "convert .bin -> HF")
    foreach(f config.json model.safetensors tokenizer.json)
        if(NOT EXISTS ${WORK}/back/${f})
            message(FATAL_ERROR "convert .bin -> HF wrote no ${f}")
        endif()
    endforeach()
    run_specdec(a err rc generate --target models/small --prompt "${prompt}" --max-new-tokens 24)
    run_specdec(b err rc generate --target ${WORK}/back --prompt "${prompt}" --max-new-tokens 24)
    expect_rc(0 "${rc}" "${err}" "generate from the converted folder")
    if(NOT a STREQUAL b)  # the drafter is stored in bf16: f32 -> bf16 is exact for it
        message(FATAL_ERROR "the converted model decodes\n${b}\nthe original\n${a}")
    endif()
    run_specdec(out err rc convert models/small ${WORK}/small.bin)
    expect_rc(1 "${rc}" "${err}" "convert onto an existing file")
    expect_match("^specdec: \\[specdec\\.cli\\] .*small\\.bin: exists" "${err}" "convert onto an existing file")
    # HF -> GGUF (f32: the bf16 drafter widens exactly, the tokenizer goes inside) decodes the same.
    run_specdec(out err rc convert models/small ${WORK}/small.gguf)
    expect_rc(0 "${rc}" "${err}" "convert to GGUF")
    run_specdec(c err rc generate --target ${WORK}/small.gguf --prompt "${prompt}" --max-new-tokens 24)
    expect_rc(0 "${rc}" "${err}" "generate from the GGUF")
    if(NOT a STREQUAL c)
        message(FATAL_ERROR "the GGUF decodes\n${c}\nthe original\n${a}")
    endif()
    run_specdec(out err rc inspect ${WORK}/small.gguf)
    expect_rc(0 "${rc}" "${err}" "inspect the GGUF")
    expect_match("general.architecture +\"llama\"" "${out}" "inspect the GGUF")
    expect_match("blk.0.attn_q.weight" "${out}" "inspect the GGUF")
    expect_match("config \\(as load_gguf reads it from the llama\\.\\* keys\\)" "${out}" "inspect the GGUF's config label")
    expect_match("tokenizer: byte-level BPE \\(GGUF tokenizer\\.ggml\\.model \"gpt2\"\\)" "${out}" "inspect the GGUF's tokenizer kind")
    expect_match("file +none of its own: the GGUF file's tokenizer\\.ggml\\.\\* keys" "${out}" "inspect the GGUF's tokenizer file")
    # GGUF -> HF: the GGUF's tokenizer is written as tokenizer.json, and the folder decodes the same.
    run_specdec(out err rc convert ${WORK}/small.gguf ${WORK}/from_gguf)
    expect_rc(0 "${rc}" "${err}" "convert GGUF -> HF")
    expect_match("from_gguf/tokenizer\\.json" "${out}" "convert GGUF -> HF names the tokenizer it wrote")
    foreach(f config.json model.safetensors tokenizer.json)
        if(NOT EXISTS ${WORK}/from_gguf/${f})
            message(FATAL_ERROR "convert GGUF -> HF wrote no ${f}")
        endif()
    endforeach()
    run_specdec(d err rc generate --target ${WORK}/from_gguf --prompt "${prompt}" --max-new-tokens 24)
    expect_rc(0 "${rc}" "${err}" "generate from the folder converted from GGUF")
    if(NOT a STREQUAL d)
        message(FATAL_ERROR "the folder converted from GGUF decodes\n${d}\nthe original\n${a}")
    endif()
    run_specdec(out err rc inspect ${WORK}/from_gguf)
    expect_rc(0 "${rc}" "${err}" "inspect the folder converted from GGUF")
    expect_match("tokenizer: byte-level BPE \\(tokenizer\\.json\\)" "${out}" "inspect the folder converted from GGUF")
    # The EAGLE-layout drafter to the folder each serving engine loads (the names and shapes are
    # checked in tests/methods/eagle_fspad; here the command's path and its two architectures).
    foreach(engine_and_arch "sglang|LlamaForCausalLMEagle" "vllm|EagleLlamaForCausalLM")
        string(REPLACE "|" ";" parts "${engine_and_arch}")
        list(GET parts 0 engine)
        list(GET parts 1 arch)
        run_specdec(out err rc convert --to eagle models/eagle_layout ${WORK}/eagle_${engine} --engine ${engine} --dtype bf16)
        expect_rc(0 "${rc}" "${err}" "convert --to eagle --engine ${engine}")
        expect_match("architectures \\[\"${arch}\"\\]" "${out}" "convert --to eagle --engine ${engine}")
        file(READ ${WORK}/eagle_${engine}/config.json config)
        expect_match("\"architectures\": \\[\n +\"${arch}\"" "${config}" "the ${engine} folder's config.json")
        if(NOT EXISTS ${WORK}/eagle_${engine}/model.safetensors)
            message(FATAL_ERROR "convert --to eagle --engine ${engine} wrote no model.safetensors")
        endif()
    endforeach()
    # --force replaces a model folder's own files and nothing else: a folder holding other files (here, the
    # input's parent) is refused with every file intact; a stale tokenizer.json does not outlive the model.
    file(MAKE_DIRECTORY ${WORK}/parent)
    file(WRITE ${WORK}/parent/notes.txt "keep me")
    run_specdec(out err rc convert --to eagle models/eagle_layout ${WORK}/parent --force)
    expect_rc(1 "${rc}" "${err}" "convert --to eagle --force into a folder holding other files")
    expect_match("parent: holds notes\\.txt, which no model folder's writer replaces" "${err}" "convert --force into a folder of other files")
    if(NOT EXISTS ${WORK}/parent/notes.txt)
        message(FATAL_ERROR "convert --force deleted a file it does not write")
    endif()
    run_specdec(out err rc convert ${WORK}/small.bin ${WORK}/from_gguf --force)
    expect_rc(0 "${rc}" "${err}" "convert --force over a folder with a tokenizer")
    if(EXISTS ${WORK}/from_gguf/tokenizer.json)
        message(FATAL_ERROR "convert --force left the old tokenizer.json beside the new weights")
    endif()
    # A SentencePiece tokenizer.model keeps its name in a folder, and becomes run.c's tokenizer.bin beside
    # a .bin: both decode as the source folder does.
    file(MAKE_DIRECTORY ${WORK}/spm ${WORK}/spm_bin)
    file(COPY ${ROOT}/models/small/config.json ${ROOT}/models/small/model.safetensors DESTINATION ${WORK}/spm)
    file(COPY_FILE ${ROOT}/tests/data/tokenizers/sp_bpe.tokenizer.model ${WORK}/spm/tokenizer.model)
    run_specdec(spm_text err rc generate --target ${WORK}/spm --prompt "hello world" --max-new-tokens 8)
    expect_rc(0 "${rc}" "${err}" "generate with a tokenizer.model")
    run_specdec(out err rc convert ${WORK}/spm ${WORK}/spm_folder)
    expect_rc(0 "${rc}" "${err}" "convert a folder with a tokenizer.model")
    expect_match("spm_folder/tokenizer\\.model" "${out}" "convert names the tokenizer.model it copied")
    run_specdec(out err rc convert ${WORK}/spm ${WORK}/spm_bin/m.bin)
    expect_rc(0 "${rc}" "${err}" "convert a tokenizer.model folder to .bin")
    expect_match("spm_bin/tokenizer\\.bin" "${out}" "convert writes run.c's tokenizer.bin from a tokenizer.model")
    foreach(converted ${WORK}/spm_folder ${WORK}/spm_bin/m.bin)
        run_specdec(text err rc generate --target ${converted} --prompt "hello world" --max-new-tokens 8)
        expect_rc(0 "${rc}" "${err}" "generate ${converted}")
        if(NOT text STREQUAL spm_text)
            message(FATAL_ERROR "${converted} printed\n${text}\nits source folder printed\n${spm_text}")
        endif()
    endforeach()
    # Another model's tokenizer.bin beside OUT is replaced only under --force.
    run_specdec(out err rc convert ${WORK}/spm ${WORK}/spm_bin/m2.bin)
    expect_rc(1 "${rc}" "${err}" "convert beside an existing tokenizer.bin")
    expect_match("spm_bin/tokenizer\\.bin: exists, and run\\.c reads the tokenizer of" "${err}" "convert beside a tokenizer.bin")
    # Byte-level BPE has no tokenizer.bin form: the command says none was written.
    run_specdec(out err rc convert ${WORK}/small.gguf ${WORK}/spm_bin/bpe.bin)
    expect_rc(0 "${rc}" "${err}" "convert a byte-level GGUF to .bin")
    expect_match("note: the tokenizer \\(byte-level BPE .*\\) has no llama2\\.c form" "${out}" "convert GGUF -> .bin's note")
    # GGUF -> GGUF in another --dtype is a conversion; a file OUT's folder must exist.
    run_specdec(out err rc convert ${WORK}/small.gguf ${WORK}/small_q8.gguf --dtype q8_0)
    expect_rc(0 "${rc}" "${err}" "convert GGUF -> GGUF q8_0")
    run_specdec(out err rc convert ${WORK}/small.gguf ${WORK}/no_such_folder/m.gguf)
    expect_rc(1 "${rc}" "${err}" "convert into a missing folder")
    expect_match("no_such_folder/m\\.gguf: its folder .*no_such_folder does not exist" "${err}" "convert into a missing folder")
    # A folder OUT may be new, its parent not: a mistyped path leaves no tree of folders behind.
    foreach(args "${WORK}/no_such_folder/deeper/x" "--to;eagle;models/eagle_layout;${WORK}/no_such_folder/x")
        if(args MATCHES "^--to")
            run_specdec(out err rc convert ${args})
        else()
            run_specdec(out err rc convert models/small ${args})
        endif()
        expect_rc(1 "${rc}" "${err}" "convert into a folder whose parent is missing (${args})")
        expect_match("its folder .*no_such_folder[a-z/]* does not exist; create it first" "${err}"
            "convert into a folder whose parent is missing (${args})")
        if(EXISTS ${WORK}/no_such_folder)
            message(FATAL_ERROR "convert ${args} made the missing folder ${WORK}/no_such_folder")
        endif()
    endforeach()
elseif(CASE STREQUAL "errors")
    # A malformed command line: a message and exit status 2. A file the library refuses: exit 1.
    foreach(args "generate;--targt;models/target"
                 "generate;--target"
                 "generate;--target;models/target;--prompt;x;--temperature;warm"
                 "generate;--target;models/target;--prompt;x;--method;fast"
                 "generate;--target;models/target;--prompt;x;--max-new-tokens;-3"
                 "generate;--prompt;x"
                 "inspect"
                 "inspect;a;b"
                 "convert;models/small"
                 "convert;models/small;x.bin;--dtype;f8"
                 "convert;models/eagle;x;--to;gguf"
                 "convert;models/small;x;--engine;vllm"
                 "convert;models/eagle;x;--to;eagle;--engine;tgi"
                 "convert;models/target;x;--dtype;f16"
                 "convert;models/target;t2.bin;--dtype;bf16"
                 "convert;models/eagle_layout;x;--to;eagle;--dtype;f16"
                 "inspect;models/target;--help=1"
                 "help;frobnicate"
                 "frobnicate"
                 "")
        run_specdec(out err rc ${args})
        expect_rc(2 "${rc}" "${err}" "specdec ${args}")
        expect_match("^specdec( [a-z]+)?: .+\n|^usage: specdec" "${err}" "specdec ${args}'s message")
    endforeach()
    # An HF folder of PyTorch weights: inspect names them, as generate does (load_checkpoint).
    run_specdec(out err rc inspect tests/data/malformed/checkpoint/pytorch_model_bin)
    expect_rc(1 "${rc}" "${err}" "inspect a folder of PyTorch weights")
    expect_match("\\[specdec\\.checkpoint\\] tests/data/malformed/checkpoint/pytorch_model_bin/pytorch_model\\.bin: PyTorch weights"
        "${err}" "inspect a folder of PyTorch weights")
    # An HF folder with only SentencePiece's tokenizer.model: read (inspect names it), and a broken one
    # refused by the reader.
    file(REMOVE_RECURSE ${WORK}/spm_only)
    file(COPY ${ROOT}/models/small/config.json ${ROOT}/models/small/model.safetensors DESTINATION ${WORK}/spm_only)
    configure_file(${ROOT}/tests/data/tokenizers/sp_bpe.tokenizer.model ${WORK}/spm_only/tokenizer.model COPYONLY)
    run_specdec(out err rc inspect ${WORK}/spm_only)
    expect_rc(0 "${rc}" "${err}" "inspect a folder with tokenizer.model only")
    expect_match("SentencePiece BPE with byte fallback \\(tokenizer.model\\)\n +file +[^\n]*tokenizer.model\n +vocab size +600"
        "${out}" "inspect a folder with tokenizer.model only")
    file(WRITE ${WORK}/spm_only/tokenizer.model "not a ModelProto")
    run_specdec(out err rc generate --target ${WORK}/spm_only --prompt x)
    expect_rc(1 "${rc}" "${err}" "a folder with a broken tokenizer.model")
    expect_match("\\[specdec\\.sentencepiece\\] [^\n]*spm_only/tokenizer\\.model: "
        "${err}" "a folder with a broken tokenizer.model")
    # A forgotten value is not filled with the next flag, a flag given twice is not last-wins, and a range
    # open at one end says so.
    foreach(args_and_regex "generate;--target;--prompt;x|option '--target' needs a value \\(PATH\\), found the option '--prompt'"
                           "generate;--target;models/target;--prompt;--no-baseline|option '--prompt' needs a value \\(TEXT\\), found the option '--no-baseline'"
                           "generate;--target;models/target;--draft;--help;--prompt;x|option '--draft' needs a value \\(PATH\\), found the option '--help'"
                           "generate;--target;models/target;--prompt;a;--prompt;b|option '--prompt' is given twice \\('a' and 'b'\\)"
                           "generate;--target;models/target;--target=models/small;--prompt;a|option '--target' is given twice"
                           "generate;--target;models/target;--prompt;x;--top-p;0|option '--top-p': 0 is outside \\(0, 1\\]"
                           "generate;--target;models/target;--draft;models/small;--method;lookup;--prompt;x|--method lookup drafts from the text itself: drop --draft"
                           "generate;--target;models/target;--draft;models/small;--ngram;2;--prompt;x|option '--ngram' applies to --method lookup"
                           "generate;--target;models/target;--method;lookup;--ngram;0;--prompt;x|option '--ngram'"
                           "generate;--target;models/target;--prompt;x;--no-baseline;--no-baseline|option '--no-baseline' is given twice"
                           "generate;--target;models/target;--prompt;x;--tokenizer=|option '--tokenizer' needs a value \\(PATH\\), got an empty one"
                           "generate;--target;models/target;--prompt;x;--draft-tokenizer;t.json|option '--draft-tokenizer' goes with --draft"
                           "generate;--target;models/target;--draft;models/glide;--method;glide;--gamma;33;--prompt;x|option '--gamma': glide's chain of 33 exceeds its 32 drafts"
                           "generate;--target;models/target;--prompt;x;--temperature;0x10|option '--temperature': '0x10' is not a number"
                           "generate;--target;models/target;--prompt;x;--temperature;+3|option '--temperature': '\\+3' is not a number"
                           "generate;--target;models/target;--prompt;x;--max-new-tokens;0|option '--max-new-tokens': 0 is outside \\[1, "
                           "generate;--target;models/target;--prompt;x;--temp;1|unknown option '--temp' \\(did you mean --temperature\\?\\)"
                           "generate;--target;models/target;--prompt;x;--draft-model;models/small|unknown option '--draft-model' \\(did you mean --draft\\?\\)"
                           "generate;--help=1|option '--help' takes no value")
        string(REPLACE "|" ";" parts "${args_and_regex}")
        list(POP_BACK parts regex)
        run_specdec(out err rc ${parts})
        expect_rc(2 "${rc}" "${err}" "specdec ${parts}")
        expect_match("^specdec generate: ${regex}" "${err}" "specdec ${parts}")
    endforeach()
    run_specdec(out err rc generate --target models/target --prompt=--x --max-new-tokens 2 --no-baseline)
    expect_rc(0 "${rc}" "${err}" "a prompt starting with -- given as --prompt=TEXT")
    expect_match("^--x" "${out}" "a prompt starting with -- given as --prompt=TEXT")
    # Another model's tokenizer: more tokens than the model's rows is refused; fewer is warned about (its
    # ids past the tokenizer print as <token N>), since padded embedding rows are legitimate.
    run_specdec(out err rc generate --target models/small --tokenizer tests/data/tokenizers/mistral.tokenizer.json --prompt a)
    expect_rc(1 "${rc}" "${err}" "a tokenizer larger than the model's vocabulary")
    expect_match("^specdec: \\[specdec\\.cli\\] the tokenizer tests/data/tokenizers/mistral\\.tokenizer\\.json has 32000 tokens, more than the vocab_size 4096 of the model models/small"
        "${err}" "a tokenizer larger than the model's vocabulary")
    run_specdec(out err rc generate --target models/target --tokenizer tests/data/tokenizers/sp_tiny.tokenizer.json --prompt a
        --max-new-tokens 2 --no-baseline)
    expect_rc(0 "${rc}" "${err}" "a tokenizer smaller than the model's vocabulary")
    expect_match("specdec: warning: the tokenizer tests/data/tokenizers/sp_tiny\\.tokenizer\\.json has 296 tokens, the model models/target has vocab_size 4096: ids 296\\.\\.4095 have no text"
        "${err}" "a tokenizer smaller than the model's vocabulary")
    foreach(args_and_regex "convert;models/target;x;--dtype;f16|option '--dtype': 'f16' for OUT 'x', a folder: an HF folder is written in f32 or bf16"
                           "convert;models/target;t2.bin;--dtype;bf16|option '--dtype': 'bf16' for OUT 't2\\.bin': llama2\\.c's run\\.c reads float32")
        string(REPLACE "|" ";" parts "${args_and_regex}")
        list(POP_BACK parts regex)
        run_specdec(out err rc ${parts})
        expect_rc(2 "${rc}" "${err}" "specdec ${parts}")
        expect_match("^specdec convert: ${regex}" "${err}" "specdec ${parts}")
    endforeach()
    run_specdec(out err rc generate --target models/target --prompt x --tempreature 1)
    expect_match("did you mean --temperature\\?" "${err}" "a misspelt flag")
    run_specdec(out err rc generat --target models/target --prompt x)
    expect_rc(2 "${rc}" "${err}" "a misspelt command")
    expect_match("^specdec: unknown command 'generat' \\(did you mean 'generate'\\?\\)" "${err}" "a misspelt command")
    # A request longer than the context is refused before anything is printed (the prompt included).
    run_specdec(out err rc generate --target models/target --prompt "${prompt}" --max-new-tokens 600)
    expect_rc(1 "${rc}" "${err}" "a request past the context")
    expect_match("exceeds the target's context of 512 tokens" "${err}" "a request past the context")
    if(NOT out STREQUAL "")
        message(FATAL_ERROR "a refused request printed on stdout:\n${out}")
    endif()
    foreach(args "inspect;models/no_such_model"
                 "inspect;models"
                 "inspect;README.md"
                 "generate;--target;models/target;--prompt;x;--max-new-tokens;600"
                 "generate;--target;models/target;--draft;models/glide;--method;edd;--prompt;x")
        run_specdec(out err rc ${args})
        expect_rc(1 "${rc}" "${err}" "specdec ${args}")
        expect_match("(^|\n)specdec: \\[specdec\\.[a-z_]+\\] " "${err}" "specdec ${args}'s message")
    endforeach()
    # An EAGLE drafter the serving layout cannot hold is refused by the field, before OUT is written:
    # models/eagle keeps its end norms, models/fspad has FSPAD's sampler.
    foreach(case_and_regex "eagle|layout is not \"eagle\".*train with \"layout\": \"eagle\""
                           "fspad|connector 'feature_sampler'.*no engine has its sampler")
        string(REPLACE "|" ";" parts "${case_and_regex}")
        list(GET parts 0 name)
        list(GET parts 1 regex)
        file(REMOVE_RECURSE ${WORK}/eagle_out)
        run_specdec(out err rc convert --to eagle models/${name} ${WORK}/eagle_out)
        expect_rc(1 "${rc}" "${err}" "convert --to eagle models/${name}")
        expect_match("specdec: \\[specdec\\.convert\\] .*${regex}" "${err}" "convert --to eagle models/${name}")
        if(EXISTS ${WORK}/eagle_out)
            message(FATAL_ERROR "convert --to eagle models/${name} wrote ${WORK}/eagle_out before refusing")
        endif()
    endforeach()
    foreach(cmd "" generate convert inspect)
        run_specdec(out err rc ${cmd} --help)
        expect_rc(0 "${rc}" "${err}" "specdec ${cmd} --help")
        expect_match("^usage: specdec" "${out}" "specdec ${cmd} --help")
    endforeach()
elseif(CASE STREQUAL "vocab")
    # The drafter's vocabulary against the target's (the library's check_vocab_compatible): a tokenizer
    # that is the target's without its last token is a prefix, and decoding prints the target's greedy
    # text; one with two ids swapped is refused naming them. (tests/io checks a drafter of fewer
    # embedding rows, padded by PaddedVocabProposer.)
    file(REMOVE_RECURSE ${WORK})
    file(MAKE_DIRECTORY ${WORK})
    file(READ ${ROOT}/models/small/tokenizer.json tok)
    string(REPLACE ",\"ĠInt\":4095}" "}" shorter "${tok}")
    string(REPLACE ",[\"ĠI\",\"nt\"]]}}" "]}}" shorter "${shorter}")
    string(REPLACE "\"Q\":49,\"R\":50" "\"Q\":50,\"R\":49" swapped "${tok}")
    if(shorter STREQUAL tok OR swapped STREQUAL tok)
        message(FATAL_ERROR "models/small/tokenizer.json is not the one this test edits")
    endif()
    file(WRITE ${WORK}/shorter.json "${shorter}")
    file(WRITE ${WORK}/swapped.json "${swapped}")
    run_specdec(ar err rc generate --target models/target --prompt "${prompt}" --max-new-tokens 24)
    expect_rc(0 "${rc}" "${err}" "generate --method ar")
    run_specdec(out err rc generate --target models/target --draft models/small --draft-tokenizer ${WORK}/shorter.json
        --prompt "${prompt}" --max-new-tokens 24 --no-baseline)
    expect_rc(0 "${rc}" "${err}" "generate with a prefix tokenizer")
    if(NOT out STREQUAL ar)
        message(FATAL_ERROR "the drafter with a prefix tokenizer printed\n${out}\nplain decoding printed\n${ar}")
    endif()
    run_specdec(out err rc generate --target models/target --draft models/small --draft-tokenizer ${WORK}/swapped.json
        --prompt "${prompt}")
    expect_rc(1 "${rc}" "${err}" "generate with a mismatched tokenizer")
    expect_match("^specdec: \\[specdec\\.vocab\\] the drafter's tokenizer differs from the target's at 2 of the 4096 ids they share \\(id 49: target 'Q', drafter 'R'; id 50: target 'R', drafter 'Q'\\)"
        "${err}" "a mismatched tokenizer's message")
    expect_match("swapped\\.json" "${err}" "a mismatched tokenizer's message names the file")
    expect_match("hint: --method text" "${err}" "a mismatched tokenizer's message points to --method text")
    # --method text takes that drafter all the same: it drafts through the text (TextBridgeProposer), and
    # the output is still plain greedy decoding's.
    run_specdec(out err rc generate --target models/target --draft models/small --draft-tokenizer ${WORK}/swapped.json
        --method text --prompt "${prompt}" --max-new-tokens 24)
    expect_rc(0 "${rc}" "${err}" "generate --method text with another tokenizer")
    if(NOT out STREQUAL ar)
        message(FATAL_ERROR "--method text printed\n${out}\nplain decoding printed\n${ar}")
    endif()
    expect_match("^text: 24 tokens in [0-9]+ target forwards, tau [0-9.]+, [0-9.]+ tok/s; autoregressive [0-9.]+ tok/s: speedup [0-9.]+x \\(timed again without printing, one run each; .+, [0-9]+ threads?\\); identical to autoregressive greedy decoding"
        "${err}" "generate --method text's summary")
elseif(CASE STREQUAL "scale")
    # --target-scale 110m: the target widened to 110M cost (docs/widening.md) prints the greedy text of the
    # trained one, with a Llama drafter and with drafters widened with it (EDD's; FSPAD's sampler and PAD
    # layer), each in the number of target forwards it takes against the trained target (the same drafts).
    file(REMOVE_RECURSE ${WORK})
    file(MAKE_DIRECTORY ${WORK})
    run_specdec(ar err rc generate --target models/target --method ar --prompt "${prompt}" --max-new-tokens 40)
    expect_rc(0 "${rc}" "${err}" "generate --method ar")
    set(label "cost-scaled \\(widened demo target: same outputs, 110M cost\\)")
    foreach(method_and_draft "sd|models/small" "edd|models/edd" "sd|models/fspad")
        string(REPLACE "|" ";" parts "${method_and_draft}")
        list(GET parts 0 method)
        list(GET parts 1 draft)
        set(what "generate --method ${method} --draft ${draft}")
        run_specdec(out err rc generate --target models/target --draft ${draft} --method ${method}
            --prompt "${prompt}" --max-new-tokens 40 --no-baseline)
        expect_rc(0 "${rc}" "${err}" "${what}")
        string(REGEX MATCH "in [0-9]+ target forwards" forwards "${err}")
        run_specdec(out err rc generate --target models/target --draft ${draft} --method ${method} --target-scale 110m
            --prompt "${prompt}" --max-new-tokens 40 --threads 2)
        expect_rc(0 "${rc}" "${err}" "${what} --target-scale 110m")
        if(NOT out STREQUAL ar)
            message(FATAL_ERROR "${what} --target-scale 110m printed\n${out}\nplain decoding of the trained target printed\n${ar}")
        endif()
        expect_match("^${method}: 40 tokens ${forwards}, tau [0-9.]+, [0-9.]+ tok/s; autoregressive [0-9.]+ tok/s: speedup [0-9.]+x \\(timed again without printing, one run each; .+, [0-9]+ threads?\\); identical to autoregressive greedy decoding; ${label}\n$"
            "${err}" "${what} --target-scale 110m's summary (the forwards of the trained target's run: ${forwards})")
    endforeach()
    run_specdec(out err rc generate --target models/target --target-scale 3b --prompt x)
    expect_rc(2 "${rc}" "${err}" "generate --target-scale 3b")
    expect_match("option '--target-scale': '3b'; known: 110m, 1b, 7b" "${err}" "generate --target-scale 3b")
    run_specdec(out err rc convert models/small ${WORK}/small.bin)
    expect_rc(0 "${rc}" "${err}" "convert HF -> .bin")
    run_specdec(out err rc generate --target ${WORK}/small.bin --target-scale 110m --prompt x)
    expect_rc(1 "${rc}" "${err}" "generate --target-scale on a llama2.c file")
    expect_match("^specdec: \\[specdec\\.cli\\] .*small\\.bin: --target-scale widens an HF folder" "${err}"
        "generate --target-scale on a llama2.c file")
elseif(CASE STREQUAL "serving")
    # EAGLE's folder for SGLang or vLLM (convert --to eagle) runs here too (load_feature_drafter): each
    # drafts as models/eagle_layout, the drafter it was written from (f32: its bf16 weights exactly), so
    # greedy eagle2 and sd print the same text in the same number of target forwards.
    file(REMOVE_RECURSE ${WORK})
    file(MAKE_DIRECTORY ${WORK})
    foreach(method eagle2 sd)
        run_specdec(want want_err rc generate --target models/target --draft models/eagle_layout --method ${method}
            --prompt "${prompt}" --max-new-tokens 32 --no-baseline)
        expect_rc(0 "${rc}" "${want_err}" "generate --method ${method} with models/eagle_layout")
        string(REGEX MATCH "in [0-9]+ target forwards" want_forwards "${want_err}")
        foreach(engine sglang vllm)
            if(NOT EXISTS ${WORK}/eagle_${engine})
                run_specdec(out err rc convert --to eagle models/eagle_layout ${WORK}/eagle_${engine} --engine ${engine})
                expect_rc(0 "${rc}" "${err}" "convert --to eagle --engine ${engine}")
            endif()
            set(what "generate --method ${method} with the ${engine} folder")
            run_specdec(out err rc generate --target models/target --draft ${WORK}/eagle_${engine} --method ${method}
                --prompt "${prompt}" --max-new-tokens 32 --no-baseline)
            expect_rc(0 "${rc}" "${err}" "${what}")
            if(NOT out STREQUAL want)
                message(FATAL_ERROR "${what} printed\n${out}\nmodels/eagle_layout printed\n${want}")
            endif()
            expect_match("^${method}: 32 tokens ${want_forwards}," "${err}" "${what} (models/eagle_layout: ${want_forwards})")
        endforeach()
    endforeach()
    # inspect reads the folder too ("bias" is EAGLE's key), and says why its two counts differ.
    run_specdec(out err rc inspect ${WORK}/eagle_sglang)
    expect_rc(0 "${rc}" "${err}" "inspect the sglang folder")
    expect_match("bias +true\n" "${out}" "inspect the sglang folder's config")
    expect_match("the file's tensors hold 294,528 more: tensors outside that Llama" "${out}" "inspect the sglang folder's counts")
elseif(CASE STREQUAL "messages")
    # What the command says beside the text: where generation stopped, options that did nothing, what
    # each count counts, where a default file was looked for, help and version.
    file(REMOVE_RECURSE ${WORK})
    file(MAKE_DIRECTORY ${WORK})
    # "THE END" ends at the end-of-text token after 8 tokens on the shipped pair; --ignore-eos goes on.
    run_specdec(out err rc generate --target models/target --draft models/small --prompt "THE END" --no-baseline)
    expect_rc(0 "${rc}" "${err}" "generate up to the end-of-text token")
    expect_match("^sd: ([0-9]+) tokens in [0-9]+ target forwards, .*; stopped at the end-of-text token 0 \"<\\|endoftext\\|>\" after [0-9]+ of --max-new-tokens 64 \\(--ignore-eos goes on\\)\n$"
        "${err}" "the summary of a run stopped at end-of-text")
    run_specdec(out err rc generate --target models/target --draft models/small --prompt "THE END" --no-baseline --ignore-eos)
    expect_rc(0 "${rc}" "${err}" "generate --ignore-eos")
    expect_match("^sd: 64 tokens in [0-9]+ target forwards, tau [0-9.]+, [0-9.]+ tok/s\n$" "${err}" "the summary with --ignore-eos")
    # --top-p and --top-k at temperature 0: run, with a note that they did nothing.
    foreach(flags_and_regex "--top-p;0.5|--top-p has" "--top-k;3|--top-k has" "--top-p;0.5;--top-k;3|--top-p and --top-k have")
        string(REPLACE "|" ";" parts "${flags_and_regex}")
        list(POP_BACK parts regex)
        run_specdec(out err rc generate --target models/target --prompt x --max-new-tokens 2 ${parts})
        expect_rc(0 "${rc}" "${err}" "generate ${parts} at temperature 0")
        expect_match("^specdec: note: ${regex} no effect under greedy decoding \\(temperature 0\\)" "${err}"
            "generate ${parts} at temperature 0")
    endforeach()
    run_specdec(out err rc generate --target models/target --prompt x --max-new-tokens 2 --temperature 1 --top-k 3)
    expect_rc(0 "${rc}" "${err}" "generate --temperature 1 --top-k 3")
    if(err MATCHES "note:")
        message(FATAL_ERROR "a sampled run was told its --top-k has no effect:\n${err}")
    endif()
    # inspect labels its two counts: every tensor in the file, and the Llama the config describes.
    run_specdec(out err rc inspect models/glide)
    expect_rc(0 "${rc}" "${err}" "inspect models/glide")
    expect_match("tensors: 14, 868,864 parameters in all the file's tensors" "${out}" "inspect models/glide's tensor count")
    expect_match("\nparameters: 770,432 \\(770\\.4k\\) in the Llama the config describes \\(embedding, 1 layer, norm; head tied to the embedding\\)"
        "${out}" "inspect models/glide's parameter count")
    expect_match("\n  the file's tensors hold 98,432 more: tensors outside that Llama" "${out}" "inspect models/glide's difference")
    run_specdec(out err rc inspect models/target)
    if(out MATCHES "the file's tensors hold")
        message(FATAL_ERROR "inspect models/target told a difference where its counts agree:\n${out}")
    endif()
    # --method cs's default table is bigram.json in or beside the drafter's folder: a copy of the drafter
    # elsewhere is told where it was looked for, and of --bigram.
    file(COPY ${ROOT}/models/small DESTINATION ${WORK}/lone)
    run_specdec(out err rc generate --target models/target --draft ${WORK}/lone/small --method cs --prompt x)
    expect_rc(1 "${rc}" "${err}" "generate --method cs without a bigram.json")
    expect_match("^specdec: \\[specdec\\.cli\\] [^\n]*lone/bigram\\.json: no such file; --method cs reads Max-Gram's table from bigram\\.json in the drafter's folder, else beside it .*--bigram PATH"
        "${err}" "generate --method cs without a bigram.json")
    run_specdec(out err rc generate --target models/target --draft ${WORK}/lone/small --method cs --prompt x
        --bigram models/bigram.json --max-new-tokens 2 --no-baseline)
    expect_rc(0 "${rc}" "${err}" "generate --method cs --bigram")
    # help: `specdec help COMMAND` is COMMAND's; every --tokenizer names the three files a folder may hold.
    foreach(cmd generate convert inspect)
        run_specdec(want err rc ${cmd} --help)
        run_specdec(out err rc help ${cmd})
        expect_rc(0 "${rc}" "${err}" "specdec help ${cmd}")
        if(NOT out STREQUAL want)
            message(FATAL_ERROR "specdec help ${cmd} printed\n${out}\nspecdec ${cmd} --help printed\n${want}")
        endif()
        expect_match("tokenizer\\.json, else tokenizer\\.model, else tokenizer\\.bin" "${out}" "specdec ${cmd} --help's --tokenizer")
    endforeach()
    run_specdec(out err rc help convert)
    expect_match("^usage: specdec convert IN OUT \\[--dtype f32\\|bf16\\|f16\\|q8_0\\] \\[--tokenizer PATH\\] \\[--force\\]\n"
        "${out}" "specdec convert --help's usage")
    # --version prints the version CMakeLists.txt's project() declares.
    file(READ ${ROOT}/CMakeLists.txt lists)
    string(REGEX MATCH "project\\(specdec VERSION ([0-9.]+)" unused "${lists}")
    run_specdec(out err rc --version)
    expect_rc(0 "${rc}" "${err}" "specdec --version")
    if(NOT out STREQUAL "specdec ${CMAKE_MATCH_1}\n")
        message(FATAL_ERROR "specdec --version printed '${out}', CMakeLists.txt declares version ${CMAKE_MATCH_1}")
    endif()
else()
    message(FATAL_ERROR "unknown CASE '${CASE}'")
endif()
