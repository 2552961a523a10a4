// specdec.hpp — speculative decoding of Llama-style language models, as four composable policies.
// SPDX-License-Identifier: MIT
//
// ## Use
// Header-only C++20. With CMake: `add_subdirectory(specdec)` or `find_package(specdec)`, then
// `target_link_libraries(app PRIVATE specdec::specdec)` (or `specdec::compiled`, which compiles the heavy
// bodies once: below). By hand: `g++ -std=c++20 -O2 -I<specdec> app.cpp -pthread`.
//
// ## A complete example
// The shipped models are HuggingFace folders (config.json, model.safetensors, tokenizer.json): a 14.2M
// target in models/target and a 0.6M drafter trained to imitate it in models/small. Run from the
// repository root (this is examples/00_first_composition.cpp; a ctest keeps the two the same):
//
//     #include "specdec.hpp"
//     #include <cstdio>
//     using namespace specdec;
//
//     int main() try {
//         // Step 1: the target, and a drafter that shares its tokenizer.
//         Checkpoint t = load_checkpoint("models/target"), d = load_checkpoint("models/small");
//         CpuModel target(t.config, std::move(t.weights));
//         CpuModel draft(d.config, std::move(d.weights));
//         const Tokenizer tok = Tokenizer::load("models/target/tokenizer.json");
//         // Step 2: the four policies.
//         ModelProposer proposer(draft);   // Proposer: the drafter's next-token logits
//         Chain builder{.gamma = 4};       // TreeBuilder: a chain of 4 drafts
//         TreeVerifier verifier;           // Verifier: one target forward over the tree
//         GreedyMatch acceptor;            // Acceptor: keep drafts equal to the target's argmax
//         // Step 3: the loop, on a tokenized prompt.
//         const std::vector<int> prompt = tok.encode("It was the best of times, it was the worst of times,");
//         const Generation g = speculative_generate(target, proposer, builder, verifier, acceptor, prompt,
//                                                   GenerateOptions{.max_new_tokens = 48});
//         std::printf("%s\n%zu tokens, tau = %.2f tokens per target forward\n", tok.decode(g.tokens).c_str(),
//                     g.tokens.size(), g.tau());
//         return 0;
//     } catch (const specdec::error& e) {  // a missing file, a bad config.json: the message names it
//         std::fprintf(stderr, "%s\n", e.what());
//         return 1;
//     }
//
// The output equals `autoregressive_generate(target, prompt, opts).tokens` token for token: GreedyMatch
// is lossless for any tree under greedy decoding, given a target whose logits for a node do not depend
// on the rest of the forward (CpuModel on AVX-512: bit-identical, tested; elsewhere up to rounding,
// which near-ties can flip). For sampling (temperature > 0) use
// SpeculativeSampling (chains), MultiDraftSampling (trees of sampled siblings) or SampleAndMatch (any
// tree); each acceptor states its precondition and throws specdec::error when it does not hold.
// Without model files, `random_weights(cfg, seed, std_dev)` makes a target of any Config and
// `perturbed(cfg, w, rel, seed)` a drafter near it (examples/01_autoregressive.cpp to 03).
//
// ## Other compositions (each a few lines in examples/)
// A proposer either scores the builder's nodes (ScoresNodes: ModelProposer over any LanguageModel,
// e.g. a GlideModel reading the target's KV cache) or drafts tokens itself, each with the law it came
// from (DraftsTokens: MaxGram, and Review — a drafter model reviewing a smaller token drafter, itself
// a DraftsTokens proposer, so cascades nest; Horizontal lets drafters take turns along one draft).
// Builders: Chain, KAryTree, ExpandedChain (GLIDE's CAPE). See examples/06_cs_drafting.cpp and
// examples/07_glide_cape.cpp.
//
// ## Your own policy
// Write a struct with the members its concept asks for (detail/core/concepts.hpp); a prompt-lookup
// proposer in 30 lines is examples/prompt_lookup.hpp, and docs/writing_a_policy.md states the rules
// the compiler cannot check (which random numbers to draw, what law to record, what observe() owes the
// loop). `static_assert(specdec::check_proposer<MyProposer>());` under the class names each missing
// member in its own error; so does a call of speculative_generate with a policy that does not fit.
// `prefill(model, tokens)` and `next_token_distribution(model, text, sampling)` give the exact law a
// lossless composition must reproduce, and `check::check_lossless(target, make, prompts, sampling, runs)`
// (detail/check/lossless.hpp) tests that it does: a printable report, with a planted lossy control.
//
// ## Compile-time options
// Define before the first `#include "specdec.hpp"` of a translation unit:
// - `SPECDEC_DECODING_ONLY`: only what decoding needs: core, model, file formats (so the shipped models
//   load), policies and the loop; util/ (progress, SVG), train/ and methods/ (CS Drafting, GLIDE) are
//   left out, so a program sees only the decoding API.
// - `SPECDEC_COMPILED` / `SPECDEC_IMPLEMENTATION` (detail/core/compiled.hpp): the CPU model's forward
//   pass, the file readers, the tokenizer and the config checks are compiled once, in the one unit that
//   defines SPECDEC_IMPLEMENTATION, instead of in every unit that calls them. With CMake, link
//   `specdec::compiled` (that unit as a static library; it defines SPECDEC_COMPILED for you). A small
//   program then compiles in a third of the time; templates (policies, the loop) stay header-only.
// The CUDA backend (`CudaModel`, kernels in kernels.cuh) is visible in translation units compiled by
// nvcc; link `specdec::cuda` (defined when CMake finds nvcc) for the CUDA runtime and cuBLASLt.
//
// ## Contents (the include order below is the dependency order)
#pragma once

// ---- core: the vocabulary of decoding (trees, sampling, randomness, the concepts)
#include "detail/core/compiled.hpp"                   // defines: SPECDEC_INLINE, SPECDEC_BODIES (header-only, or compiled once)
#include "detail/core/error.hpp"                      // defines: specdec::error (every bad input throws it)
#include "detail/core/rng.hpp"                        // defines: philox4x32, StepRng, RngStream (counter-based randomness)
#include "detail/core/sampling.hpp"                   // defines: Sampling, processed_probs, draft_probs, argmax, sample_index
#include "detail/core/views.hpp"                      // defines: Rows (per-node logits), KvView
#include "detail/core/text_codec.hpp"                 // defines: TextCodec (a model's ids and text; text_codec(Tokenizer) in io)
#include "detail/core/tree.hpp"                       // defines: Tree, Node, Draw, validate_path, pruned
#include "detail/core/concepts.hpp"                   // defines: LanguageModel, ExposesKV, ExposesHidden, ExposesCommittedHidden, Proposer, TreeBuilder,
                                                      //          Verifier, Acceptor, StepContext, StepOutcome, AcceptResult
#include "detail/core/policy_checks.hpp"              // defines: check_proposer, check_tree_builder, check_verifier, check_acceptor,
                                                      //          check_language_model (the concepts member by member)

// ---- util: progress lines and charts
#if !defined(SPECDEC_DECODING_ONLY)
#include "detail/util/progress.hpp"                   // defines: ProgressLine (progress with ETA for long work)
#include "detail/util/svg.hpp"                        // defines: write_svg_chart, Series (loss curves, benchmark charts)
#endif

// ---- model: the Llama and its CPU products
#include "detail/model/bf16.hpp"                      // defines: bf16, to_float, to_bf16
#include "detail/model/thread_pool.hpp"               // defines: ThreadPool (the parallel loops' workers; the caller owns it)
#include "detail/model/matmul.hpp"                    // defines: matmul, matmul_reference, dot, axpy, cpu_features
#include "detail/model/huge_pages.hpp"                // defines: HugePageAllocator, HugeVector (weights and KV cache on 2 MiB pages)
#include "detail/model/memory_budget.hpp"             // defines: available_memory_bytes, require_memory (asked before a model packs its matrices)
#include "detail/model/deferred_matrices.hpp"         // defines: LoadOptions, DeferredMatrices, MatrixRows, RowRef (matrices packed from the mapped file)
#include "detail/model/panel_matmul.hpp"              // defines: PanelMatrix, panel_matmul, panels_available
#include "detail/model/config.hpp"                    // defines: Config (HF LlamaConfig fields)
#include "detail/model/weights.hpp"                   // defines: Weights, LayerWeights, random_weights, perturbed, for_each_tensor
#include "detail/model/widen.hpp"                     // defines: widen, WidenShape, widen_preset, widened_config, materialize
                                                      //          (a trained model at a larger model's cost, same outputs)
#include "detail/model/cpu_model.hpp"                 // defines: CpuModel, ModelOptions, WeightFormat

// ---- io: file formats
#include "detail/io/json.hpp"                         // defines: json::Value, json::parse, json::dump
#include "detail/io/safetensors.hpp"                  // defines: SafetensorsFile, write_safetensors, DType
#include "detail/io/mapped_matrix.hpp"                // defines: detail::mapped_matrix_rows (a mapped matrix as MatrixRows, for deferred loading)
#include "detail/io/checkpoint_tensors.hpp"           // defines: CheckpointTensors (one model.safetensors or an index's shards)
#include "detail/io/checkpoint.hpp"                   // defines: load_checkpoint, save_checkpoint, load_config, Checkpoint
#include "detail/io/nfc.hpp"                          // defines: detail::nfc (Unicode NFC, the normalizer of Qwen's tokenizer.json)
#include "detail/io/tokenizer.hpp"                    // defines: Tokenizer (byte-level and SentencePiece-style BPE, HF tokenizer.json)
#include "detail/io/vocab_compat.hpp"                 // defines: check_vocab_compatible, VocabCompatibility (drafter vs target vocabularies)
#include "detail/io/llama2c.hpp"                      // defines: load_llama2c, save_llama2c, Llama2cTokenizer (llama2.c .bin files)
#include "detail/io/sentencepiece.hpp"                // defines: load_sentencepiece_model (SentencePiece's tokenizer.model, BPE)
#include "detail/io/gguf.hpp"                         // defines: load_gguf, save_gguf, read_gguf_header, GgufFile, GgufTokenizer (llama.cpp .gguf files)
#include "detail/io/train_state.hpp"                  // defines: save_train_state, load_train_state (resumable training)

// ---- policies: the generic Proposers, TreeBuilders, Verifier and Acceptors
#include "detail/policies/next_token.hpp"             // defines: prefill, next_token_logits, next_token_distribution
#include "detail/policies/proposers.hpp"              // defines: ModelProposer, NoProposer
#include "detail/policies/padded_vocab.hpp"           // defines: PaddedVocabProposer (a drafter whose vocabulary is a prefix of the target's)
#include "detail/policies/text_bridge.hpp"            // defines: TextBridgeProposer (a drafter with a tokenizer of its own)
#include "detail/policies/tree_builders.hpp"          // defines: RootOnly, Chain, KAryTree, DrawPolicy
#include "detail/policies/verifier.hpp"               // defines: TreeVerifier
#include "detail/policies/acceptors.hpp"              // defines: GreedyMatch, SampleAndMatch, MultiDraftSampling, SpeculativeSampling

// ---- train: training against a frozen target
#if !defined(SPECDEC_DECODING_ONLY)
#include "detail/train/gemm.hpp"                      // defines: gemm, gemm_reference (training's three products)
#include "detail/train/kernels.hpp"                   // defines: the training layers' AVX-512 kernels
#include "detail/train/layers.hpp"                    // defines: train:: layer forward/backward pairs, losses, AttentionMask
#include "detail/train/trainable_llama.hpp"           // defines: train::TrainableLlama (forward + hand-written backward)
#include "detail/train/optimizer.hpp"                 // defines: train::AdamW, train::CosineSchedule, train::clip_grad_norm
#include "detail/train/dataset.hpp"                   // defines: train::TokenFile, random_windows, evaluate, teacher cache
#include "detail/train/device_ops.hpp"                // defines: train::ops (the device trainer's steps: one functor per kernel)
#include "detail/train/device_llama.hpp"              // defines: train::DeviceLlama, DeviceTensors, DeviceAdamW (the trainer
                                                      //          written for a device: the GPU trainer with CudaDevice)
#include "detail/train/host_device.hpp"               // defines: train::HostDevice (the device trainer's kernels on the CPU)
#endif

// ---- loop: the decoding loop and its metrics
#include "detail/loop/generate.hpp"                   // defines: speculative_generate, autoregressive_generate, Generation, StepRecord
#include "detail/loop/policy_errors.hpp"              // defines: the overloads a malformed policy lands on (one error per missing member),
                                                      //          and the one that takes temporaries (`Chain{.gamma = 4}` in the call)
#include "detail/loop/metrics.hpp"                    // defines: summarize, Summary, expected_speedup, standardized_walltime_improvement

// ---- check: is a composition lossless? (docs/losslessness.md)
#include "detail/check/lossless.hpp"                  // defines: check::check_lossless, check::Report, check::Composition, check::greedy_identity,
                                                      //          check::exact_two_token_law, check::sampled_two_token_law, check::sampled_generations,
                                                      //          check::later_tokens_check, check::chi_square, check::chi_square_critical,
                                                      //          check::total_variation, check::AcceptEveryDraft, check::kMaxVocab

#if !defined(SPECDEC_DECODING_ONLY)
// ---- methods/cs_drafting: Cascade Speculative Drafting (cascade-speculative-drafting.txt)
#include "detail/methods/cs_drafting/cascade.hpp"     // defines: Review, Horizontal, MaxGram, Lenience, KMatrix (CS Drafting)
#include "detail/methods/cs_drafting/max_gram.hpp"    // defines: max_gram, Bigram, longest_earlier_suffix (CS Drafting's MaG)
#include "detail/methods/cs_drafting/cascade_analytics.hpp"// defines: cs_pgf, cs_ewif_sd, cs_ewif_vertical, cs_ewif_horizontal

// ---- methods/glide_cape: GLIDE with a CAPE (glide-cape.txt)
#include "detail/methods/glide_cape/glide.hpp"        // defines: GlideModel, GlideConfig, GlideWeights, load_glide_checkpoint (GLIDE's drafter)
#include "detail/methods/glide_cape/widen_glide.hpp"  // defines: widen_glide (GLIDE's drafter reading a widened target)
#include "detail/methods/glide_cape/cape.hpp"         // defines: ExpandedChain, ExpansionSizes (GLIDE's CAPE; CS Drafting's tree)
#include "detail/methods/glide_cape/train_glide.hpp"  // defines: train::TrainableGlide, glide_block_mask, target_kv
#include "detail/methods/glide_cape/device_glide.hpp" // defines: train::DeviceGlide (GLIDE's drafter trained on a device)
#endif  // !SPECDEC_DECODING_ONLY

// ---- methods/edd_pct: Effective Draft Decoder with a Pruned Candidate Tree (edd-pct.txt)
#include "detail/methods/edd_pct/pct.hpp"             // defines: PrunedCandidateTree, PctPrune, measure_forward_costs, ForwardCosts
#include "detail/methods/edd_pct/edd.hpp"             // defines: EddProposer, load_edd_checkpoint, edd_hidden_layer (EDD's drafter)
#if !defined(SPECDEC_DECODING_ONLY)
#include "detail/methods/edd_pct/train_edd.hpp"       // defines: train::dual_block_mask, edd_teacher, edd_batch, edd_forward_loss
#include "detail/methods/edd_pct/device_edd.hpp"      // defines: train::DeviceEdd (EDD's drafter trained on a device)
#endif

// ---- methods/eagle_fspad: EAGLE-2's dynamic tree, EAGLE's feature drafter, FSPAD (fspad.txt)
#include "detail/methods/eagle_fspad/eagle2_tree.hpp"  // defines: Eagle2Tree (EAGLE-2's dynamic draft tree: expand top-k, rerank top-N)
#include "detail/methods/eagle_fspad/feature_drafter.hpp"  // defines: FeatureProposer, FeatureDrafter, Connector, load_feature_checkpoint (EAGLE's / FSPAD's drafter)
#include "detail/methods/eagle_fspad/widen_feature.hpp"    // defines: widen_feature (EAGLE's / FSPAD's drafter reading a widened target)
#include "detail/methods/eagle_fspad/train_feature.hpp"    // defines: train::TrainableFeatureDrafter, feature_batch, feature_loss (L = 0.1 L_t + L_f)
#include "detail/methods/eagle_fspad/eagle_layout.hpp"     // defines: save_eagle_layout, load_eagle_layout, load_feature_drafter (SGLang's / vLLM's EAGLE folder)
#if !defined(SPECDEC_DECODING_ONLY)
#include "detail/methods/eagle_fspad/device_feature_drafter.hpp"  // defines: train::DeviceFeatureDrafter (EAGLE's / FSPAD's drafter trained on a device)
#endif

// ---- methods/mcsd: improved multi-candidate speculative decoding (improved-mcsd.txt)
#include "detail/methods/mcsd/mcsd_tree.hpp"           // defines: McsdTree, k_config_nodes (MCSD's draft-initialised k-config tree)
#include "detail/methods/mcsd/target_initialised.hpp"  // defines: TargetInitialisedTree, LossyTargetInitialisedSampling (lossy)
#include "detail/methods/mcsd/quality_loss.hpp"        // defines: total_variation, kl_divergence, log_likelihood (a lossy method's cost)
#include "detail/methods/mcsd/fork_mask.hpp"           // defines: ForkMask, ForkMaskSlice, fork_tree (the dynamic sliced mask)
#include "detail/methods/mcsd/decision_model.hpp"      // defines: DecisionModel, DecisionInput, law_features, stop_drafting (early stop)
#include "detail/methods/mcsd/dynamic_fork.hpp"        // defines: DynamicFork, DecisionStop, NoEarlyStop (the dynamic configuration)
#include "detail/methods/mcsd/target_initialised_fork.hpp"  // defines: TargetInitialisedFork (seeds + fork + early stop: the full framework)
#if !defined(SPECDEC_DECODING_ONLY)
#include "detail/methods/mcsd/train_decision.hpp"      // defines: log_drafting_steps, DecisionSample, train::train_decision_model
#endif

#if defined(__CUDACC__)
#include "detail/cuda/model.cuh"                      // defines: CudaModel, CudaContext (only in .cu files compiled by nvcc)
#include "detail/cuda/feature_drafter.cuh"            // defines: CudaFeatureDrafter (EAGLE's / FSPAD's drafter on the GPU)
#if !defined(SPECDEC_DECODING_ONLY)
#include "detail/cuda/glide.cuh"                      // defines: CudaGlideModel (GLIDE's drafter on the GPU, reading CudaModel's KV)
#include "detail/cuda/train_device.cuh"               // defines: train::CudaDevice (the device trainer on the GPU: kernels, bf16 products)
#endif
#endif
